#include "serving/deadline_timer.h"

#include "common/error.h"

#include <chrono>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tide::serving {

DeadlineTimer::DeadlineTimer() : thread_([this] { Loop(); }) {}

DeadlineTimer::~DeadlineTimer() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.Signal();
  thread_.join();
}

void DeadlineTimer::Schedule(Clock::time_point deadline, std::weak_ptr<InferenceRequest> request) {
  bool earliest;
  {
    absl::MutexLock lock(&mu_);
    earliest = queue_.empty() || deadline < queue_.top().deadline;
    queue_.push(Entry{deadline, std::move(request)});
  }
  if (earliest) cv_.Signal();
}

size_t DeadlineTimer::pending() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

void DeadlineTimer::Loop() {
  std::vector<std::shared_ptr<InferenceRequest>> expired;
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    const Clock::time_point now = std::chrono::steady_clock::now();
    while (!queue_.empty() && queue_.top().deadline <= now) {
      if (auto r = queue_.top().request.lock()) expired.push_back(std::move(r));
      queue_.pop();
    }
    if (!expired.empty()) {
      mu_.Unlock();
      for (auto& r : expired) r->Fail(errors::DeadlineExceeded("request deadline passed"));
      expired.clear();
      mu_.Lock();
      continue;
    }
    if (queue_.empty()) {
      cv_.Wait(&mu_);
    } else {
      const auto wait = queue_.top().deadline - now;
      cv_.WaitWithTimeout(&mu_, absl::FromChrono(std::chrono::duration_cast<std::chrono::nanoseconds>(wait)));
    }
  }
}

}  // namespace tide::serving
