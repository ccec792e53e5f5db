// Test-only: a fake BatchTask that records its one completion in a Journal. Used by the batching
// unit tests; not part of tide_batching.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "batching/batch.h"
#include "common/clock.h"

namespace tide::batching::testing {

// Records how every task ended. Thread-safe.
class Journal {
 public:
  void Drop(int id, DropReason reason, const absl::Status& status) {
    std::function<void(int)> hook;
    {
      absl::MutexLock lock(&mu_);
      ++completions_[id];
      reasons_[id] = reason;
      statuses_[id] = status;
      hook = on_drop_;
    }
    if (hook) hook(id);
  }
  void Done(int id) {
    absl::MutexLock lock(&mu_);
    ++completions_[id];
    ++done_;
  }
  int completions(int id) const {
    absl::MutexLock lock(&mu_);
    auto it = completions_.find(id);
    return it == completions_.end() ? 0 : it->second;
  }
  std::optional<DropReason> reason(int id) const {
    absl::MutexLock lock(&mu_);
    auto it = reasons_.find(id);
    if (it == reasons_.end()) return std::nullopt;
    return it->second;
  }
  absl::Status status(int id) const {
    absl::MutexLock lock(&mu_);
    auto it = statuses_.find(id);
    return it == statuses_.end() ? absl::OkStatus() : it->second;
  }
  size_t done() const {
    absl::MutexLock lock(&mu_);
    return done_;
  }
  size_t dropped(DropReason r) const {
    absl::MutexLock lock(&mu_);
    size_t n = 0;
    for (const auto& [id, reason] : reasons_) n += reason == r;
    return n;
  }
  std::map<int, int> all_completions() const {
    absl::MutexLock lock(&mu_);
    return completions_;
  }
  void set_on_drop(std::function<void(int)> hook) {
    absl::MutexLock lock(&mu_);
    on_drop_ = std::move(hook);
  }

 private:
  mutable absl::Mutex mu_;
  std::map<int, int> completions_ ABSL_GUARDED_BY(mu_);
  std::map<int, DropReason> reasons_ ABSL_GUARDED_BY(mu_);
  std::map<int, absl::Status> statuses_ ABSL_GUARDED_BY(mu_);
  size_t done_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void(int)> on_drop_ ABSL_GUARDED_BY(mu_);
};

class FakeTask {
 public:
  FakeTask(Journal* journal, int id, size_t seq_len) : journal_(journal), id_(id), seq_len_(seq_len) {}

  FakeTask& set_priority(int p) { priority_ = p; return *this; }
  FakeTask& set_deadline(Clock::time_point t) { deadline_ = t; return *this; }
  FakeTask& set_queue_timeout(Clock::duration d) { queue_timeout_ = d; return *this; }
  FakeTask& set_cancel_flag(std::shared_ptr<std::atomic<bool>> flag) { cancel_ = std::move(flag); return *this; }
  // The request the task belongs to (InstancePool failure isolation); default: all tasks in one.
  FakeTask& set_request(uintptr_t request) { request_ = request; return *this; }

  size_t seq_len() const { return seq_len_; }
  int priority() const { return priority_; }
  Clock::time_point deadline() const { return deadline_; }
  bool cancelled() const { return cancel_ != nullptr && cancel_->load(); }
  Clock::duration queue_timeout() const { return queue_timeout_; }
  uintptr_t request_key() const { return request_; }
  void OnDropped(DropReason reason, absl::Status status) { journal_->Drop(id_, reason, status); }

  void Complete() { journal_->Done(id_); }
  int id() const { return id_; }

 private:
  Journal* journal_;
  int id_;
  size_t seq_len_;
  int priority_ = 0;
  Clock::time_point deadline_ = Clock::time_point::max();
  Clock::duration queue_timeout_{};
  uintptr_t request_ = 0;
  std::shared_ptr<std::atomic<bool>> cancel_;
};

static_assert(BatchTask<FakeTask>);
static_assert(HasQueueTimeout<FakeTask>);

template <typename Task>
std::vector<int> Ids(const Batch<Task>& batch) {
  std::vector<int> ids;
  for (const auto& t : batch.tasks) ids.push_back(t->id());
  return ids;
}

}  // namespace tide::batching::testing
