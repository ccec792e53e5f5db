#include "serving/work_pool.h"

#include <pthread.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"

namespace tide::serving {
namespace {

std::unique_ptr<WorkPool> MakePool(int threads, size_t max_queue) {
  WorkPoolOptions o;
  o.threads = threads;
  o.max_queue = max_queue;
  auto pool = WorkPool::Create(o);
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? *std::move(pool) : nullptr;
}

TEST(WorkPoolTest, RejectsBadOptions) {
  WorkPoolOptions o;
  o.threads = -1;
  EXPECT_EQ(WorkPool::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.threads = 1;
  o.max_queue = 0;
  EXPECT_EQ(WorkPool::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WorkPoolTest, ZeroThreadsMeansOnePerCore) {
  auto pool = MakePool(0, 4);
  ASSERT_NE(pool, nullptr);
  EXPECT_GE(pool->threads(), 1);
}

TEST(WorkPoolTest, RunsEveryTaskOnANamedWorker) {
  auto pool = MakePool(3, 100);
  ASSERT_NE(pool, nullptr);
  constexpr int kTasks = 50;
  absl::BlockingCounter done(kTasks);
  std::atomic<int> named{0};
  for (int i = 0; i < kTasks; ++i) {
    WorkPool::Task task = [&] {
      char name[16] = {};
      pthread_getname_np(pthread_self(), name, sizeof name);
      if (std::string(name).rfind("tide-tok-", 0) == 0) named.fetch_add(1);
      done.DecrementCount();
    };
    ASSERT_TRUE(pool->Submit(task).ok());
  }
  done.Wait();
  EXPECT_EQ(named.load(), kTasks);
}

TEST(WorkPoolTest, AFullQueueRefusesAtOnceAndTheTaskStaysWithTheCaller) {
  auto pool = MakePool(1, 1);
  ASSERT_NE(pool, nullptr);
  absl::Notification started, release;
  WorkPool::Task blocker = [&] {
    started.Notify();
    release.WaitForNotification();
  };
  ASSERT_TRUE(pool->Submit(blocker).ok());
  started.WaitForNotification();  // the only worker is busy
  bool queued_ran = false;
  WorkPool::Task queued = [&] { queued_ran = true; };
  ASSERT_TRUE(pool->Submit(queued).ok());
  EXPECT_EQ(pool->queued(), 1u);

  bool refused_ran = false;
  WorkPool::Task refused = [&] { refused_ran = true; };
  const absl::Status s = pool->Submit(refused);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  ASSERT_TRUE(static_cast<bool>(refused));  // still the caller's
  std::move(refused)();
  EXPECT_TRUE(refused_ran);

  absl::Notification after;
  release.Notify();
  WorkPool::Task marker = [&] { after.Notify(); };
  // The queue drains once the blocker returns; retry until the marker fits (never blocks).
  while (!pool->Submit(marker).ok()) {
  }
  after.WaitForNotification();
  EXPECT_TRUE(queued_ran);  // FIFO: ran before the marker
}

TEST(WorkPoolTest, DestructionDropsTasksNotYetStartedAndFinishesRunningOnes) {
  auto pool = MakePool(1, 10);
  ASSERT_NE(pool, nullptr);
  absl::Notification started, release;
  std::atomic<bool> running_finished{false};
  WorkPool::Task blocker = [&] {
    started.Notify();
    release.WaitForNotification();
    running_finished = true;
  };
  ASSERT_TRUE(pool->Submit(blocker).ok());
  started.WaitForNotification();
  auto owned = std::make_shared<int>(7);
  bool dropped_ran = false;
  WorkPool::Task dropped = [owned, &dropped_ran] { dropped_ran = true; };
  ASSERT_TRUE(pool->Submit(dropped).ok());
  EXPECT_EQ(owned.use_count(), 2);
  std::thread stopper([&] { pool.reset(); });
  // The destructor first drops the queue, then joins: the queued task's state is released before
  // the running task is let go.
  while (owned.use_count() != 1) {
  }
  release.Notify();
  stopper.join();
  EXPECT_TRUE(running_finished.load());
  EXPECT_FALSE(dropped_ran);
}

TEST(WorkPoolTest, ALightTaskRunsWhileHeavyOnesHoldEveryWorkerTheyMay) {
  auto pool = MakePool(2, 10);  // max_heavy_running: 2 - 1 = 1
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->max_heavy_running(), 1);
  absl::Notification started, release;
  WorkPool::Task heavy = [&] {
    started.Notify();
    release.WaitForNotification();
  };
  ASSERT_TRUE(pool->Submit(heavy, WorkPool::Lane::kHeavy).ok());
  started.WaitForNotification();
  std::atomic<bool> second_heavy_ran{false};
  WorkPool::Task heavy2 = [&] { second_heavy_ran = true; };
  ASSERT_TRUE(pool->Submit(heavy2, WorkPool::Lane::kHeavy).ok());
  absl::Notification light_ran;
  WorkPool::Task light = [&] { light_ran.Notify(); };
  ASSERT_TRUE(pool->Submit(light, WorkPool::Lane::kLight).ok());
  // The free worker takes the light task and leaves the second heavy one queued.
  light_ran.WaitForNotification();
  EXPECT_FALSE(second_heavy_ran.load());
  EXPECT_EQ(pool->queued(), 1u);
  release.Notify();
  absl::Notification done;
  WorkPool::Task marker = [&] { done.Notify(); };
  ASSERT_TRUE(pool->Submit(marker, WorkPool::Lane::kHeavy).ok());
  done.WaitForNotification();
  EXPECT_TRUE(second_heavy_ran.load());
}

TEST(WorkPoolTest, OneThreadRunsHeavyTasksToo) {
  auto pool = MakePool(1, 10);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->max_heavy_running(), 1);
  absl::Notification ran;
  WorkPool::Task heavy = [&] { ran.Notify(); };
  ASSERT_TRUE(pool->Submit(heavy, WorkPool::Lane::kHeavy).ok());
  ran.WaitForNotification();
}

}  // namespace
}  // namespace tide::serving
