// tide::batching::InstancePool<Task> — instance_group.count worker threads, each owning one
// BatchRunner (one inference session), pulling batches from a Batcher.
//
// Contract:
//  - Create calls the runner factory once per instance, on the calling thread, and fails with the
//    first factory error (no thread is started then). The batcher is not owned and must outlive
//    the pool.
//  - A worker loops WaitForBatch -> Run. Run returns OK after completing every task of the batch.
//    On an error status (or an exception, caught here: runner code may wrap throwing libraries)
//    each task still left in batch.tasks (non-null) gets OnDropped(kRunnerError, status); a runner
//    that completed some tasks before failing resets their unique_ptrs. The worker carries on.
//    Those tasks are counted in the batcher's BatcherStats::dropped[kRunnerError].
//  - Failure isolation (tasks with request_key(), see HasRequestKey): one request's bad row must
//    not fail the other requests batched with it. When a batch fails and the tasks left in it
//    belong to more than one request, the pool re-runs them in two sub-batches split by request
//    (each padded anew: sequence bucket of its longest task, allowed batch size) and recurses into
//    a half that fails again, until a failing sub-batch holds one request's tasks only; only those
//    tasks get OnDropped(kRunnerError, <that sub-batch's status>). Every other task completes
//    normally. A batch of k requests with one bad request costs at most 2*log2(k) extra runs;
//    they are counted in InstanceStats::isolation_runs (batches/tasks count formed batches only).
//    Tasks without request_key() are failed together, as one request. A task of a failed batch
//    that is cancelled() by then (its request already failed, its client left) is not re-run: it
//    gets OnDropped(kCancelled).
//  - Stop() (also run by the destructor) shuts the batcher down, lets the workers finish queued
//    work for up to shutdown_grace (on the batcher's clock), then drops what is still queued with
//    kShutdown and joins. A batch already running is never interrupted. Idempotent. StopWithin(grace)
//    is Stop() with `grace` in place of shutdown_grace (a shutdown deadline shared by several pools).
//  - A worker calls the batcher's BatchDone() after each batch (its re-runs included), so the
//    batcher knows which batch starts alone (Batch::alone: nothing else running or queued); the
//    runner decides what to do with it (serving::ModelRunner: a wider engine run).
//  - Stats() is thread-safe. busy_ratio = time inside Run / time since Create.
//  - worker_nice > 0 lowers the workers' scheduling priority by that many nice steps, and runs each
//    factory call on a thread lowered the same way, so threads a runner creates (an inference
//    library's intra-op pool) are lowered too. Then the threads that answer clients (same process,
//    default priority) preempt inference when they wake up. A failure to lower is a Create error.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "batching/batch.h"
#include "batching/batcher.h"
#include "common/clock.h"
#include "common/error.h"
#include "batching/shape_buckets.h"
#include "batching/thread_priority.h"
#include "common/this_thread.h"

namespace tide::batching {

// One model instance's executor (e.g. an ONNX Runtime session). Not thread-safe: one worker calls
// it. Must not throw (a throw is treated as an INTERNAL error, but prefer a status).
template <BatchTask Task>
class BatchRunner {
 public:
  virtual ~BatchRunner() = default;
  virtual absl::Status Run(Batch<Task>& batch) = 0;
};

// Optional: the request a task belongs to (tasks of one request share the key). Lets the pool
// isolate a failing request's tasks from the others of a failed batch.
template <typename T>
concept HasRequestKey = requires(const T& ctask) {
  { ctask.request_key() } -> std::convertible_to<uintptr_t>;
};

struct InstancePoolOptions {
  // Worker threads, one runner each (Triton's instance_group.count).
  int instance_count = 1;
  // How long Stop() lets queued work finish before dropping it with kShutdown.
  std::chrono::milliseconds shutdown_grace{5000};
  // Nice steps (0..19) added to the worker threads and to the threads runners create; 0 = as is.
  int worker_nice = 0;
  // Worker thread names: prefix + instance index (as `top -H` shows them; 15 bytes at most).
  std::string thread_name_prefix = "tide-infer-";
};

struct InstanceStats {
  uint64_t batches = 0;
  uint64_t tasks = 0;
  uint64_t failed_batches = 0;
  uint64_t isolation_runs = 0;  // re-runs of a failed batch's rows in sub-batches (by request)
  Clock::duration busy{};
  double busy_ratio = 0.0;
};

template <BatchTask Task>
class InstancePool {
 public:
  using RunnerFactory = std::function<absl::StatusOr<std::unique_ptr<BatchRunner<Task>>>(int instance)>;

  static absl::StatusOr<std::unique_ptr<InstancePool>> Create(const InstancePoolOptions& options,
                                                              Batcher<Task>* batcher, const RunnerFactory& factory) {
    if (options.instance_count < 1) return absl::InvalidArgumentError("instance_count must be >= 1");
    if (options.shutdown_grace.count() < 0) return absl::InvalidArgumentError("shutdown_grace must be >= 0");
    if (batcher == nullptr || !factory) return absl::InvalidArgumentError("batcher and runner factory are required");
    if (options.worker_nice < 0 || options.worker_nice > 19)
      return absl::InvalidArgumentError(absl::StrCat("worker_nice must be in 0..19, got ", options.worker_nice));
    std::vector<std::unique_ptr<BatchRunner<Task>>> runners;
    for (int i = 0; i < options.instance_count; ++i) {
      absl::StatusOr<std::unique_ptr<BatchRunner<Task>>> runner = absl::InternalError("not created");
      if (options.worker_nice > 0) {
        absl::Status lowered = RunOnLoweredThread(options.worker_nice, [&] {
          runner = factory(i);
          return absl::OkStatus();
        });
        if (!lowered.ok()) return lowered;
      } else {
        runner = factory(i);
      }
      if (!runner.ok()) {
        return absl::Status(runner.status().code(),
                            absl::StrCat("creating instance ", i, ": ", runner.status().message()));
      }
      if (*runner == nullptr) return absl::InternalError(absl::StrCat("runner factory returned null for instance ", i));
      runners.push_back(*std::move(runner));
    }
    std::unique_ptr<InstancePool> pool(new InstancePool(options, batcher, std::move(runners)));
    pool->Start();
    return pool;
  }

  ~InstancePool() { Stop(); }

  void Stop() ABSL_LOCKS_EXCLUDED(mu_) { StopWithin(options_.shutdown_grace); }

  void StopWithin(Clock::duration grace) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    batcher_->Shutdown();
    Clock* clock = batcher_->clock();
    const Clock::time_point grace_end = clock->Now() + std::max(grace, Clock::duration::zero());
    {
      absl::MutexLock lock(&mu_);
      while (running_workers_ > 0 && clock->Now() < grace_end) clock->WaitUntil(&exit_cv_, &mu_, grace_end);
    }
    batcher_->DropQueued(DropReason::kShutdown);
    for (std::thread& t : threads_) t.join();
  }

  std::vector<InstanceStats> Stats() const {
    const Clock::duration wall = batcher_->clock()->Now() - start_;
    std::vector<InstanceStats> out(instances_.size());
    for (size_t i = 0; i < instances_.size(); ++i) {
      const Instance& in = *instances_[i];
      out[i].batches = in.batches.load(std::memory_order_relaxed);
      out[i].tasks = in.tasks.load(std::memory_order_relaxed);
      out[i].failed_batches = in.failed_batches.load(std::memory_order_relaxed);
      out[i].isolation_runs = in.isolation_runs.load(std::memory_order_relaxed);
      out[i].busy = Clock::duration(in.busy_ticks.load(std::memory_order_relaxed));
      out[i].busy_ratio = wall.count() > 0 ? static_cast<double>(out[i].busy.count()) / wall.count() : 0.0;
    }
    return out;
  }

  int instance_count() const { return static_cast<int>(instances_.size()); }

 private:
  // Implementation details follow.
  struct Instance {
    std::unique_ptr<BatchRunner<Task>> runner;
    std::atomic<uint64_t> batches{0};
    std::atomic<uint64_t> tasks{0};
    std::atomic<uint64_t> failed_batches{0};
    std::atomic<uint64_t> isolation_runs{0};
    std::atomic<Clock::duration::rep> busy_ticks{0};
  };

  InstancePool(const InstancePoolOptions& options, Batcher<Task>* batcher,
               std::vector<std::unique_ptr<BatchRunner<Task>>> runners)
      : options_(options), batcher_(batcher), buckets_(batcher->options()), start_(batcher->clock()->Now()) {
    for (auto& r : runners) {
      instances_.push_back(std::make_unique<Instance>());
      instances_.back()->runner = std::move(r);
    }
  }

  void Start() {
    {
      absl::MutexLock lock(&mu_);
      running_workers_ = static_cast<int>(instances_.size());
    }
    for (size_t i = 0; i < instances_.size(); ++i) {
      threads_.emplace_back([this, i] {
        this_thread::SetCurrentThreadName(options_.thread_name_prefix + std::to_string(i));
        Work(*instances_[i]);
      });
    }
  }

  void Work(Instance& instance) {
    // Checked in Create (the same call succeeded on the factory's thread).
    LowerCurrentThreadPriority(options_.worker_nice).IgnoreError();
    Batch<Task> batch;
    while (batcher_->WaitForBatch(&batch)) {
      absl::Status status = RunGuarded(instance, batch);
      instance.batches.fetch_add(1, std::memory_order_relaxed);
      instance.tasks.fetch_add(batch.size(), std::memory_order_relaxed);
      if (!status.ok()) {
        instance.failed_batches.fetch_add(1, std::memory_order_relaxed);
        Isolate(instance, batch, std::move(status));
      }
      batcher_->BatchDone();
      batch = Batch<Task>();
    }
    {
      absl::MutexLock lock(&mu_);
      --running_workers_;
    }
    exit_cv_.SignalAll();
  }

  // Runs one batch on the instance's runner; a throw becomes INTERNAL. Adds the busy time.
  absl::Status RunGuarded(Instance& instance, Batch<Task>& batch) {
    Clock* clock = batcher_->clock();
    const Clock::time_point begin = clock->Now();
    absl::Status status;
    try {
      status = instance.runner->Run(batch);
    } catch (const std::exception& e) {
      status = errors::Backend(absl::StrCat("model instance threw: ", e.what()));
    } catch (...) {
      status = errors::Backend("model instance threw a non-standard exception");
    }
    instance.busy_ticks.fetch_add((clock->Now() - begin).count(), std::memory_order_relaxed);
    return status;
  }

  // `batch` failed with `status`: completes or fails every task still in it (see the contract).
  void Isolate(Instance& instance, Batch<Task>& batch, absl::Status status) {
    std::vector<std::unique_ptr<Task>> left;
    std::vector<Clock::duration> waits;
    std::vector<uintptr_t> keys;  // distinct request keys, in batch order
    uint64_t cancelled = 0;
    for (size_t i = 0; i < batch.tasks.size(); ++i) {
      if (batch.tasks[i] == nullptr) continue;
      if (batch.tasks[i]->cancelled()) {
        // Its request already ended (another of its rows failed) or its client left: not re-run.
        batch.tasks[i]->OnDropped(DropReason::kCancelled, DropStatus(DropReason::kCancelled));
        ++cancelled;
        continue;
      }
      if constexpr (HasRequestKey<Task>) {
        const uintptr_t key = static_cast<uintptr_t>(batch.tasks[i]->request_key());
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
      }
      left.push_back(std::move(batch.tasks[i]));
      waits.push_back(i < batch.queue_durations.size() ? batch.queue_durations[i] : Clock::duration{});
    }
    if (cancelled > 0) batcher_->CountDropped(DropReason::kCancelled, cancelled);
    if (keys.size() < 2) {
      for (std::unique_ptr<Task>& task : left) task->OnDropped(DropReason::kRunnerError, status);
      batcher_->CountDropped(DropReason::kRunnerError, left.size());
      return;
    }
    if constexpr (HasRequestKey<Task>) {
      const std::vector<uintptr_t> first_half(keys.begin(), keys.begin() + keys.size() / 2);
      for (const bool first : {true, false}) {
        Batch<Task> sub;
        sub.formation_time = batch.formation_time;
        size_t longest = 0;
        for (size_t i = 0; i < left.size(); ++i) {
          if (left[i] == nullptr) continue;
          const uintptr_t key = static_cast<uintptr_t>(left[i]->request_key());
          const bool in_first = std::find(first_half.begin(), first_half.end(), key) != first_half.end();
          if (in_first != first) continue;
          longest = std::max(longest, left[i]->seq_len());
          sub.real_tokens += left[i]->seq_len();
          sub.queue_durations.push_back(waits[i]);
          sub.tasks.push_back(std::move(left[i]));
        }
        const size_t bucket = buckets_.SequenceBucketIndex(longest);
        sub.padded_sequence_length =
            bucket == ShapeBuckets::kNoBucket ? batch.padded_sequence_length : buckets_.SequenceBucketLength(bucket);
        sub.padded_batch_size = buckets_.PaddedBatchSize(sub.tasks.size());
        sub.padded_tokens = sub.padded_sequence_length * sub.padded_batch_size;
        instance.isolation_runs.fetch_add(1, std::memory_order_relaxed);
        absl::Status sub_status = RunGuarded(instance, sub);
        if (!sub_status.ok()) Isolate(instance, sub, std::move(sub_status));
      }
    }
  }

  const InstancePoolOptions options_;
  Batcher<Task>* const batcher_;
  const ShapeBuckets buckets_;  // pads the sub-batches of a failed batch (Isolate)
  const Clock::time_point start_;
  std::vector<std::unique_ptr<Instance>> instances_;
  std::vector<std::thread> threads_;
  absl::Mutex mu_;
  absl::CondVar exit_cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int running_workers_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tide::batching
