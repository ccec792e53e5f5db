#include "common/clock.h"

#include <algorithm>

#include "absl/time/time.h"

namespace tide {

SteadyClock* SteadyClock::Get() {
  static SteadyClock* const clock = new SteadyClock();
  return clock;
}

void SteadyClock::WaitUntil(absl::CondVar* cv, absl::Mutex* mu, time_point deadline) {
  if (deadline == time_point::max()) {
    cv->Wait(mu);
    return;
  }
  const duration remaining = deadline - Now();
  if (remaining <= duration::zero()) return;
  cv->WaitWithTimeout(mu, absl::FromChrono(remaining));
}

Clock::time_point FakeClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

void FakeClock::WaitUntil(absl::CondVar* cv, absl::Mutex* mu, time_point deadline) {
  {
    absl::MutexLock lock(&mu_);
    if (now_ >= deadline) return;
    waiters_.push_back(cv);
  }
  cv->WaitWithTimeout(mu, absl::Milliseconds(2));
  absl::MutexLock lock(&mu_);
  auto it = std::find(waiters_.begin(), waiters_.end(), cv);
  if (it != waiters_.end()) waiters_.erase(it);
}

void FakeClock::Advance(duration d) {
  {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  Wake();
}

void FakeClock::SetTime(time_point t) {
  {
    absl::MutexLock lock(&mu_);
    now_ = t;
  }
  Wake();
}

void FakeClock::Wake() {
  // Signalling under mu_ keeps every registered cv alive: a waiter unregisters under mu_ before
  // its owner can destroy the cv.
  absl::MutexLock lock(&mu_);
  for (absl::CondVar* cv : waiters_) cv->SignalAll();
}

}  // namespace tide
