// tide::serving::DeadlineTimer — fails requests with DEADLINE_EXCEEDED at their deadline, even while
// their rows are inside a running batch (the client gets its 504 at the deadline, not when the
// batch ends; the batch's late results are then ignored).
//
// Contract:
//  - Thread-safe. Schedule never blocks beyond a short lock. One background thread sleeps until
//    the earliest deadline (no polling) and calls InferenceRequest::Fail outside the lock.
//  - Holds only weak references: a request answered before its deadline costs one heap entry
//    until the deadline passes, nothing more.
//  - The destructor stops the thread; pending deadlines are then never fired.
#pragma once

#include <memory>
#include <queue>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "serving/inference_request.h"

namespace tide::serving {

class DeadlineTimer {
 public:
  DeadlineTimer();
  ~DeadlineTimer();
  DeadlineTimer(const DeadlineTimer&) = delete;
  DeadlineTimer& operator=(const DeadlineTimer&) = delete;

  void Schedule(Clock::time_point deadline, std::weak_ptr<InferenceRequest> request);
  size_t pending() const;

 private:
  struct Entry {
    Clock::time_point deadline;
    std::weak_ptr<InferenceRequest> request;
    bool operator>(const Entry& other) const { return deadline > other.deadline; }
  };
  void Loop();

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tide::serving
