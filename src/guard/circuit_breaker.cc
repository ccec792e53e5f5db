#include "guard/circuit_breaker.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace tide::guard {
namespace {

double Millis(CircuitBreaker::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace

std::string_view BreakerStateName(BreakerState state) {
  switch (state) {
    case BreakerState::kClosed:
      return "closed";
    case BreakerState::kOpen:
      return "open";
    case BreakerState::kHalfOpen:
      return "half_open";
  }
  return "unknown";
}

absl::Status ValidateCircuitBreakerOptions(const CircuitBreakerOptions& o) {
  using duration = CircuitBreakerOptions::duration;
  if (o.p99_threshold < duration::zero()) {
    return absl::InvalidArgumentError("breaker p99_threshold must be >= 0 (0 = off)");
  }
  if (o.latency_window <= duration::zero()) {
    return absl::InvalidArgumentError("breaker latency_window must be > 0");
  }
  if (o.window_slices < 1 || o.window_slices > 3600) {
    return absl::InvalidArgumentError("breaker window_slices must be in [1, 3600]");
  }
  if (o.latency_window / o.window_slices <= duration::zero()) {
    return absl::InvalidArgumentError("breaker latency_window is too short for window_slices");
  }
  if (o.min_samples < 1) return absl::InvalidArgumentError("breaker min_samples must be >= 1");
  if (!(o.error_rate_threshold >= 0.0 && o.error_rate_threshold <= 1.0)) {
    return absl::InvalidArgumentError("breaker error_rate_threshold must be in [0, 1] (0 = off)");
  }
  if (o.min_requests < 1) return absl::InvalidArgumentError("breaker min_requests must be >= 1");
  if (!(o.queue_fullness_threshold >= 0.0 && o.queue_fullness_threshold <= 1.0)) {
    return absl::InvalidArgumentError("breaker queue_fullness_threshold must be in [0, 1] (0 = off)");
  }
  if (o.open_duration < duration::zero()) {
    return absl::InvalidArgumentError("breaker open_duration must be >= 0");
  }
  if (o.half_open_probes < 1) {
    return absl::InvalidArgumentError("breaker half_open_probes must be >= 1");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CircuitBreaker>> CircuitBreaker::Create(CircuitBreakerOptions options) {
  TIDE_RETURN_IF_ERROR(ValidateCircuitBreakerOptions(options));
  Clock* clock = options.clock != nullptr ? options.clock : SteadyClock::Get();
  return std::unique_ptr<CircuitBreaker>(new CircuitBreaker(std::move(options), clock));
}

CircuitBreaker::CircuitBreaker(CircuitBreakerOptions options, Clock* clock)
    : options_(std::move(options)),
      clock_(clock),
      window_(options_.latency_window, options_.window_slices, options_.p99_threshold, clock->Now()) {}

void CircuitBreaker::TransitionLocked(BreakerState to, time_point now, std::string_view reason) {
  const BreakerState from = state_.load(std::memory_order_relaxed);
  if (from == to) return;
  switch (to) {
    case BreakerState::kOpen:
      open_until_ticks_.store((now + options_.open_duration).time_since_epoch().count(),
                              std::memory_order_release);
      break;
    case BreakerState::kHalfOpen:
      probe_round_start_ = now;
      probes_admitted_ = 0;
      probes_succeeded_ = 0;
      break;
    case BreakerState::kClosed:
      // Latencies from before and during the outage must not re-open a recovered model.
      window_.Clear();
      break;
  }
  state_.store(to, std::memory_order_release);
  ++transitions_;
  if (options_.on_transition) options_.on_transition(from, to, reason);
}

CircuitBreaker::time_point CircuitBreaker::OpenUntil() const {
  return time_point(duration(open_until_ticks_.load(std::memory_order_acquire)));
}

CircuitBreaker::Decision CircuitBreaker::Admit() {
  const BreakerState seen = state_.load(std::memory_order_acquire);
  if (seen == BreakerState::kClosed) return Decision::kModel;
  const time_point now = clock_->Now();
  if (seen == BreakerState::kOpen && now < OpenUntil()) return Decision::kFallback;
  Decision decision = Decision::kFallback;
  {
    absl::MutexLock lock(&mu_);
    BreakerState state = state_.load(std::memory_order_relaxed);
    if (state == BreakerState::kOpen && now >= OpenUntil()) {
      TransitionLocked(BreakerState::kHalfOpen, now,
                       absl::StrFormat("open for %.0f ms; probing with %d request(s)",
                                       Millis(options_.open_duration), options_.half_open_probes));
      state = BreakerState::kHalfOpen;
    }
    switch (state) {
      case BreakerState::kClosed:
        decision = Decision::kModel;
        break;
      case BreakerState::kOpen:
        decision = Decision::kFallback;
        break;
      case BreakerState::kHalfOpen:
        if (probes_admitted_ >= options_.half_open_probes &&
            now >= probe_round_start_ + options_.open_duration) {
          // Some probes never reported back; start a new round rather than stay half-open forever.
          probe_round_start_ = now;
          probes_admitted_ = probes_succeeded_;
        }
        if (probes_admitted_ < options_.half_open_probes) {
          ++probes_admitted_;
          decision = Decision::kModel;
        }
        break;
    }
  }
  return decision;
}

void CircuitBreaker::CheckTriggersLocked(time_point now) {
  const LatencyWindow::Totals totals = window_.GetTotals(now);
  if (options_.p99_threshold > duration::zero() && totals.requests >= options_.min_samples &&
      window_.SlowExceedsQuantile(now, 0.99)) {
    TransitionLocked(BreakerState::kOpen, now,
                     absl::StrFormat("p99 latency ~%.1f ms > %.1f ms over %d requests",
                                     Millis(window_.Quantile(now, 0.99)),
                                     Millis(options_.p99_threshold), totals.requests));
    return;
  }
  if (options_.error_rate_threshold > 0.0 && totals.requests >= options_.min_requests) {
    const double rate = static_cast<double>(totals.errors) / static_cast<double>(totals.requests);
    if (rate >= options_.error_rate_threshold) {
      TransitionLocked(BreakerState::kOpen, now,
                       absl::StrFormat("error rate %.3f >= %.3f (%d of %d requests)", rate,
                                       options_.error_rate_threshold, totals.errors, totals.requests));
    }
  }
}

void CircuitBreaker::Record(const Outcome& outcome) {
  const time_point now = clock_->Now();
  {
    absl::MutexLock lock(&mu_);
    switch (state_.load(std::memory_order_relaxed)) {
      case BreakerState::kClosed:
        window_.Add(now, outcome.latency, outcome.ok);
        CheckTriggersLocked(now);
        break;
      case BreakerState::kOpen:
        break;  // The fallback is serving; late model results say nothing new.
      case BreakerState::kHalfOpen: {
        const bool slow =
            options_.p99_threshold > duration::zero() && outcome.latency > options_.p99_threshold;
        if (!outcome.ok) {
          TransitionLocked(BreakerState::kOpen, now, "half-open probe failed");
        } else if (slow) {
          TransitionLocked(BreakerState::kOpen, now,
                           absl::StrFormat("half-open probe took %.1f ms > %.1f ms",
                                           Millis(outcome.latency), Millis(options_.p99_threshold)));
        } else if (++probes_succeeded_ >= options_.half_open_probes) {
          TransitionLocked(BreakerState::kClosed, now,
                           absl::StrFormat("%d half-open probe(s) succeeded", probes_succeeded_));
        }
        break;
      }
    }
  }
}

void CircuitBreaker::ObserveQueue(double fullness) {
  if (options_.queue_fullness_threshold <= 0.0 || !(fullness >= options_.queue_fullness_threshold)) {
    return;
  }
  if (state_.load(std::memory_order_acquire) == BreakerState::kOpen) return;
  const time_point now = clock_->Now();
  {
    absl::MutexLock lock(&mu_);
    if (state_.load(std::memory_order_relaxed) != BreakerState::kOpen) {
      TransitionLocked(BreakerState::kOpen, now,
                       absl::StrFormat("queue fullness %.3f >= %.3f", fullness,
                                       options_.queue_fullness_threshold));
    }
  }
}

CircuitBreaker::Stats CircuitBreaker::GetStats() const {
  const time_point now = clock_->Now();
  absl::MutexLock lock(&mu_);
  Stats stats;
  stats.state = state_.load(std::memory_order_relaxed);
  const LatencyWindow::Totals totals = window_.GetTotals(now);
  stats.window_requests = totals.requests;
  stats.window_errors = totals.errors;
  stats.window_p99 = window_.Quantile(now, 0.99);
  stats.transitions = transitions_;
  if (stats.state == BreakerState::kOpen && OpenUntil() > now) stats.open_remaining = OpenUntil() - now;
  return stats;
}

CircuitBreaker::duration CircuitBreaker::RetryAfter() const {
  duration remaining = duration::zero();
  if (state_.load(std::memory_order_acquire) == BreakerState::kOpen) {
    const time_point now = clock_->Now();
    if (OpenUntil() > now) remaining = OpenUntil() - now;
  }
  return std::max<duration>(remaining, std::chrono::seconds(1));
}

}  // namespace tide::guard
