// tide::guard::TokenBucket — a rate limit: `rate` tokens per second, at most `burst` saved up.
//
// Contract:
//  - TryTake(n) takes n tokens when the bucket holds at least min(n, burst) of them; the balance
//    may then go negative (a request larger than the burst is admitted once the bucket is full, and
//    its cost is paid back before the next one passes). So a caller is never refused forever, and
//    over time the bucket admits `rate` tokens per second on average, whatever the request sizes.
//  - Refused: TryTake returns the time until enough tokens will be there (for Retry-After);
//    admitted: zero. A refusal takes nothing.
//  - rate <= 0 means unlimited (TryTake always admits). The bucket starts full.
//  - Thread-safe (one mutex; the critical section is a few arithmetic operations). Time comes from
//    an injected Clock, so tests drive it with a FakeClock.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace tide::guard {

class TokenBucket {
 public:
  // burst <= 0: one second's worth of tokens (at least 1).
  TokenBucket(const Clock* clock, double rate, double burst = 0)
      : clock_(clock),
        rate_(rate),
        burst_(burst > 0 ? burst : std::max(rate, 1.0)),
        tokens_(burst_),
        last_(clock->Now()) {}

  TokenBucket(const TokenBucket&) = delete;
  TokenBucket& operator=(const TokenBucket&) = delete;

  // Zero when admitted; otherwise how long until it would be.
  Clock::duration TryTake(double n) {
    if (rate_ <= 0) return Clock::duration::zero();
    absl::MutexLock lock(&mu_);
    Refill();
    const double needed = std::min(n, burst_);
    if (tokens_ >= needed) {
      tokens_ -= n;
      return Clock::duration::zero();
    }
    const double seconds = (needed - tokens_) / rate_;
    return std::max(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)),
                    Clock::duration(1));
  }

  double rate() const { return rate_; }
  double burst() const { return burst_; }

 private:
  void Refill() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const Clock::time_point now = clock_->Now();
    if (now <= last_) return;
    tokens_ = std::min(burst_, tokens_ + std::chrono::duration<double>(now - last_).count() * rate_);
    last_ = now;
  }

  const Clock* const clock_;
  const double rate_;
  const double burst_;
  absl::Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  Clock::time_point last_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tide::guard
