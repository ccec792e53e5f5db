// tide::serving::WorkPool — a fixed set of worker threads with a bounded FIFO queue, for the CPU
// work of a request that must not run on the HTTP I/O threads: parsing a large body and
// tokenizing its texts (TEI's --tokenization-workers). The I/O thread only admits a request and
// hands it here, so health checks and cheap requests are never stuck behind a heavy one.
//
// Contract:
//  - Submit never blocks. It takes `task` only on success; on failure the task stays with the
//    caller: RESOURCE_EXHAUSTED when max_queue tasks already wait (the edge answers 429 +
//    Retry-After), UNAVAILABLE once the pool is stopping.
//  - Two lanes: light tasks (a small request) run before heavy ones, and at most
//    max_heavy_running workers run heavy tasks at once, so a light task never waits for a heavy
//    one to finish while a worker is kept for it. Within a lane, tasks run in submission order,
//    each on one worker thread. A task must not block waiting for another task of the same pool.
//  - The destructor stops the pool: tasks not yet started are destroyed unrun (whatever they own
//    is released, e.g. an HTTP responder answers "request dropped"), running ones finish, the
//    threads are joined. Do not destroy the pool from one of its own tasks.
//  - Threads are named "<thread_name>-<i>" (tide-tok-0, ...), as `top -H` and perf show them.
//  - Thread-safe: Submit, queued() and threads() from any thread.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace tide::serving {

struct WorkPoolOptions {
  // Worker threads; 0: one per core (std::thread::hardware_concurrency()).
  int threads = 0;
  // Tasks waiting for a worker beyond which Submit refuses; at least 1.
  size_t max_queue = 1024;
  // Prefix of the workers' thread names (Linux keeps 15 bytes of a name).
  std::string thread_name = "tide-tok";
  // Workers that may run heavy tasks at once; 0: all but one (all when there is only one).
  int max_heavy_running = 0;
};

class WorkPool {
 public:
  using Task = absl::AnyInvocable<void() &&>;
  enum class Lane { kLight, kHeavy };

  // INVALID_ARGUMENT for threads < 0 or max_queue == 0. Starts the threads.
  static absl::StatusOr<std::unique_ptr<WorkPool>> Create(const WorkPoolOptions& options);
  ~WorkPool();
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  // Queues `task` in `lane` (moved from only on success; see the contract).
  absl::Status Submit(Task& task, Lane lane = Lane::kHeavy);

  // Tasks waiting for a worker (not those running), both lanes.
  size_t queued() const;
  int threads() const { return static_cast<int>(workers_.size()); }
  int max_heavy_running() const { return max_heavy_running_; }

 private:
  explicit WorkPool(const WorkPoolOptions& options) : options_(options) {}
  void Run(int index);
  bool HasRunnable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !light_.empty() || (!heavy_.empty() && heavy_running_ < max_heavy_running_);
  }

  const WorkPoolOptions options_;
  int max_heavy_running_ = 1;
  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  std::deque<Task> light_ ABSL_GUARDED_BY(mu_);
  std::deque<Task> heavy_ ABSL_GUARDED_BY(mu_);
  int heavy_running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace tide::serving
