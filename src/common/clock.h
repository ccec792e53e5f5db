// tide::Clock — the time source of the batcher, the instance pool, the circuit breaker and the request path.
//
// Contract:
//  - Now() is monotonic (steady). Thread-safe.
//  - WaitUntil(cv, mu, deadline): the caller holds *mu; the call releases it while blocked and
//    holds it again on return. It returns when cv is signalled, when `deadline` has passed on
//    this clock, or spuriously: callers re-check their condition in a loop.
//    deadline == time_point::max() waits for a signal only.
//  - SteadyClock::Get() is a process-wide instance that is never destroyed.
//  - FakeClock is for tests: time moves only through Advance/SetTime. A thread blocked in
//    WaitUntil is woken when the fake time reaches its deadline.
#pragma once

#include <chrono>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tide {

class Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = std::chrono::steady_clock::duration;

  virtual ~Clock() = default;
  virtual time_point Now() const = 0;
  virtual void WaitUntil(absl::CondVar* cv, absl::Mutex* mu, time_point deadline) = 0;
};

class SteadyClock final : public Clock {
 public:
  static SteadyClock* Get();
  time_point Now() const override { return std::chrono::steady_clock::now(); }
  void WaitUntil(absl::CondVar* cv, absl::Mutex* mu, time_point deadline) override;
};

class FakeClock final : public Clock {
 public:
  // Starts an hour after the epoch so that "now - delay" never underflows in tests.
  explicit FakeClock(time_point start = time_point{} + std::chrono::hours(1)) : now_(start) {}

  time_point Now() const override;
  void WaitUntil(absl::CondVar* cv, absl::Mutex* mu, time_point deadline) override;

  void Advance(duration d);
  void SetTime(time_point t);

 private:
  // Implementation details follow. Waiters register their condition variable so that Advance can
  // signal them. A signal can still be lost in the short window between a waiter's registration
  // and its cv wait (Advance does not take the waiter's mutex, to keep the lock order one-way), so
  // waits also return after a short real-time slice; callers loop, so this only bounds latency.
  void Wake();

  mutable absl::Mutex mu_;
  time_point now_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::CondVar*> waiters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tide
