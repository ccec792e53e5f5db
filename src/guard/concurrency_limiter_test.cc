#include "guard/concurrency_limiter.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace tide::guard {
namespace {

TEST(ConcurrencyLimiterTest, GrantsUpToMaxThenRejects) {
  ConcurrencyLimiter limiter(2);
  auto a = limiter.TryAcquire();
  auto b = limiter.TryAcquire();
  ASSERT_TRUE(a.has_value());
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(limiter.in_flight(), 2);
  EXPECT_FALSE(limiter.TryAcquire().has_value());
  EXPECT_EQ(limiter.in_flight(), 2);  // a rejection leaves no trace
  a.reset();
  EXPECT_EQ(limiter.in_flight(), 1);
  auto c = limiter.TryAcquire();
  EXPECT_TRUE(c.has_value());
  EXPECT_FALSE(limiter.TryAcquire().has_value());
}

TEST(ConcurrencyLimiterTest, PermitMovesOwnership) {
  ConcurrencyLimiter limiter(1);
  std::optional<ConcurrencyLimiter::Permit> held = limiter.TryAcquire();
  ASSERT_TRUE(held.has_value());
  ConcurrencyLimiter::Permit moved = std::move(*held);
  held.reset();  // the moved-from permit releases nothing
  EXPECT_EQ(limiter.in_flight(), 1);
  EXPECT_FALSE(limiter.TryAcquire().has_value());
  {
    ConcurrencyLimiter::Permit sink = std::move(moved);
    EXPECT_EQ(limiter.in_flight(), 1);
  }
  EXPECT_EQ(limiter.in_flight(), 0);
}

TEST(ConcurrencyLimiterTest, MoveAssignmentReleasesTheOldPermit) {
  ConcurrencyLimiter first(1);
  ConcurrencyLimiter second(1);
  auto a = first.TryAcquire();
  auto b = second.TryAcquire();
  ASSERT_TRUE(a.has_value() && b.has_value());
  *a = std::move(*b);
  EXPECT_EQ(first.in_flight(), 0);
  EXPECT_EQ(second.in_flight(), 1);
  a.reset();
  EXPECT_EQ(second.in_flight(), 0);
}

TEST(ConcurrencyLimiterTest, ZeroMeansUnlimitedButCounted) {
  ConcurrencyLimiter limiter(0);
  std::vector<ConcurrencyLimiter::Permit> permits;
  for (int i = 0; i < 1000; ++i) {
    auto permit = limiter.TryAcquire();
    ASSERT_TRUE(permit.has_value());
    permits.push_back(std::move(*permit));
  }
  EXPECT_EQ(limiter.in_flight(), 1000);
  permits.clear();
  EXPECT_EQ(limiter.in_flight(), 0);
}

TEST(ConcurrencyLimiterTest, NeverExceedsMaxUnderContention) {
  constexpr int kMax = 3;
  ConcurrencyLimiter limiter(kMax);
  std::atomic<int> holders{0};
  std::atomic<int> peak{0};
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        auto permit = limiter.TryAcquire();
        if (!permit) continue;
        ++granted;
        const int now = ++holders;
        int seen = peak.load();
        while (now > seen && !peak.compare_exchange_weak(seen, now)) {
        }
        --holders;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_LE(peak.load(), kMax);
  EXPECT_GT(granted.load(), 0);
  EXPECT_EQ(limiter.in_flight(), 0);
}

}  // namespace
}  // namespace tide::guard
