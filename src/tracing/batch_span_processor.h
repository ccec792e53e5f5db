// tide::tracing BatchSpanProcessor: queues ended spans and exports them in batches from one
// background thread, never making the thread that ended a span wait for the network.
//
// Contract:
//  - OnEnd never blocks on export: it takes a mutex for a push (no I/O, no waiting). A full queue
//    (max_queue_size spans waiting) drops the span and counts it in dropped_queue_full; after
//    Shutdown every span is dropped (counted the same way).
//  - The thread exports a batch of up to max_export_batch_size spans when that many wait, when
//    schedule_delay has passed since the last export (or since the first span after an idle
//    spell: an empty queue sleeps without waking up, so a delay of 0 does not spin), or at once
//    for ForceFlush / Shutdown.
//  - One export may take several attempts: a retryable failure is retried after an exponential
//    backoff (initial_backoff doubling up to max_backoff, each delay scaled by a random factor in
//    [0.8, 1.2); a receiver's retry_after is used as given), until an attempt succeeds, a failure
//    is permanent, or the next attempt would start after export_timeout from the first (or after
//    the Shutdown deadline). Each attempt gets the time left as its timeout, at most
//    attempt_timeout. A batch given up is counted in failed_exports and its spans in failed_spans;
//    retries in retries.
//  - ForceFlush(deadline): waits until every span accepted before the call has been exported or
//    given up; false when `deadline` (on the injected Clock) came first.
//  - Shutdown(deadline): refuses new spans, exports what is queued as ForceFlush does, then stops the
//    thread; spans still queued at the deadline are counted in failed_spans. Returns whether
//    everything queued was handled in time. It may overrun `deadline` by the one export attempt in
//    flight (bounded by that attempt's timeout). Idempotent; the destructor calls it with no wait.
//  - All times (schedule delay, backoff, deadlines) are read from the injected tide::Clock, so tests
//    drive them with a FakeClock. Counters are lock-free reads (plain numbers for /metrics).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "tracing/span_data.h"
#include "tracing/span_exporter.h"
#include "tracing/span_processor.h"

namespace tide::tracing {

struct BatchSpanProcessorOptions {
  size_t max_queue_size = 2048;                       // OTEL_BSP_MAX_QUEUE_SIZE
  size_t max_export_batch_size = 512;                 // OTEL_BSP_MAX_EXPORT_BATCH_SIZE (<= queue)
  std::chrono::milliseconds schedule_delay{5000};     // OTEL_BSP_SCHEDULE_DELAY
  std::chrono::milliseconds export_timeout{30000};    // OTEL_BSP_EXPORT_TIMEOUT: all attempts of one batch
  std::chrono::milliseconds attempt_timeout{10000};   // OTEL_EXPORTER_OTLP_TIMEOUT: one attempt
  std::chrono::milliseconds initial_backoff{1000};
  std::chrono::milliseconds max_backoff{5000};
};

struct BatchSpanProcessorCounters {
  uint64_t exported_spans = 0;
  uint64_t dropped_queue_full = 0;
  uint64_t failed_spans = 0;
  uint64_t failed_exports = 0;
  uint64_t retries = 0;
};

class BatchSpanProcessor final : public SpanProcessor {
 public:
  // max_queue_size and max_export_batch_size are raised to at least 1 and the batch capped at the
  // queue (TracingOptions validates what users give).
  BatchSpanProcessor(BatchSpanProcessorOptions options, std::unique_ptr<SpanExporter> exporter,
                     Clock* clock = SteadyClock::Get());
  ~BatchSpanProcessor() override;

  void OnEnd(SpanData span) override;
  bool ForceFlush(Clock::time_point deadline);
  bool Shutdown(Clock::time_point deadline);

  BatchSpanProcessorCounters counters() const;
  size_t queued() const;
  // The message of the last failed export attempt ("" if none), for a log line.
  std::string last_error() const;

 private:
  void Run();
  // Exports one batch with retries; called without mu_.
  void ExportWithRetries(const std::vector<SpanData>& batch);
  bool WaitProcessed(uint64_t target, Clock::time_point deadline);

  const BatchSpanProcessorOptions options_;
  const std::unique_ptr<SpanExporter> exporter_;
  Clock* const clock_;

  mutable absl::Mutex mu_;
  absl::CondVar work_cv_;  // the thread waits here for spans, flushes, shutdown, backoff
  absl::CondVar done_cv_;  // ForceFlush / Shutdown wait here for progress
  std::deque<SpanData> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t accepted_ ABSL_GUARDED_BY(mu_) = 0;     // spans ever queued
  uint64_t processed_ ABSL_GUARDED_BY(mu_) = 0;    // spans exported or given up, in queue order
  uint64_t flush_target_ ABSL_GUARDED_BY(mu_) = 0; // export now until processed_ reaches this
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool idle_ ABSL_GUARDED_BY(mu_) = false;  // the thread sleeps until a span arrives
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  Clock::time_point shutdown_deadline_ ABSL_GUARDED_BY(mu_) = Clock::time_point::max();

  std::atomic<uint64_t> exported_spans_{0};
  std::atomic<uint64_t> dropped_queue_full_{0};
  std::atomic<uint64_t> failed_spans_{0};
  std::atomic<uint64_t> failed_exports_{0};
  std::atomic<uint64_t> retries_{0};

  std::once_flag join_once_;
  std::thread thread_;
};

}  // namespace tide::tracing
