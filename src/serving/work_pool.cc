#include "serving/work_pool.h"

#include "common/error.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/this_thread.h"

namespace tide::serving {

absl::StatusOr<std::unique_ptr<WorkPool>> WorkPool::Create(const WorkPoolOptions& options) {
  if (options.threads < 0) return absl::InvalidArgumentError("work pool: threads must be >= 0");
  if (options.max_queue == 0) return absl::InvalidArgumentError("work pool: max_queue must be >= 1");
  int threads = options.threads;
  if (threads == 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (options.max_heavy_running < 0) return absl::InvalidArgumentError("work pool: max_heavy_running must be >= 0");
  std::unique_ptr<WorkPool> pool(new WorkPool(options));
  pool->max_heavy_running_ = options.max_heavy_running > 0 ? std::min(options.max_heavy_running, threads)
                                                           : std::max(threads - 1, 1);
  pool->workers_.reserve(threads);
  for (int i = 0; i < threads; ++i) pool->workers_.emplace_back([p = pool.get(), i] { p->Run(i); });
  return pool;
}

WorkPool::~WorkPool() {
  std::deque<Task> unrun_light, unrun_heavy;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    unrun_light.swap(light_);
    unrun_heavy.swap(heavy_);
    wake_.SignalAll();
  }
  // Outside the lock: a task's destructor may answer its client.
  unrun_light.clear();
  unrun_heavy.clear();
  for (std::thread& t : workers_) t.join();
}

absl::Status WorkPool::Submit(Task& task, Lane lane) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return errors::Unavailable("the tokenization workers are stopping");
  if (light_.size() + heavy_.size() >= options_.max_queue) {
    return errors::Overloaded(
        absl::StrCat("too many requests waiting for a tokenization worker (", options_.max_queue, ")"));
  }
  (lane == Lane::kLight ? light_ : heavy_).push_back(std::move(task));
  // Every worker re-checks: the one woken may be unable to take a heavy task.
  wake_.SignalAll();
  return absl::OkStatus();
}

size_t WorkPool::queued() const {
  absl::MutexLock lock(&mu_);
  return light_.size() + heavy_.size();
}

void WorkPool::Run(int index) {
  this_thread::SetCurrentThreadName(absl::StrCat(options_.thread_name, "-", index));
  while (true) {
    Task task;
    bool heavy = false;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && !HasRunnable()) wake_.Wait(&mu_);
      if (stopping_) return;
      std::deque<Task>& lane = light_.empty() ? heavy_ : light_;
      heavy = &lane == &heavy_;
      if (heavy) ++heavy_running_;
      task = std::move(lane.front());
      lane.pop_front();
    }
    std::move(task)();
    task = nullptr;  // release what it owns before taking the next
    if (heavy) {
      absl::MutexLock lock(&mu_);
      --heavy_running_;
      if (!heavy_.empty()) wake_.Signal();
    }
  }
}

}  // namespace tide::serving
