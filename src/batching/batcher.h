// tide::batching::Batcher<Task> — the thread-safe dynamic batcher: request threads Submit tasks,
// idle model instances WaitForBatch.
//
// Contract:
//  - Thread-safe. Submit never blocks (beyond a short internal lock) and moves the task in only
//    on OK. Errors leave the task with the caller: UNAVAILABLE when the task's priority queue is
//    full (max_queue_size; the edge maps it to HTTP 503 + Retry-After / gRPC UNAVAILABLE) or the
//    batcher is shut down; INVALID_ARGUMENT when seq_len() exceeds the last sequence bucket.
//  - WaitForBatch blocks the calling (idle instance) thread until a batch is released (see
//    BatchFormer for the rules) and returns true with it, or returns false once the batcher is
//    shut down and its queue is empty. It sleeps until the computed next wake-up (no polling).
//  - Every queued task ends in exactly one place: a returned batch, or one OnDropped call
//    (cancelled, deadline, queue timeout REJECT, shutdown). OnDropped and the on_batch hook run
//    without the batcher's lock, on a thread calling WaitForBatch or DropQueued.
//  - Running batches: a caller that runs the batches it takes calls BatchDone() once per batch
//    when it has finished it (InstancePool does). A batch is formed `alone` (Batch::alone) when no
//    other batch is running and nothing stays queued after it: the one fact a layout that widens
//    lone batches needs, decided under the batcher's lock so two instances never both see it.
//    A caller that never calls BatchDone only gets alone == false after its first batch.
//  - Shutdown(): Submit answers UNAVAILABLE from then on; queued tasks still form batches, without
//    waiting for max_queue_delay. DropQueued(kShutdown) gives up on whatever is still queued.
//  - QueuedTasks() reads the queued task count without the lock (a snapshot, at most one change
//    old): for readers that must never wait for the lock, e.g. a SCHED_IDLE thread asking whether
//    live work waits (serving/shadow_lane.h).
//  - IdleFor(quiet) says, also without the lock, whether the batcher has been idle (nothing queued
//    and no batch running, i.e. taken by WaitForBatch and not yet BatchDone) for at least `quiet`
//    by the batcher's clock: for work that should start only once live traffic left a real gap,
//    not in the instant between two batches (the shadow lane's hold-off). Idle from creation.
//  - The clock must outlive the batcher; destroy the batcher only after every thread has left
//    WaitForBatch.
#pragma once

#include <atomic>
#include <functional>
#include <limits>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "batching/batch.h"
#include "batching/batch_former.h"
#include "batching/batcher_options.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/status_macros.h"

namespace tide::batching {

template <BatchTask Task>
class Batcher {
 public:
  // Called for every formed batch, before WaitForBatch returns it (e.g. to export histograms of
  // batch size, padding and queue time). Must be thread-safe.
  using BatchHook = std::function<void(const Batch<Task>&)>;

  struct Options {
    BatcherOptions batching;
    Clock* clock = nullptr;  // not owned; nullptr = SteadyClock::Get()
    BatchHook on_batch;      // optional
  };

  static absl::StatusOr<std::unique_ptr<Batcher>> Create(Options options) {
    auto former = BatchFormer<Task>::Create(options.batching);
    if (!former.ok()) return former.status();
    Clock* clock = options.clock != nullptr ? options.clock : SteadyClock::Get();
    return std::unique_ptr<Batcher>(new Batcher(clock, std::move(options.on_batch), *std::move(former)));
  }

  absl::Status Submit(std::unique_ptr<Task>& task) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (shutdown_) return errors::Unavailable("batcher is shut down");
      TIDE_RETURN_IF_ERROR(former_->Enqueue(task, clock_->Now()));
      MirrorState();
    }
    cv_.Signal();  // one idle instance is enough; it passes the baton if more work remains
    return absl::OkStatus();
  }

  bool WaitForBatch(Batch<Task>* out) ABSL_LOCKS_EXCLUDED(mu_) {
    mu_.Lock();
    while (true) {
      typename BatchFormer<Task>::Result result = former_->Form(clock_->Now(), shutdown_);
      if (result.batch.has_value()) {
        *out = std::move(*result.batch);
        const bool more = !former_->empty();
        out->alone = !more && running_batches_ == 0;
        ++running_batches_;
        MirrorState();
        mu_.Unlock();
        if (more) cv_.Signal();
        BatchFormer<Task>::CompleteDropped(result.dropped);
        if (on_batch_) on_batch_(*out);
        return true;
      }
      MirrorState();
      if (!result.dropped.empty()) {
        mu_.Unlock();
        BatchFormer<Task>::CompleteDropped(result.dropped);
        mu_.Lock();
        continue;  // time has moved; decide again
      }
      if (shutdown_ && former_->empty()) {
        mu_.Unlock();
        cv_.SignalAll();  // let the other instances see the end too
        return false;
      }
      clock_->WaitUntil(&cv_, &mu_, result.wake_at);
    }
  }

  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      shutdown_ = true;
    }
    cv_.SignalAll();
  }

  // Drops every queued task with `reason` (completing them on this thread).
  void DropQueued(DropReason reason) ABSL_LOCKS_EXCLUDED(mu_) {
    std::vector<typename BatchFormer<Task>::Dropped> dropped;
    {
      absl::MutexLock lock(&mu_);
      dropped = former_->DropAll(reason);
      MirrorState();
    }
    cv_.SignalAll();
    BatchFormer<Task>::CompleteDropped(dropped);
  }

  // The caller finished running one batch that WaitForBatch returned (see the contract).
  void BatchDone() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (running_batches_ > 0) --running_batches_;
    MirrorState();
  }

  // Counts tasks dropped elsewhere (InstancePool: kRunnerError) in Stats().
  void CountDropped(DropReason reason, uint64_t n) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    former_->CountDropped(reason, n);
  }

  BatcherStats Stats() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    BatcherStats stats = former_->stats();
    stats.running_batches = static_cast<size_t>(running_batches_);
    return stats;
  }

  size_t QueuedTasks() const { return queued_.load(std::memory_order_relaxed); }

  bool IdleFor(Clock::duration quiet) const {
    const Clock::duration::rep since = idle_since_.load(std::memory_order_relaxed);
    if (since == kBusy) return false;
    return clock_->Now() - Clock::time_point(Clock::duration(since)) >= quiet;
  }

  Clock* clock() const { return clock_; }
  const BatcherOptions& options() const { return former_->options(); }

 private:
  static constexpr Clock::duration::rep kBusy = std::numeric_limits<Clock::duration::rep>::max();

  // Publishes the queued count and the idle-since time for the lock-free readers.
  void MirrorState() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const size_t queued = former_->stats().queued_tasks;
    queued_.store(queued, std::memory_order_relaxed);
    if (queued > 0 || running_batches_ > 0) {
      idle_since_.store(kBusy, std::memory_order_relaxed);
    } else if (idle_since_.load(std::memory_order_relaxed) == kBusy) {
      idle_since_.store(clock_->Now().time_since_epoch().count(), std::memory_order_relaxed);
    }
  }

  Batcher(Clock* clock, BatchHook on_batch, std::unique_ptr<BatchFormer<Task>> former)
      : clock_(clock), on_batch_(std::move(on_batch)), former_(std::move(former)),
        idle_since_(clock->Now().time_since_epoch().count()) {}

  Clock* const clock_;
  const BatchHook on_batch_;
  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  const std::unique_ptr<BatchFormer<Task>> former_ ABSL_PT_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  int running_batches_ ABSL_GUARDED_BY(mu_) = 0;  // returned by WaitForBatch, not yet BatchDone
  std::atomic<size_t> queued_{0};  // former_->stats().queued_tasks, for QueuedTasks()
  // When the batcher last became idle (clock ticks), or kBusy while it is not: for IdleFor().
  std::atomic<Clock::duration::rep> idle_since_;
};

}  // namespace tide::batching
