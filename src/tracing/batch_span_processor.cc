#include "tracing/batch_span_processor.h"

#include <algorithm>
#include <utility>

#include "tracing/span_context.h"

namespace tide::tracing {
namespace {

BatchSpanProcessorOptions Sanitize(BatchSpanProcessorOptions options) {
  options.max_queue_size = std::max<size_t>(options.max_queue_size, 1);
  options.max_export_batch_size =
      std::clamp<size_t>(options.max_export_batch_size, 1, options.max_queue_size);
  return options;
}

}  // namespace

BatchSpanProcessor::BatchSpanProcessor(BatchSpanProcessorOptions options, std::unique_ptr<SpanExporter> exporter,
                                       Clock* clock)
    : options_(Sanitize(options)), exporter_(std::move(exporter)), clock_(clock) {
  thread_ = std::thread([this] { Run(); });
}

BatchSpanProcessor::~BatchSpanProcessor() { Shutdown(clock_->Now()); }

void BatchSpanProcessor::OnEnd(SpanData span) {
  absl::MutexLock lock(&mu_);
  if (shutting_down_ || queue_.size() >= options_.max_queue_size) {
    dropped_queue_full_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  queue_.push_back(std::move(span));
  ++accepted_;
  if (idle_ || queue_.size() == options_.max_export_batch_size) {
    idle_ = false;
    work_cv_.Signal();
  }
}

bool BatchSpanProcessor::WaitProcessed(uint64_t target, Clock::time_point deadline) {
  // mu_ held.
  while (processed_ < target) {
    if (clock_->Now() >= deadline) return false;
    clock_->WaitUntil(&done_cv_, &mu_, deadline);
  }
  return true;
}

bool BatchSpanProcessor::ForceFlush(Clock::time_point deadline) {
  absl::MutexLock lock(&mu_);
  const uint64_t target = accepted_;
  flush_target_ = std::max(flush_target_, target);
  work_cv_.Signal();
  return WaitProcessed(target, deadline);
}

bool BatchSpanProcessor::Shutdown(Clock::time_point deadline) {
  bool in_time = true;
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return processed_ >= accepted_;
    shutting_down_ = true;
    shutdown_deadline_ = std::min(shutdown_deadline_, deadline);
    flush_target_ = std::max(flush_target_, accepted_);
    work_cv_.Signal();
    in_time = WaitProcessed(accepted_, deadline);
    stop_ = true;
    work_cv_.Signal();
  }
  std::call_once(join_once_, [this] { thread_.join(); });
  return in_time;
}

BatchSpanProcessorCounters BatchSpanProcessor::counters() const {
  BatchSpanProcessorCounters c;
  c.exported_spans = exported_spans_.load(std::memory_order_relaxed);
  c.dropped_queue_full = dropped_queue_full_.load(std::memory_order_relaxed);
  c.failed_spans = failed_spans_.load(std::memory_order_relaxed);
  c.failed_exports = failed_exports_.load(std::memory_order_relaxed);
  c.retries = retries_.load(std::memory_order_relaxed);
  return c;
}

std::string BatchSpanProcessor::last_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

size_t BatchSpanProcessor::queued() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

void BatchSpanProcessor::Run() {
  absl::MutexLock lock(&mu_);
  Clock::time_point next_export = clock_->Now() + options_.schedule_delay;
  for (;;) {
    while (!stop_ && queue_.size() < options_.max_export_batch_size && processed_ >= flush_target_ &&
           (queue_.empty() || clock_->Now() < next_export)) {
      if (queue_.empty()) {
        // Idle: sleep until the first span (OnEnd signals), then give it the schedule delay.
        idle_ = true;
        clock_->WaitUntil(&work_cv_, &mu_, Clock::time_point::max());
        idle_ = false;
        next_export = clock_->Now() + options_.schedule_delay;
      } else {
        clock_->WaitUntil(&work_cv_, &mu_, next_export);
      }
    }
    if (stop_) break;
    if (queue_.empty()) continue;
    const size_t n = std::min(queue_.size(), options_.max_export_batch_size);
    std::vector<SpanData> batch;
    batch.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    mu_.Unlock();
    ExportWithRetries(batch);
    mu_.Lock();
    processed_ += n;
    done_cv_.SignalAll();
    next_export = clock_->Now() + options_.schedule_delay;
  }
  // Stopped: whatever is still queued was not exported in time.
  failed_spans_.fetch_add(queue_.size(), std::memory_order_relaxed);
  processed_ += queue_.size();
  queue_.clear();
  done_cv_.SignalAll();
}

void BatchSpanProcessor::ExportWithRetries(const std::vector<SpanData>& batch) {
  Clock::time_point deadline = clock_->Now() + options_.export_timeout;
  std::chrono::milliseconds backoff = options_.initial_backoff;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      deadline = std::min(deadline, shutdown_deadline_);
    }
    const Clock::time_point now = clock_->Now();
    const auto left =
        std::min(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now), options_.attempt_timeout);
    ExportResult result = left.count() > 0 ? exporter_->Export(batch, left)
                                           : ExportResult::Failed("export timeout reached");
    if (result.ok()) {
      exported_spans_.fetch_add(batch.size(), std::memory_order_relaxed);
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      last_error_ = result.message;
    }
    std::chrono::milliseconds delay;
    if (result.retry_after) {
      delay = *result.retry_after;
    } else {
      const double jitter = 0.8 + 0.4 * static_cast<double>(IdGenerator::Next64() >> 11) / 9007199254740992.0;
      delay = std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(backoff.count()) * jitter));
      backoff = std::min(backoff * 2, options_.max_backoff);
    }
    const Clock::time_point wake = clock_->Now() + delay;
    absl::MutexLock lock(&mu_);
    deadline = std::min(deadline, shutdown_deadline_);
    if (result.code != ExportResult::Code::kRetryable || wake >= deadline || stop_) {
      failed_exports_.fetch_add(1, std::memory_order_relaxed);
      failed_spans_.fetch_add(batch.size(), std::memory_order_relaxed);
      return;
    }
    retries_.fetch_add(1, std::memory_order_relaxed);
    while (!stop_ && clock_->Now() < wake && shutdown_deadline_ > clock_->Now()) {
      clock_->WaitUntil(&work_cv_, &mu_, std::min(wake, shutdown_deadline_));
    }
  }
}

}  // namespace tide::tracing
