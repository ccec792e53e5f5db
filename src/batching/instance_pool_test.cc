#include "batching/instance_pool.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "batching/test_task.h"

namespace tide::batching {
namespace {

using std::chrono::microseconds;
using testing::FakeTask;
using testing::Journal;

// Completes every task unless `behaviour` says otherwise for this batch number (0-based, per runner).
class FakeRunner : public BatchRunner<FakeTask> {
 public:
  using Behaviour = std::function<absl::Status(int batch_number, Batch<FakeTask>& batch)>;
  explicit FakeRunner(Behaviour behaviour = nullptr) : behaviour_(std::move(behaviour)) {}
  absl::Status Run(Batch<FakeTask>& batch) override {
    const int n = batches_++;
    if (behaviour_) {
      absl::Status s = behaviour_(n, batch);
      if (!s.ok()) return s;
    }
    for (auto& t : batch.tasks) {
      t->Complete();
      t.reset();
    }
    return absl::OkStatus();
  }

 private:
  Behaviour behaviour_;
  int batches_ = 0;
};

std::unique_ptr<Batcher<FakeTask>> MakeBatcher(const BatcherOptions& o, Clock* clock) {
  auto b = Batcher<FakeTask>::Create({.batching = o, .clock = clock, .on_batch = nullptr});
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *std::move(b) : nullptr;
}

TEST(InstancePoolTest, FactoryErrorFailsCreate) {
  auto batcher = MakeBatcher(BatcherOptions{}, SteadyClock::Get());
  auto pool = InstancePool<FakeTask>::Create(
      {.instance_count = 3}, batcher.get(),
      [](int i) -> absl::StatusOr<std::unique_ptr<BatchRunner<FakeTask>>> {
        if (i == 2) return absl::NotFoundError("no model file");
        return std::make_unique<FakeRunner>();
      });
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(pool.status().message()), ::testing::HasSubstr("instance 2"));
  EXPECT_EQ(InstancePool<FakeTask>::Create({.instance_count = 0}, batcher.get(),
                                           [](int) { return std::make_unique<FakeRunner>(); })
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(InstancePoolTest, WorkerSurvivesFailingBatches) {
  Journal journal;
  BatcherOptions o;
  o.max_batch_size = 1;
  FakeClock clock;  // delay is 0, so no time needs to pass
  auto batcher = MakeBatcher(o, &clock);
  auto pool = InstancePool<FakeTask>::Create(
      {.instance_count = 1}, batcher.get(), [&](int) {
        return std::make_unique<FakeRunner>([&](int n, Batch<FakeTask>& batch) -> absl::Status {
          if (n == 0) return absl::ResourceExhaustedError("out of memory");
          if (n == 1) throw std::runtime_error("boom");
          return absl::OkStatus();
        });
      });
  ASSERT_TRUE(pool.ok()) << pool.status();
  for (int id = 0; id < 3; ++id) {
    auto t = std::make_unique<FakeTask>(&journal, id, 10);
    ASSERT_TRUE(batcher->Submit(t).ok());
  }
  (*pool)->Stop();  // shutdown flushes all three; the one worker runs them in order
  EXPECT_EQ(journal.reason(0), DropReason::kRunnerError);
  EXPECT_EQ(journal.status(0).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(journal.reason(1), DropReason::kRunnerError);
  EXPECT_EQ(journal.status(1).code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(journal.status(1).message()), ::testing::HasSubstr("boom"));
  EXPECT_EQ(journal.completions(2), 1);
  EXPECT_FALSE(journal.reason(2).has_value());
  auto stats = (*pool)->Stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].batches, 3u);
  EXPECT_EQ(stats[0].failed_batches, 2u);
  EXPECT_EQ(stats[0].isolation_runs, 0u);  // one task per batch: nothing to isolate
  EXPECT_EQ(batcher->Stats().dropped_by(DropReason::kRunnerError), 2u);
}

// The pool tells the batcher when each batch is done, so a batch that starts while another
// instance runs is not alone, and the next one after both finished is.
TEST(InstancePoolTest, BatchIsAloneOnlyWhileTheOtherInstancesAreIdle) {
  Journal journal;
  BatcherOptions o;
  o.max_batch_size = 1;
  FakeClock clock;  // delay 0: no time needs to pass
  auto batcher = MakeBatcher(o, &clock);
  absl::Mutex mu;
  std::map<int, bool> alone;  // task id -> its batch's alone flag
  absl::Notification first_started, release_first;
  auto pool = InstancePool<FakeTask>::Create(
      {.instance_count = 2}, batcher.get(), [&](int) {
        return std::make_unique<FakeRunner>([&](int, Batch<FakeTask>& batch) -> absl::Status {
          const int id = batch.tasks[0]->id();
          {
            absl::MutexLock lock(&mu);
            alone[id] = batch.alone;
          }
          if (id == 1) {
            first_started.Notify();
            release_first.WaitForNotification();
          }
          return absl::OkStatus();
        });
      });
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto submit = [&](int id) {
    auto t = std::make_unique<FakeTask>(&journal, id, 10);
    ASSERT_TRUE(batcher->Submit(t).ok());
  };
  submit(1);
  first_started.WaitForNotification();
  submit(2);  // the other instance takes it while task 1 runs
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(+[](std::map<int, bool>* m) { return m->count(2) > 0; }, &alone));
  }
  release_first.Notify();
  // Tasks complete inside Run, before the worker's BatchDone: wait for the batcher's own count.
  while (batcher->Stats().running_batches > 0) std::this_thread::yield();
  submit(3);
  (*pool)->Stop();
  absl::MutexLock lock(&mu);
  EXPECT_TRUE(alone[1]);
  EXPECT_FALSE(alone[2]);
  EXPECT_TRUE(alone[3]);
}

static_assert(HasRequestKey<FakeTask>);

// Failure isolation: a runner that fails every batch holding a poisoned task (as ONNX Runtime
// fails a whole batch over one out-of-range token). Tasks are submitted before the pool starts,
// so the one worker takes them as one batch.
struct PoisonRun {
  std::vector<int> ids;               // task ids of the run, in order
  size_t padded_batch_size = 0;
  size_t padded_sequence_length = 0;
  bool failed = false;
};

class PoisonRunner : public BatchRunner<FakeTask> {
 public:
  PoisonRunner(std::set<int> poisoned, std::vector<PoisonRun>* runs) : poisoned_(std::move(poisoned)), runs_(runs) {}
  absl::Status Run(Batch<FakeTask>& batch) override {
    PoisonRun run{testing::Ids(batch), batch.padded_batch_size, batch.padded_sequence_length, false};
    for (int id : run.ids) {
      if (poisoned_.count(id) > 0) {
        run.failed = true;
        runs_->push_back(run);
        return absl::InvalidArgumentError(absl::StrCat("index out of range in task ", id));
      }
    }
    runs_->push_back(run);
    for (auto& t : batch.tasks) {
      t->Complete();
      t.reset();
    }
    return absl::OkStatus();
  }

 private:
  std::set<int> poisoned_;
  std::vector<PoisonRun>* runs_;
};

struct PoisonOutcome {
  std::vector<PoisonRun> runs;
  InstanceStats stats;
  uint64_t dropped = 0;
};

// Runs tasks (id, request, seq_len) as one batch on a PoisonRunner and returns what happened.
PoisonOutcome RunPoisoned(Journal& journal, const std::vector<std::tuple<int, uintptr_t, size_t>>& tasks,
                          std::set<int> poisoned, const BatcherOptions& o) {
  PoisonOutcome out;
  FakeClock clock;
  auto batcher = MakeBatcher(o, &clock);
  for (const auto& [id, request, seq_len] : tasks) {
    auto t = std::make_unique<FakeTask>(&journal, id, seq_len);
    t->set_request(request);
    EXPECT_TRUE(batcher->Submit(t).ok());
  }
  auto pool = InstancePool<FakeTask>::Create({.instance_count = 1}, batcher.get(), [&](int) {
    return std::make_unique<PoisonRunner>(poisoned, &out.runs);
  });
  EXPECT_TRUE(pool.ok()) << pool.status();
  if (!pool.ok()) return out;
  (*pool)->Stop();
  out.stats = (*pool)->Stats()[0];
  out.dropped = batcher->Stats().dropped_by(DropReason::kRunnerError);
  return out;
}

BatcherOptions EightRowBatches() {
  BatcherOptions o;
  o.max_batch_size = 8;
  return o;
}

TEST(InstancePoolIsolationTest, OnlyThePoisonedRequestFailsAndTheOthersGetTheirResults) {
  Journal journal;
  // Eight requests of one task each; request 3 (task 3) is poisoned.
  std::vector<std::tuple<int, uintptr_t, size_t>> tasks;
  for (int id = 1; id <= 8; ++id) tasks.emplace_back(id, id, 10);
  PoisonOutcome out = RunPoisoned(journal, tasks, {3}, EightRowBatches());
  for (int id = 1; id <= 8; ++id) {
    EXPECT_EQ(journal.completions(id), 1) << "task " << id;
    if (id == 3) {
      EXPECT_EQ(journal.reason(id), DropReason::kRunnerError);
      EXPECT_EQ(journal.status(id).code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(journal.status(id).message()), ::testing::HasSubstr("task 3"));
    } else {
      EXPECT_FALSE(journal.reason(id).has_value()) << "task " << id << ": " << journal.status(id);
    }
  }
  EXPECT_EQ(journal.done(), 7u);
  // The formed batch, then [1-4] fails, [1,2] ok, [3,4] fails, [3] fails alone, [4] ok, [5-8] ok.
  ASSERT_EQ(out.runs.size(), 7u);
  EXPECT_EQ(out.runs[0].ids.size(), 8u);
  EXPECT_EQ(out.runs[1].ids, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(out.runs[3].ids, (std::vector<int>{3, 4}));
  EXPECT_EQ(out.runs[4].ids, (std::vector<int>{3}));
  EXPECT_TRUE(out.runs[4].failed);
  EXPECT_EQ(out.runs[6].ids, (std::vector<int>{5, 6, 7, 8}));
  EXPECT_EQ(out.stats.batches, 1u);
  EXPECT_EQ(out.stats.tasks, 8u);
  EXPECT_EQ(out.stats.failed_batches, 1u);
  EXPECT_EQ(out.stats.isolation_runs, 6u);
  EXPECT_EQ(out.dropped, 1u);
}

TEST(InstancePoolIsolationTest, SeveralPoisonedRequestsInOneBatchFailAloneWithAllTheirRows) {
  Journal journal;
  // Request 10: tasks 1, 2 (task 2 poisoned); request 20: tasks 3, 4; request 30: task 5 (poisoned);
  // request 40: tasks 6, 7, 8. Rows of one request travel and fail together.
  std::vector<std::tuple<int, uintptr_t, size_t>> tasks = {{1, 10, 10}, {2, 10, 10}, {3, 20, 10}, {4, 20, 10},
                                                           {5, 30, 10}, {6, 40, 10}, {7, 40, 10}, {8, 40, 10}};
  PoisonOutcome out = RunPoisoned(journal, tasks, {2, 5}, EightRowBatches());
  for (int id = 1; id <= 8; ++id) {
    EXPECT_EQ(journal.completions(id), 1) << "task " << id;
    const bool poisoned_request = id <= 2 || id == 5;
    if (poisoned_request) {
      EXPECT_EQ(journal.reason(id), DropReason::kRunnerError) << "task " << id;
    } else {
      EXPECT_FALSE(journal.reason(id).has_value()) << "task " << id << ": " << journal.status(id);
    }
  }
  EXPECT_EQ(journal.done(), 5u);
  EXPECT_EQ(out.dropped, 3u);
  // [10,20] fails -> [10] fails, [20] ok; [30,40] fails -> [30] fails, [40] ok.
  EXPECT_EQ(out.stats.isolation_runs, 6u);
}

TEST(InstancePoolIsolationTest, SubBatchesArePaddedToTheirOwnShape) {
  Journal journal;
  BatcherOptions o = EightRowBatches();
  o.allowed_batch_sizes = {1, 2, 4, 8};
  o.sequence_buckets = {16, 32, 64};
  o.group_by_length = false;  // arrival order: the long and the short rows share the first batch
  // Request 1: a 50-token task (bucket 64), poisoned; requests 2, 3: 10 tokens (bucket 16).
  std::vector<std::tuple<int, uintptr_t, size_t>> tasks = {{1, 1, 50}, {2, 2, 10}, {3, 3, 10}};
  PoisonOutcome out = RunPoisoned(journal, tasks, {1}, o);
  ASSERT_EQ(out.runs.size(), 3u);
  EXPECT_EQ(out.runs[0].padded_batch_size, 4u);
  EXPECT_EQ(out.runs[0].padded_sequence_length, 64u);
  EXPECT_EQ(out.runs[1].ids, (std::vector<int>{1}));
  EXPECT_EQ(out.runs[1].padded_batch_size, 1u);
  EXPECT_EQ(out.runs[1].padded_sequence_length, 64u);
  EXPECT_EQ(out.runs[2].ids, (std::vector<int>{2, 3}));
  EXPECT_EQ(out.runs[2].padded_batch_size, 2u);
  EXPECT_EQ(out.runs[2].padded_sequence_length, 16u);
  EXPECT_EQ(journal.done(), 2u);
  EXPECT_EQ(journal.reason(1), DropReason::kRunnerError);
}

TEST(InstancePoolIsolationTest, TasksCancelledByThenAreNotRerun) {
  Journal journal;
  FakeClock clock;
  auto batcher = MakeBatcher(EightRowBatches(), &clock);
  auto gone = std::make_shared<std::atomic<bool>>(false);
  for (int id = 1; id <= 3; ++id) {
    auto t = std::make_unique<FakeTask>(&journal, id, 10);
    t->set_request(static_cast<uintptr_t>(id));
    if (id == 2) t->set_cancel_flag(gone);
    ASSERT_TRUE(batcher->Submit(t).ok());
  }
  std::vector<std::vector<int>> runs;
  auto pool = InstancePool<FakeTask>::Create({.instance_count = 1}, batcher.get(), [&](int) {
    return std::make_unique<FakeRunner>([&](int n, Batch<FakeTask>& batch) -> absl::Status {
      runs.push_back(testing::Ids(batch));
      if (n > 0) return absl::OkStatus();
      gone->store(true);  // task 2's client leaves while the batch runs, and the batch fails
      return absl::UnavailableError("hiccup");
    });
  });
  ASSERT_TRUE(pool.ok());
  (*pool)->Stop();
  EXPECT_EQ(journal.reason(2), DropReason::kCancelled);
  EXPECT_EQ(journal.completions(1), 1);
  EXPECT_EQ(journal.completions(3), 1);
  EXPECT_EQ(journal.done(), 2u);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[1], (std::vector<int>{1}));
  EXPECT_EQ(runs[2], (std::vector<int>{3}));
  EXPECT_EQ(batcher->Stats().dropped_by(DropReason::kCancelled), 1u);
  EXPECT_EQ(batcher->Stats().dropped_by(DropReason::kRunnerError), 0u);
}

TEST(InstancePoolIsolationTest, ABatchOfOneRequestFailsWithoutReruns) {
  Journal journal;
  std::vector<std::tuple<int, uintptr_t, size_t>> tasks = {{1, 7, 10}, {2, 7, 10}, {3, 7, 10}};
  PoisonOutcome out = RunPoisoned(journal, tasks, {2}, EightRowBatches());
  EXPECT_EQ(out.runs.size(), 1u);
  EXPECT_EQ(out.stats.isolation_runs, 0u);
  for (int id = 1; id <= 3; ++id) EXPECT_EQ(journal.reason(id), DropReason::kRunnerError);
  EXPECT_EQ(out.dropped, 3u);
}

TEST(InstancePoolTest, StopAfterGraceDropsQueuedWorkWithShutdownAndFinishesTheRunningBatch) {
  Journal journal;
  BatcherOptions o;
  o.max_batch_size = 1;
  auto batcher = MakeBatcher(o, SteadyClock::Get());
  absl::Notification started, release;
  auto pool = InstancePool<FakeTask>::Create(
      {.instance_count = 1, .shutdown_grace = std::chrono::milliseconds(0)}, batcher.get(), [&](int) {
        return std::make_unique<FakeRunner>([&](int n, Batch<FakeTask>&) {
          if (n == 0) {
            started.Notify();
            release.WaitForNotification();
          }
          return absl::OkStatus();
        });
      });
  ASSERT_TRUE(pool.ok());
  auto first = std::make_unique<FakeTask>(&journal, 1, 10);
  ASSERT_TRUE(batcher->Submit(first).ok());
  started.WaitForNotification();
  for (int id = 2; id <= 3; ++id) {
    auto t = std::make_unique<FakeTask>(&journal, id, 10);
    ASSERT_TRUE(batcher->Submit(t).ok());
  }
  // Stop drops the queued tasks while task 1 is still running; wait for those completions.
  absl::Notification both_dropped;
  std::atomic<int> drops{0};
  journal.set_on_drop([&](int) {
    if (++drops == 2) both_dropped.Notify();
  });
  std::thread stopper([&] { (*pool)->Stop(); });
  both_dropped.WaitForNotification();
  release.Notify();
  stopper.join();
  EXPECT_EQ(journal.completions(1), 1);
  EXPECT_FALSE(journal.reason(1).has_value());
  EXPECT_EQ(journal.reason(2), DropReason::kShutdown);
  EXPECT_EQ(journal.reason(3), DropReason::kShutdown);
  EXPECT_EQ(batcher->Stats().dropped_by(DropReason::kShutdown), 2u);
}

TEST(InstancePoolTest, BusyRatioIsTimeInRunOverTimeSinceCreate) {
  Journal journal;
  FakeClock clock;
  auto batcher = MakeBatcher(BatcherOptions{}, &clock);
  absl::Notification done;
  auto pool = InstancePool<FakeTask>::Create({.instance_count = 1}, batcher.get(), [&](int) {
    return std::make_unique<FakeRunner>([&](int, Batch<FakeTask>&) {
      clock.Advance(std::chrono::milliseconds(30));
      return absl::OkStatus();
    });
  });
  ASSERT_TRUE(pool.ok());
  auto t = std::make_unique<FakeTask>(&journal, 1, 10);
  ASSERT_TRUE(batcher->Submit(t).ok());
  (*pool)->Stop();  // waits for the batch
  clock.Advance(std::chrono::milliseconds(70));
  auto stats = (*pool)->Stats();
  EXPECT_EQ(stats[0].busy, std::chrono::milliseconds(30));
  EXPECT_DOUBLE_EQ(stats[0].busy_ratio, 0.3);
}

// Real threads: producers submit (some tasks get cancelled, some batches fail) while several
// instances run batches. Every task must end exactly once and the counters must add up.
TEST(InstancePoolTest, ConcurrentSubmitAndRunCompletesEveryTaskExactlyOnce) {
  Journal journal;
  BatcherOptions o;
  o.max_batch_size = 8;
  o.max_batch_tokens = 2048;
  o.max_queue_delay = microseconds(200);
  o.priority_levels = 2;
  o.default_priority_level = 2;
  auto batcher = MakeBatcher(o, SteadyClock::Get());
  std::atomic<uint64_t> runner_batches{0};
  // A grace far beyond any run, so that Stop drains everything even on a slow (sanitizer) build;
  // Stop returns as soon as the workers are done.
  auto pool = InstancePool<FakeTask>::Create(
      {.instance_count = 3, .shutdown_grace = std::chrono::hours(1)}, batcher.get(), [&](int instance) {
    return std::make_unique<FakeRunner>([&, instance](int n, Batch<FakeTask>& batch) -> absl::Status {
      ++runner_batches;
      EXPECT_LE(batch.size(), 8u);
      EXPECT_LE(batch.padded_tokens, 2048u);
      if (n % 5 == 4) return absl::UnavailableError(absl::StrCat("instance ", instance, " hiccup"));
      return absl::OkStatus();
    });
  });
  ASSERT_TRUE(pool.ok());

  constexpr int kProducers = 4, kPerProducer = 400;
  std::atomic<int> accepted{0}, refused{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) {
        const int id = p * kPerProducer + i;
        auto t = std::make_unique<FakeTask>(&journal, id, 1 + (id * 37) % 500);
        t->set_priority(1 + id % 2);
        auto flag = std::make_shared<std::atomic<bool>>(id % 11 == 0);
        t->set_cancel_flag(flag);
        if (batcher->Submit(t).ok()) {
          ++accepted;
        } else {
          ++refused;
          EXPECT_NE(t, nullptr);
        }
      }
    });
  }
  for (auto& t : producers) t.join();
  (*pool)->Stop();

  EXPECT_EQ(accepted + refused, kProducers * kPerProducer);
  EXPECT_EQ(refused.load(), 0);
  std::map<int, int> completions = journal.all_completions();
  EXPECT_EQ(completions.size(), static_cast<size_t>(accepted.load()));
  for (const auto& [id, count] : completions) EXPECT_EQ(count, 1) << "task " << id;

  BatcherStats stats = batcher->Stats();
  EXPECT_EQ(stats.submitted, static_cast<uint64_t>(accepted.load()));
  EXPECT_EQ(stats.queued_tasks, 0u);
  EXPECT_EQ(stats.queued_tokens, 0u);
  const uint64_t cancelled = stats.dropped_by(DropReason::kCancelled);
  EXPECT_EQ(cancelled, journal.dropped(DropReason::kCancelled));
  EXPECT_GT(cancelled, 0u);
  EXPECT_EQ(stats.dropped_by(DropReason::kShutdown), 0u);
  EXPECT_EQ(stats.batched_tasks + cancelled, stats.submitted);
  EXPECT_EQ(journal.done() + journal.dropped(DropReason::kRunnerError) + cancelled, stats.submitted);
  EXPECT_EQ(stats.dropped_by(DropReason::kRunnerError), journal.dropped(DropReason::kRunnerError));
  EXPECT_GT(stats.dropped_by(DropReason::kRunnerError), 0u);
  EXPECT_EQ(stats.batches_formed, runner_batches.load());
  uint64_t pool_batches = 0, pool_tasks = 0;
  for (const InstanceStats& s : (*pool)->Stats()) {
    pool_batches += s.batches;
    pool_tasks += s.tasks;
  }
  EXPECT_EQ(pool_batches, stats.batches_formed);
  EXPECT_EQ(pool_tasks, stats.batched_tasks);
}

}  // namespace
}  // namespace tide::batching

namespace tide::batching {
namespace {

// SCHED_IDLE is per thread: the thread that asks gets it, a thread it creates afterwards (an
// inference library's pool) inherits it, and the rest of the process keeps its policy.
TEST(ThreadPriorityTest, IdleSchedulingIsPerThreadAndInherited) {
  ASSERT_FALSE(CurrentThreadIsIdleScheduled());
  std::atomic<int> self{-1}, child{-1};
  absl::Status status;
  std::thread t([&] {
    status = UseIdleSchedulingForCurrentThread();
    self = CurrentThreadIsIdleScheduled() ? 1 : 0;
    std::thread c([&] { child = CurrentThreadIsIdleScheduled() ? 1 : 0; });
    c.join();
  });
  t.join();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(self.load(), 1);
  EXPECT_EQ(child.load(), 1);
  EXPECT_FALSE(CurrentThreadIsIdleScheduled());
}

TEST(InstancePoolTest, WorkersAreNamedAndWorkerNiceLowersThemAndTheThreadsRunnersCreateButNotTheCaller) {
  const int base = CurrentThreadNice();
  if (base + 3 > 19) GTEST_SKIP() << "this process already runs at nice " << base;
  Journal journal;
  BatcherOptions o;
  o.max_batch_size = 1;
  auto batcher = MakeBatcher(o, SteadyClock::Get());
  std::atomic<int> factory_nice{-100}, child_nice{-100}, worker_nice{-100};
  std::string worker_name;  // written by the worker, read after Stop() joined it
  auto pool = InstancePool<FakeTask>::Create(
      {.instance_count = 1, .worker_nice = 3}, batcher.get(),
      [&](int) -> absl::StatusOr<std::unique_ptr<BatchRunner<FakeTask>>> {
        factory_nice = CurrentThreadNice();
        std::thread pool_thread([&] { child_nice = CurrentThreadNice(); });  // like ORT's intra-op pool
        pool_thread.join();
        return std::make_unique<FakeRunner>([&](int, Batch<FakeTask>&) {
          worker_nice = CurrentThreadNice();
          char name[16] = {};
          pthread_getname_np(pthread_self(), name, sizeof name);
          worker_name = name;
          return absl::OkStatus();
        });
      });
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto t = std::make_unique<FakeTask>(&journal, 0, 10);
  ASSERT_TRUE(batcher->Submit(t).ok());
  (*pool)->Stop();
  EXPECT_EQ(journal.completions(0), 1);
  EXPECT_EQ(factory_nice.load(), base + 3);
  EXPECT_EQ(child_nice.load(), base + 3);
  EXPECT_EQ(worker_nice.load(), base + 3);
  EXPECT_EQ(worker_name, "tide-infer-0");  // as top -H shows it
  EXPECT_EQ(CurrentThreadNice(), base);  // the caller (the server's main thread) keeps its priority

  EXPECT_EQ(InstancePool<FakeTask>::Create({.instance_count = 1, .worker_nice = 20}, batcher.get(),
                                           [](int) { return std::make_unique<FakeRunner>(); })
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LowerCurrentThreadPriority(-1).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tide::batching
