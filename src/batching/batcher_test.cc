#include "batching/batcher.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "batching/test_task.h"
#include "common/error.h"

namespace tide::batching {
namespace {

using ::testing::ElementsAre;
using std::chrono::microseconds;
using testing::FakeTask;
using testing::Ids;
using testing::Journal;

std::unique_ptr<Batcher<FakeTask>> MakeBatcher(const BatcherOptions& o, Clock* clock,
                                               Batcher<FakeTask>::BatchHook hook = nullptr) {
  auto b = Batcher<FakeTask>::Create({.batching = o, .clock = clock, .on_batch = std::move(hook)});
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *std::move(b) : nullptr;
}

// Every way the batcher drops a task answers with its kind: deadline 504, cancelled 499, queue
// timeout and shutdown 503, a failed batch "backend" 500.
TEST(BatcherTest, DropStatusesCarryTheirErrorKind) {
  EXPECT_EQ(KindOf(DropStatus(DropReason::kDeadlineExceeded)), ErrorKind::kDeadlineExceeded);
  EXPECT_EQ(KindOf(DropStatus(DropReason::kCancelled)), ErrorKind::kCancelled);
  EXPECT_EQ(KindOf(DropStatus(DropReason::kQueueTimeout)), ErrorKind::kUnavailable);
  EXPECT_EQ(KindOf(DropStatus(DropReason::kShutdown)), ErrorKind::kUnavailable);
  EXPECT_EQ(KindOf(DropStatus(DropReason::kRunnerError)), ErrorKind::kBackend);
}

TEST(BatcherTest, CreateRejectsInvalidOptions) {
  BatcherOptions o;
  o.max_batch_size = 0;
  EXPECT_EQ(Batcher<FakeTask>::Create({.batching = o, .clock = nullptr, .on_batch = nullptr}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BatcherTest, WaitingInstanceWakesAtTheComputedDelayOnTheInjectedClock) {
  FakeClock clock;
  BatcherOptions o;
  o.max_queue_delay = microseconds(1000);
  Journal journal;
  auto batcher = MakeBatcher(o, &clock);
  Batch<FakeTask> batch;
  absl::Notification got;
  std::thread worker([&] {
    ASSERT_TRUE(batcher->WaitForBatch(&batch));
    got.Notify();
  });
  auto t = std::make_unique<FakeTask>(&journal, 1, 10);
  ASSERT_TRUE(batcher->Submit(t).ok());
  clock.Advance(microseconds(400));
  clock.Advance(microseconds(600));
  got.WaitForNotification();
  worker.join();
  EXPECT_THAT(Ids(batch), ElementsAre(1));
  // Formed exactly at the wake-up: had the worker not waited for the fake delay, it would be 0.
  EXPECT_EQ(batch.queue_durations[0], microseconds(1000));
}

// QueuedTasks (read without the lock) follows every submit, formed batch and drop.
TEST(BatcherTest, QueuedTasksFollowsSubmitFormAndDrop) {
  Journal journal;
  BatcherOptions o;
  o.max_batch_size = 2;
  auto batcher = MakeBatcher(o, SteadyClock::Get());
  EXPECT_EQ(batcher->QueuedTasks(), 0u);
  for (int id = 1; id <= 3; ++id) {
    auto t = std::make_unique<FakeTask>(&journal, id, 10);
    ASSERT_TRUE(batcher->Submit(t).ok());
  }
  EXPECT_EQ(batcher->QueuedTasks(), 3u);
  Batch<FakeTask> batch;
  ASSERT_TRUE(batcher->WaitForBatch(&batch));
  EXPECT_EQ(batch.size(), 2u);
  EXPECT_EQ(batcher->QueuedTasks(), 1u);
  batcher->DropQueued(DropReason::kShutdown);
  EXPECT_EQ(batcher->QueuedTasks(), 0u);
}

TEST(BatcherTest, SubmitAfterShutdownFailsAndKeepsTheTask) {
  Journal journal;
  auto batcher = MakeBatcher(BatcherOptions{}, SteadyClock::Get());
  batcher->Shutdown();
  auto t = std::make_unique<FakeTask>(&journal, 1, 10);
  EXPECT_EQ(batcher->Submit(t).code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(t, nullptr);
  Batch<FakeTask> batch;
  EXPECT_FALSE(batcher->WaitForBatch(&batch));
}

TEST(BatcherTest, ShutdownStillReleasesQueuedWorkWithoutWaitingForTheDelay) {
  FakeClock clock;  // never advanced: only the flush can release the task
  BatcherOptions o;
  o.max_queue_delay = microseconds(1'000'000);
  Journal journal;
  auto batcher = MakeBatcher(o, &clock);
  auto t = std::make_unique<FakeTask>(&journal, 1, 10);
  ASSERT_TRUE(batcher->Submit(t).ok());
  batcher->Shutdown();
  Batch<FakeTask> batch;
  ASSERT_TRUE(batcher->WaitForBatch(&batch));
  EXPECT_THAT(Ids(batch), ElementsAre(1));
  EXPECT_FALSE(batcher->WaitForBatch(&batch));
}

TEST(BatcherTest, DropsAreCompletedWithoutTheLockSoTheyMaySubmitAgain) {
  FakeClock clock;
  BatcherOptions o;
  Journal journal;
  auto batcher = MakeBatcher(o, &clock);
  auto flag = std::make_shared<std::atomic<bool>>(false);
  auto t = std::make_unique<FakeTask>(&journal, 1, 10);
  t->set_cancel_flag(flag);
  ASSERT_TRUE(batcher->Submit(t).ok());
  flag->store(true);
  // The drop completion re-submits (a retry): it would deadlock if run under the batcher's lock.
  journal.set_on_drop([&](int id) {
    auto retry = std::make_unique<FakeTask>(&journal, id + 100, 10);
    EXPECT_TRUE(batcher->Submit(retry).ok());
  });
  Batch<FakeTask> batch;
  ASSERT_TRUE(batcher->WaitForBatch(&batch));
  EXPECT_THAT(Ids(batch), ElementsAre(101));
  EXPECT_EQ(journal.reason(1), DropReason::kCancelled);
  BatcherStats stats = batcher->Stats();
  EXPECT_EQ(stats.submitted, 2u);
  EXPECT_EQ(stats.dropped_by(DropReason::kCancelled), 1u);
  EXPECT_EQ(stats.batches_formed, 1u);
}

TEST(BatcherTest, BatchHookSeesEveryBatch) {
  std::atomic<size_t> hooked_tasks{0};
  BatcherOptions o;
  o.max_batch_size = 2;
  Journal journal;
  auto batcher = MakeBatcher(o, SteadyClock::Get(), [&](const Batch<FakeTask>& b) { hooked_tasks += b.size(); });
  for (int i = 0; i < 3; ++i) {
    auto t = std::make_unique<FakeTask>(&journal, i, 10);
    ASSERT_TRUE(batcher->Submit(t).ok());
  }
  Batch<FakeTask> batch;
  ASSERT_TRUE(batcher->WaitForBatch(&batch));
  EXPECT_EQ(batch.size(), 2u);
  ASSERT_TRUE(batcher->WaitForBatch(&batch));
  EXPECT_EQ(batch.size(), 1u);
  EXPECT_EQ(hooked_tasks.load(), 3u);
}

// Batch::alone: the batch is formed with nothing else running (returned and not BatchDone) and
// nothing left queued; only then may its instance widen the run onto idle cores.
TEST(BatcherTest, BatchIsAloneOnlyWithNothingElseRunningOrQueued) {
  FakeClock clock;  // max_queue_delay 0: no time needs to pass
  BatcherOptions o;
  o.max_batch_size = 1;
  Journal journal;
  auto batcher = MakeBatcher(o, &clock);
  auto submit = [&](int id) {
    auto t = std::make_unique<FakeTask>(&journal, id, 10);
    ASSERT_TRUE(batcher->Submit(t).ok());
  };
  Batch<FakeTask> first, second;
  submit(1);
  ASSERT_TRUE(batcher->WaitForBatch(&first));
  EXPECT_TRUE(first.alone);
  submit(2);  // while batch 1 runs
  ASSERT_TRUE(batcher->WaitForBatch(&second));
  EXPECT_FALSE(second.alone);
  batcher->BatchDone();
  batcher->BatchDone();
  submit(3);
  submit(4);  // two queued: the first batch leaves one behind, the second finds batch 3 running
  ASSERT_TRUE(batcher->WaitForBatch(&first));
  EXPECT_FALSE(first.alone);
  ASSERT_TRUE(batcher->WaitForBatch(&second));
  EXPECT_FALSE(second.alone);
  batcher->BatchDone();
  batcher->BatchDone();
  batcher->BatchDone();  // one too many is ignored: the count never goes below zero
  submit(5);
  ASSERT_TRUE(batcher->WaitForBatch(&first));
  EXPECT_TRUE(first.alone);
  EXPECT_THAT(Ids(first), ElementsAre(5));
}

// IdleFor (read without the lock): idle only with nothing queued and no batch running, and only
// once that has lasted the asked time on the batcher's clock.
TEST(BatcherTest, IdleForCountsFromTheEndOfTheLastQueuedOrRunningWork) {
  FakeClock clock;
  BatcherOptions o;
  o.max_batch_size = 1;
  Journal journal;
  auto batcher = MakeBatcher(o, &clock);
  const auto ms = [](int n) { return std::chrono::milliseconds(n); };
  EXPECT_TRUE(batcher->IdleFor(ms(0)));  // idle since it was created
  EXPECT_FALSE(batcher->IdleFor(ms(10)));
  clock.Advance(ms(10));
  EXPECT_TRUE(batcher->IdleFor(ms(10)));
  auto t = std::make_unique<FakeTask>(&journal, 1, 10);
  ASSERT_TRUE(batcher->Submit(t).ok());
  EXPECT_FALSE(batcher->IdleFor(ms(0)));  // queued
  Batch<FakeTask> batch;
  ASSERT_TRUE(batcher->WaitForBatch(&batch));
  EXPECT_EQ(batcher->QueuedTasks(), 0u);
  clock.Advance(ms(50));
  EXPECT_FALSE(batcher->IdleFor(ms(0)));  // running, however long
  batcher->BatchDone();
  EXPECT_TRUE(batcher->IdleFor(ms(0)));
  EXPECT_FALSE(batcher->IdleFor(ms(5)));  // counted from the batch's end, not from the submit
  clock.Advance(ms(5));
  EXPECT_TRUE(batcher->IdleFor(ms(5)));
  // A drop that empties the queue makes it idle from then on.
  auto u = std::make_unique<FakeTask>(&journal, 2, 10);
  ASSERT_TRUE(batcher->Submit(u).ok());
  clock.Advance(ms(20));
  EXPECT_FALSE(batcher->IdleFor(ms(0)));
  batcher->DropQueued(DropReason::kShutdown);
  EXPECT_TRUE(batcher->IdleFor(ms(0)));
  EXPECT_FALSE(batcher->IdleFor(ms(1)));
}

TEST(BatcherTest, QueueFullAnswersUnavailable) {
  BatcherOptions o;
  o.default_queue_policy.max_queue_size = 1;
  Journal journal;
  auto batcher = MakeBatcher(o, SteadyClock::Get());
  auto a = std::make_unique<FakeTask>(&journal, 1, 10);
  auto b = std::make_unique<FakeTask>(&journal, 2, 10);
  ASSERT_TRUE(batcher->Submit(a).ok());
  const absl::Status full = batcher->Submit(b);
  EXPECT_EQ(full.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(KindOf(full), ErrorKind::kUnavailable);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(batcher->Stats().rejected_queue_full, 1u);
  EXPECT_EQ(batcher->Stats().queued_tasks, 1u);
}

}  // namespace
}  // namespace tide::batching
