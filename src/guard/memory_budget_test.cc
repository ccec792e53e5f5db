#include "guard/memory_budget.h"

#include <atomic>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace tide::guard {
namespace {

MemoryBudget::Options Capacity(int64_t bytes) {
  MemoryBudget::Options o;
  o.capacity_bytes = bytes;
  return o;
}

TEST(MemoryBudgetTest, AdmitsByBytesUntilFullThenRefuses) {
  MemoryBudget budget(Capacity(100));
  auto a = budget.TryAcquire(60);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(budget.in_flight_bytes(), 60);
  EXPECT_FALSE(budget.TryAcquire(41).has_value());
  EXPECT_EQ(budget.in_flight_bytes(), 60);  // a refusal leaves no trace
  auto b = budget.TryAcquire(40);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(budget.in_flight_bytes(), 100);
  EXPECT_FALSE(budget.TryAcquire(1).has_value());
  a.reset();
  EXPECT_EQ(budget.in_flight_bytes(), 40);
  EXPECT_TRUE(budget.TryAcquire(60).has_value());  // temporary: released at once
  EXPECT_EQ(budget.in_flight_bytes(), 40);
}

TEST(MemoryBudgetTest, FitsSaysWhetherOneRequestAloneCouldEverBeAdmitted) {
  MemoryBudget budget(Capacity(100));
  EXPECT_TRUE(budget.Fits(100));
  EXPECT_FALSE(budget.Fits(101));
  auto held = budget.TryAcquire(90);
  EXPECT_TRUE(budget.Fits(50));  // fits the capacity, though not now
  EXPECT_FALSE(budget.TryAcquire(50).has_value());
}

TEST(MemoryBudgetTest, ZeroCapacityIsUnlimitedButCounts) {
  MemoryBudget budget(Capacity(0));
  EXPECT_TRUE(budget.Fits(int64_t{1} << 50));
  auto a = budget.TryAcquire(int64_t{1} << 40);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(budget.in_flight_bytes(), int64_t{1} << 40);
}

TEST(MemoryBudgetTest, LeaseMovesOwnership) {
  MemoryBudget budget(Capacity(10));
  std::optional<MemoryBudget::Lease> held = budget.TryAcquire(10);
  ASSERT_TRUE(held.has_value());
  MemoryBudget::Lease moved = std::move(*held);
  held.reset();  // the moved-from lease releases nothing
  EXPECT_EQ(budget.in_flight_bytes(), 10);
  EXPECT_EQ(moved.bytes(), 10);
  {
    MemoryBudget::Lease sink = std::move(moved);
  }
  EXPECT_EQ(budget.in_flight_bytes(), 0);
}

TEST(MemoryBudgetTest, OnDrainedFiresOncePerExcursionAboveTheHighMark) {
  int drained = 0;
  MemoryBudget::Options o = Capacity(1000);
  o.trim_above_bytes = 500;
  o.trim_below_bytes = 100;
  o.on_drained = [&drained] { ++drained; };
  MemoryBudget budget(o);
  {
    auto small = budget.TryAcquire(400);  // below the high mark: not armed
  }
  EXPECT_EQ(drained, 0);
  auto a = budget.TryAcquire(300);
  auto b = budget.TryAcquire(300);  // 600: armed
  a.reset();                        // 300: still above the low mark
  EXPECT_EQ(drained, 0);
  auto c = budget.TryAcquire(50);
  b.reset();  // 50: drained
  EXPECT_EQ(drained, 1);
  c.reset();  // not armed again
  EXPECT_EQ(drained, 1);
  {
    auto big = budget.TryAcquire(900);
  }
  EXPECT_EQ(drained, 2);
}

TEST(MemoryBudgetTest, ConcurrentLeasesNeverExceedTheCapacity) {
  MemoryBudget budget(Capacity(1000));
  std::atomic<int64_t> peak{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        auto lease = budget.TryAcquire(300);
        if (!lease.has_value()) continue;
        const int64_t now = budget.in_flight_bytes();
        int64_t seen = peak.load();
        while (now > seen && !peak.compare_exchange_weak(seen, now)) {
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(peak.load(), 1000);
  EXPECT_EQ(budget.in_flight_bytes(), 0);
}

TEST(MemoryBudgetTest, EstimateScalesWithTheBody) {
  EXPECT_EQ(EstimateRequestBytes(1000, 16, 4096), 16 * 1000 + 4096);
  EXPECT_EQ(EstimateRequestBytes(0, 16, 4096), 4096);
  EXPECT_EQ(EstimateRequestBytes(10, 0, -5), 10);  // factor at least 1, no negative fixed part
}

}  // namespace
}  // namespace tide::guard
