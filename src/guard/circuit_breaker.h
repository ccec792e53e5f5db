// tide::guard::CircuitBreaker — per-model circuit breaker that decides, per request, whether the
// model serves it or a fallback (BM25 for rerankers, a default result or 503 for classifiers).
//
// Contract:
//  - Thread-safe: every method may be called concurrently from any thread. Admit() is lock-free
//    while closed (one atomic load) and while open before open_duration ends (plus a clock read),
//    so an overloaded or failing model costs nothing extra per request; other calls hold an internal mutex briefly (O(1), or
//    O(LatencyWindow::kBuckets) when a transition's reason is formatted). Nothing allocates per
//    request; only transitions format a reason string.
//  - Non-blocking: no call waits for anything but the internal mutex.
//  - States: kClosed (model serves everything) -> kOpen (fallback serves everything) after any
//    enabled trigger fires; kOpen -> kHalfOpen once open_duration has passed (checked by Admit);
//    kHalfOpen lets half_open_probes requests through to the model: when that many probes succeed
//    it closes (and forgets the window), the first failed or slow probe re-opens it. Any other
//    request in kHalfOpen gets the fallback.
//  - Caller duty: every Admit() that answers kModel is followed by exactly one Record() once the
//    model answered (ok = false for model failures: runtime error, timeout, UNAVAILABLE; client
//    errors such as bad input are not the model's fault and are recorded ok = true or not at all).
//    If a probe is never recorded (client left), the breaker admits a fresh round of probes after
//    another open_duration, so a lost probe cannot wedge it half-open.
//    Record() in kHalfOpen counts as a probe result even for a request admitted earlier while
//    closed: it is still a fresh observation of the model. Record() in kOpen is ignored.
//  - Triggers (all optional, evaluated on Record/ObserveQueue while closed):
//      P99:        rolling nearest-rank P99 latency over latency_window > p99_threshold, once the
//                  window holds min_samples samples (exact comparison, see LatencyWindow).
//      error rate: errors / requests over latency_window >= error_rate_threshold, once the window
//                  holds min_requests requests.
//      queue:      ObserveQueue(fullness) with fullness >= queue_fullness_threshold (also re-opens
//                  from kHalfOpen: a still-full queue means the model has not recovered).
//  - on_transition(from, to, reason) is called under the internal lock, on the thread that caused
//    the transition, so transitions are reported one at a time and in order (each `from` is the
//    previous `to`). It must be quick (log a line, bump a metric) and must not call the breaker
//    except state(), which is lock-free.
//  - The clock must outlive the breaker.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "guard/latency_window.h"

namespace tide::guard {

// The numeric values are stable: export them as the state gauge (0 closed, 1 open, 2 half-open).
enum class BreakerState { kClosed = 0, kOpen = 1, kHalfOpen = 2 };
std::string_view BreakerStateName(BreakerState state);  // "closed", "open", "half_open"

using BreakerTransitionCallback =
    std::function<void(BreakerState from, BreakerState to, std::string_view reason)>;

struct CircuitBreakerOptions {
  using duration = Clock::duration;

  // P99 trigger: open when the rolling P99 latency exceeds this. 0 = off. (breaker_p99_ms)
  duration p99_threshold = duration::zero();
  // Length of the rolling window for the P99 and error-rate triggers. (breaker_window_s)
  duration latency_window = std::chrono::seconds(10);
  // Number of slices the window is cut into; the window rolls one slice at a time.
  int window_slices = 10;
  // The P99 trigger waits for this many samples in the window (a P99 of 5 samples is noise).
  int64_t min_samples = 100;
  // Error-rate trigger, in [0, 1]: open when errors/requests >= this. 0 = off. (breaker_error_rate)
  double error_rate_threshold = 0.0;
  // The error-rate trigger waits for this many requests in the window.
  int64_t min_requests = 20;
  // Queue trigger, in [0, 1] of the scheduler's max queue: open when an observed fullness is
  // >= this. 0 = off. (breaker_queue_fullness)
  double queue_fullness_threshold = 0.0;
  // How long the breaker stays open before letting probes through. (breaker_open_s)
  duration open_duration = std::chrono::seconds(5);
  // Requests let through to the model while half-open; all must succeed to close. (breaker_probes)
  int half_open_probes = 3;

  // Not owned; nullptr = SteadyClock::Get().
  Clock* clock = nullptr;
  // Called on every state change (for logs and metrics); may be empty.
  BreakerTransitionCallback on_transition;
};

// INVALID_ARGUMENT naming the first bad field.
absl::Status ValidateCircuitBreakerOptions(const CircuitBreakerOptions& options);

class CircuitBreaker {
 public:
  using duration = Clock::duration;
  using time_point = Clock::time_point;

  enum class Decision { kModel, kFallback };

  struct Outcome {
    duration latency = duration::zero();  // end-to-end or inference latency, as configured
    bool ok = true;
  };

  // A consistent view for metrics and logs.
  struct Stats {
    BreakerState state = BreakerState::kClosed;
    int64_t window_requests = 0;
    int64_t window_errors = 0;
    duration window_p99 = duration::zero();  // bucket estimate (over by at most 25%)
    int64_t transitions = 0;                 // since creation
    duration open_remaining = duration::zero();  // time left before half-open; 0 unless open
  };

  // INVALID_ARGUMENT when the options are out of range.
  static absl::StatusOr<std::unique_ptr<CircuitBreaker>> Create(CircuitBreakerOptions options);

  CircuitBreaker(const CircuitBreaker&) = delete;
  CircuitBreaker& operator=(const CircuitBreaker&) = delete;

  Decision Admit();
  void Record(const Outcome& outcome);
  // Fullness of the model's queue in [0, 1] (queue size / max queue size), e.g. at each Submit.
  void ObserveQueue(double fullness);

  BreakerState state() const { return state_.load(std::memory_order_acquire); }
  Stats GetStats() const;
  // Suggested Retry-After for a 503 answered while open: the time left before half-open, at
  // least one second.
  duration RetryAfter() const;
  const CircuitBreakerOptions& options() const { return options_; }

 private:
  // Implementation details follow.
  CircuitBreaker(CircuitBreakerOptions options, Clock* clock);

  // Changes state and reports it; `reason` is only formatted on transitions.
  void TransitionLocked(BreakerState to, time_point now, std::string_view reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  time_point OpenUntil() const;
  // Evaluates the window triggers while closed.
  void CheckTriggersLocked(time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CircuitBreakerOptions options_;
  Clock* const clock_;

  mutable absl::Mutex mu_;
  // Written under mu_, read lock-free by Admit's fast paths, state() and RetryAfter().
  std::atomic<BreakerState> state_{BreakerState::kClosed};
  // When kOpen may become kHalfOpen, as steady-clock ticks since the clock's epoch. Stored before
  // state_ on opening, so a reader that sees kOpen sees this open period's deadline or a later one.
  std::atomic<duration::rep> open_until_ticks_{0};
  mutable LatencyWindow window_ ABSL_GUARDED_BY(mu_);  // reads expire old slices
  time_point probe_round_start_ ABSL_GUARDED_BY(mu_); // when the current probe round began
  int probes_admitted_ ABSL_GUARDED_BY(mu_) = 0;
  int probes_succeeded_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t transitions_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tide::guard
