#include "serving/shadow_lane.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "batching/thread_priority.h"
#include "common/error_echo.h"
#include "common/this_thread.h"
#include "serving/long_documents.h"
#include "spdlog/spdlog.h"

namespace tide::serving {

std::string_view ShadowRefusalName(ShadowLane::Refusal refusal) {
  switch (refusal) {
    case ShadowLane::Refusal::kNone: return "accepted";
    case ShadowLane::Refusal::kNotReady: return "not_ready";
    case ShadowLane::Refusal::kLiveWaiting: return "live_waiting";
    case ShadowLane::Refusal::kQueueFull: return "queue_full";
    case ShadowLane::Refusal::kBusy: return "busy";
    case ShadowLane::Refusal::kStopped: return "stopped";
  }
  return "unknown";
}

std::unique_ptr<ShadowLane> ShadowLane::Create(std::shared_ptr<ServedModel> model, ShadowLaneOptions options) {
  std::unique_ptr<ShadowLane> lane(new ShadowLane(std::move(model), std::move(options)));
  lane->reporter_ = std::thread([l = lane.get()] { l->ReporterLoop(); });
  lane->worker_ = std::thread([l = lane.get()] { l->WorkerLoop(); });
  return lane;
}

ShadowLane::ShadowLane(std::shared_ptr<ServedModel> model, ShadowLaneOptions options)
    : model_(std::move(model)),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : SteadyClock::Get()) {}

ShadowLane::~ShadowLane() {
  stopping_.store(true, std::memory_order_release);
  {
    absl::MutexLock lock(&queue_mu_);
    stop_ = true;
  }
  queue_cv_.SignalAll();
  if (worker_.joinable()) worker_.join();
  {
    absl::MutexLock lock(&mail_mu_);
    mail_closed_ = true;
  }
  mail_cv_.SignalAll();
  if (reporter_.joinable()) reporter_.join();
}

ShadowLane::Refusal ShadowLane::Offer(ShadowJob job) {
  // Cheap refusals first, without any lock.
  if (stopping_.load(std::memory_order_acquire)) return Refusal::kStopped;
  if (!ready()) {
    not_ready_.fetch_add(1, std::memory_order_relaxed);
    return Refusal::kNotReady;
  }
  if (LiveWaiting()) {
    live_refused_.fetch_add(1, std::memory_order_relaxed);
    return Refusal::kLiveWaiting;
  }
  if (queued_.load(std::memory_order_relaxed) >= options_.max_queued_jobs) {
    full_.fetch_add(1, std::memory_order_relaxed);
    return Refusal::kQueueFull;
  }
  // The worker runs under SCHED_IDLE: a live thread must never wait for a lock it holds.
  if (!queue_mu_.TryLock()) {
    busy_.fetch_add(1, std::memory_order_relaxed);
    return Refusal::kBusy;
  }
  Refusal refusal = Refusal::kNone;
  if (stop_) {
    refusal = Refusal::kStopped;
  } else if (queue_.size() >= options_.max_queued_jobs) {
    refusal = Refusal::kQueueFull;
    full_.fetch_add(1, std::memory_order_relaxed);
  } else {
    queue_.push_back(std::move(job));
    queued_.store(queue_.size(), std::memory_order_relaxed);
  }
  queue_mu_.Unlock();
  if (refusal == Refusal::kNone) queue_cv_.Signal();
  return refusal;
}

ShadowLane::Stats ShadowLane::GetStats() const {
  Stats s;
  s.scored = scored_.load();
  s.failed = failed_.load();
  s.refused_not_ready = not_ready_.load();
  s.refused_live_waiting = live_refused_.load();
  s.refused_queue_full = full_.load();
  s.refused_busy = busy_.load();
  s.abandoned_live_waiting = abandoned_live_.load();
  s.abandoned_deadline = abandoned_deadline_.load();
  s.preempted = preempted_.load();
  return s;
}

void ShadowLane::Report(ShadowDone done, absl::StatusOr<ShadowOutcome> result) {
  {
    absl::MutexLock lock(&mail_mu_);
    mail_.emplace_back(std::move(done), std::move(result));
  }
  mail_cv_.Signal();
}

void ShadowLane::ReporterLoop() {
  this_thread::SetCurrentThreadName("tide-shadow-rep");
  while (true) {
    std::deque<std::pair<ShadowDone, absl::StatusOr<ShadowOutcome>>> batch;
    {
      absl::MutexLock lock(&mail_mu_);
      while (mail_.empty() && !mail_closed_) mail_cv_.Wait(&mail_mu_);
      if (mail_.empty()) return;  // closed and drained
      batch.swap(mail_);
    }
    for (auto& [done, result] : batch) std::move(done)(std::move(result));
  }
}

void ShadowLane::WorkerLoop() {
  this_thread::SetCurrentThreadName("tide-shadow");
  // Opening and warming up allocate and fault in memory (the process-wide mmap lock, which live
  // threads need too): done at the lowest nice level, never under SCHED_IDLE, where a preempted
  // holder could keep live threads waiting. Without idle scheduling: options.nice throughout.
  const int open_nice = options_.idle_scheduling ? 19 : options_.nice;
  if (absl::Status s = batching::LowerCurrentThreadPriority(std::clamp(open_nice - batching::CurrentThreadNice(), 0, 19));
      !s.ok()) {
    spdlog::warn("model {} version {}: shadow lane: {}", EscapeForLog(model_->name()), model_->version(),
                 EscapeForLog(s.ToString()));
  }
  auto backend = model_->OpenBackend(kShadowLaneInstance);
  absl::Status opened = backend.status();
  if (opened.ok()) {
    backend_ = *std::move(backend);
    opened = WarmUp();
  }
  if (opened.ok() && options_.idle_scheduling) opened = batching::UseIdleSchedulingForCurrentThread();
  if (opened.ok()) {
    // From now on live rows queued on these versions stop the running batch.
    terminator_ = backend_->terminator();
    if (terminator_ != nullptr) {
      for (const auto& live : options_.preempted_by) live->live_preemption().Attach(terminator_);
    }
    state_.store(State::kReady, std::memory_order_release);
    spdlog::info("model {} version {}: shadow lane open (SCHED_IDLE {})", EscapeForLog(model_->name()), model_->version(),
                 options_.idle_scheduling ? "on" : "off");
  } else {
    spdlog::error("model {} version {}: shadow lane not opened: {}", EscapeForLog(model_->name()), model_->version(),
                  EscapeForLog(opened.ToString()));
    state_.store(State::kFailed, std::memory_order_release);
  }
  while (true) {
    ShadowJob job;
    {
      absl::MutexLock lock(&queue_mu_);
      while (queue_.empty() && !stop_) queue_cv_.Wait(&queue_mu_);
      if (stop_) {
        state_.store(State::kStopped, std::memory_order_release);
        for (ShadowJob& left : queue_) {
          Report(std::move(left.done), absl::CancelledError("shadow lane closed"));
        }
        queue_.clear();
        queued_.store(0, std::memory_order_relaxed);
        break;
      }
      job = std::move(queue_.front());
      queue_.pop_front();
      queued_.store(queue_.size(), std::memory_order_relaxed);
    }
    absl::StatusOr<ShadowOutcome> result = Score(job);
    if (result.ok()) {
      scored_.fetch_add(1, std::memory_order_relaxed);
    } else if (result.status().code() == absl::StatusCode::kUnavailable) {
      abandoned_live_.fetch_add(1, std::memory_order_relaxed);
    } else if (result.status().code() == absl::StatusCode::kDeadlineExceeded) {
      abandoned_deadline_.fetch_add(1, std::memory_order_relaxed);
    } else if (result.status().code() == absl::StatusCode::kAborted) {
      preempted_.fetch_add(1, std::memory_order_relaxed);
    } else {
      failed_.fetch_add(1, std::memory_order_relaxed);
    }
    Report(std::move(job.done), std::move(result));
  }
  if (terminator_ != nullptr) {
    // Once detached no live thread reaches the terminator: the backend may go.
    for (const auto& live : options_.preempted_by) live->live_preemption().Detach(terminator_);
    terminator_ = nullptr;
  }
  backend_.reset();  // closed on this thread, as it was opened
}

absl::Status ShadowLane::WarmUp() {
  // The largest batches the lane forms: its arena is then sized, and later runs map no memory.
  const ServedModel& m = *model_;
  const bool with_type_ids = !backend_->signature().token_type_ids_name.empty();
  const int64_t seq = static_cast<int64_t>(m.max_sequence_length());
  const size_t cap = m.batch_token_cap();
  const int64_t rows = static_cast<int64_t>(
      std::max<size_t>(1, std::min(m.max_batch_size(), cap / std::max<size_t>(m.max_sequence_length(), 1))));
  const int64_t short_seq = std::max<int64_t>(1, std::min<int64_t>(seq, static_cast<int64_t>(cap / m.max_batch_size())));
  for (auto [b, s] : {std::pair{rows, seq}, std::pair{static_cast<int64_t>(m.max_batch_size()), short_seq}}) {
    input_.Resize(b, s, with_type_ids);
    std::fill(input_.input_ids.begin(), input_.input_ids.end(), m.tokenizer().pad_id());
    std::fill(input_.attention_mask.begin(), input_.attention_mask.end(), 1);
    if (absl::Status st = backend_->Run(input_, &logits_); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat("warm-up [", b, " x ", s, "]: ", st.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ShadowOutcome> ShadowLane::Score(const ShadowJob& job) {
  Clock::duration yielded{};  // real time spent yielding to live rows
  auto pause = [&] {
    // Real time, whatever clock the deadlines use.
    const auto before = std::chrono::steady_clock::now();
    absl::SleepFor(absl::FromChrono(options_.yield_poll));
    yielded += std::chrono::duration_cast<Clock::duration>(std::chrono::steady_clock::now() - before);
  };
  auto yield = [&]() -> absl::Status {
    while (true) {
      if (clock_->Now() >= job.deadline) return absl::DeadlineExceededError("shadow: deadline passed");
      const bool own_live_pending = job.live_submitted != nullptr && !job.live_submitted->load(std::memory_order_acquire);
      if (!own_live_pending && LiveQuiet()) return absl::OkStatus();
      if (yielded >= options_.max_yield) return absl::UnavailableError("shadow: live rows kept waiting");
      if (stopping_.load(std::memory_order_acquire)) return absl::CancelledError("shadow lane closed");
      pause();
    }
  };
  if (absl::Status s = yield(); !s.ok()) return s;
  const auto start = std::chrono::steady_clock::now();  // run_time is real time, like `yielded`
  const Clock::duration yielded_before_start = yielded;
  std::vector<tokenizer::Encoding> tokenized;
  DocumentWindows windows;  // split: long documents, folded back below
  if (job.rows.empty()) {
    std::vector<std::string_view> docs(job.documents.begin(), job.documents.end());
    if (job.options.long_documents != LongDocuments::kTruncate) {
      if (absl::Status s = SplitLongDocuments(*model_, job.query, docs,
                                              ChunkOptionsFor(*model_, job.options.long_documents), &windows);
          !s.ok()) {
        return s;
      }
    }
    std::span<const std::string_view> inputs = windows.split ? std::span<const std::string_view>(windows.windows)
                                                             : std::span<const std::string_view>(docs);
    if (absl::Status s = TokenizePairs(*model_, job.query, inputs, job.options, &tokenized, yield); !s.ok()) return s;
  }
  const std::vector<tokenizer::Encoding>& rows = job.rows.empty() ? tokenized : job.rows;
  const ServedModel& m = *model_;
  const int64_t labels = m.num_labels();
  const bool with_type_ids = !backend_->signature().token_type_ids_name.empty();
  const int64_t pad_id = m.tokenizer().pad_id();
  const config::ScoreActivation activation = m.parameters().score_activation;
  ShadowOutcome out;
  const bool vectors = job.vectors && !job.rows.empty();
  out.scores.resize(vectors ? rows.size() * static_cast<size_t>(labels) : rows.size());
  size_t begin = 0;
  while (begin < rows.size()) {
    // Clear the terminator first, then look for live rows: a live Submit after the look stops the
    // Run below; one before it is seen by the look. A signal that came while yielding (live rows
    // queued and already taken) is cleared and looked at again.
    // Live rows signalled meanwhile (and already taken by an instance): they get one more poll
    // interval, counted as yielding, before the batch starts.
    while (true) {
      if (terminator_ != nullptr) terminator_->Reset();
      if (absl::Status s = yield(); !s.ok()) return s;
      if (terminator_ == nullptr || !terminator_->terminated()) break;
      if (yielded >= options_.max_yield) return absl::UnavailableError("shadow: live rows kept arriving");
      pause();
    }
    // As many rows as fit max_batch_size and the live batcher's token cap (max_batch_tokens, or
    // the batch saturation when smaller), padded to the longest; a row past the cap runs alone.
    size_t end = begin, longest = 0;
    while (end < rows.size() && end - begin < m.max_batch_size()) {
      const size_t len = std::max(longest, rows[end].ids.size());
      if (end > begin && len * (end - begin + 1) > m.batch_token_cap()) break;
      longest = len;
      ++end;
    }
    const int64_t n = static_cast<int64_t>(end - begin), seq = static_cast<int64_t>(std::max<size_t>(longest, 1));
    input_.Resize(n, seq, with_type_ids);
    std::fill(input_.input_ids.begin(), input_.input_ids.end(), pad_id);
    for (int64_t r = 0; r < n; ++r) {
      const tokenizer::Encoding& e = rows[begin + static_cast<size_t>(r)];
      const auto base = static_cast<ptrdiff_t>(r * seq);
      std::copy(e.ids.begin(), e.ids.end(), input_.input_ids.begin() + base);
      std::copy(e.attention_mask.begin(), e.attention_mask.end(), input_.attention_mask.begin() + base);
      if (with_type_ids) std::copy(e.type_ids.begin(), e.type_ids.end(), input_.token_type_ids.begin() + base);
    }
    if (absl::Status s = backend_->Run(input_, &logits_); !s.ok()) {
      // Stopped for live rows: dropped, not the version's failure.
      if (terminator_ != nullptr && terminator_->terminated()) {
        return absl::AbortedError("shadow: preempted by live rows");
      }
      return absl::InternalError(absl::StrCat("shadow: inference failed: ", s.message()));
    }
    if (logits_.batch != n || logits_.num_labels != labels ||
        logits_.values.size() != static_cast<size_t>(n * labels)) {
      return absl::InternalError("shadow: logits of the wrong shape");
    }
    if (vectors) {
      std::copy(logits_.values.begin(), logits_.values.end(),
                out.scores.begin() + static_cast<ptrdiff_t>(begin * static_cast<size_t>(labels)));
    }
    for (int64_t r = 0; r < n && !vectors; ++r) {
      out.scores[begin + static_cast<size_t>(r)] =
          RerankScore(std::span<const float>(logits_.values.data() + r * labels, static_cast<size_t>(labels)),
                      activation, job.raw_scores);
    }
    begin = end;
  }
  if (windows.split) {
    out.scores = FoldWindowScores(job.options.long_documents, windows.owner, out.scores, job.documents.size());
  }
  out.run_time = std::chrono::duration_cast<Clock::duration>(std::chrono::steady_clock::now() - start) -
                 (yielded - yielded_before_start);
  out.contended = LiveWaiting();
  return out;
}

}  // namespace tide::serving
