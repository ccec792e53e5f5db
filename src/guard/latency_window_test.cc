#include "guard/latency_window.h"

#include <chrono>

#include <gtest/gtest.h>

namespace tide::guard {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;
using time_point = LatencyWindow::time_point;

const time_point kOrigin = time_point{} + std::chrono::hours(1);

TEST(LatencyWindowTest, BucketsContainTheirLatencyAndGrowMonotonically) {
  for (int64_t us : {0, 1, 3, 4, 5, 7, 8, 9, 10, 15, 16, 100, 999, 1000, 1024, 200000, 199999,
                     1234567, 987654321}) {
    const int index = LatencyWindow::BucketIndex(microseconds(us));
    ASSERT_GE(index, 0);
    ASSERT_LT(index, LatencyWindow::kBuckets);
    EXPECT_LT(us, LatencyWindow::BucketUpperBoundMicros(index)) << us;
    if (index > 0) {
      EXPECT_GE(us, LatencyWindow::BucketUpperBoundMicros(index - 1)) << us;
    }
  }
  for (int i = 1; i < LatencyWindow::kBuckets; ++i) {
    EXPECT_GT(LatencyWindow::BucketUpperBoundMicros(i), LatencyWindow::BucketUpperBoundMicros(i - 1));
  }
  // Bucket width is at most 25% of its lower bound from 4 µs on.
  for (int i = 5; i < LatencyWindow::kBuckets; ++i) {
    const double lower = LatencyWindow::BucketUpperBoundMicros(i - 1);
    const double upper = LatencyWindow::BucketUpperBoundMicros(i);
    EXPECT_LE((upper - lower) / lower, 0.25 + 1e-12) << i;
  }
  EXPECT_EQ(LatencyWindow::BucketIndex(std::chrono::hours(24 * 365)), LatencyWindow::kBuckets - 1);
  EXPECT_EQ(LatencyWindow::BucketIndex(microseconds(-5)), 0);
}

TEST(LatencyWindowTest, QuantileIsNearestRankBucketUpperBound) {
  LatencyWindow window(seconds(10), 10, milliseconds(200), kOrigin);
  EXPECT_EQ(window.Quantile(kOrigin, 0.99), LatencyWindow::duration::zero());
  for (int i = 0; i < 99; ++i) window.Add(kOrigin, microseconds(1000), true);
  window.Add(kOrigin, milliseconds(500), true);
  // Rank 99 of 100 is 1000 µs, in the bucket [896, 1024).
  EXPECT_EQ(window.Quantile(kOrigin, 0.99), microseconds(1024));
  window.Add(kOrigin, milliseconds(500), true);
  // Rank ceil(99.99) = 100 of 101 is 500 ms, in the bucket [458752, 524288) µs.
  EXPECT_EQ(window.Quantile(kOrigin, 0.99), microseconds(524288));
  EXPECT_EQ(window.Quantile(kOrigin, 0.5), microseconds(1024));
}

TEST(LatencyWindowTest, SlowExceedsQuantileIsExact) {
  LatencyWindow window(seconds(10), 10, milliseconds(200), kOrigin);
  EXPECT_FALSE(window.SlowExceedsQuantile(kOrigin, 0.99));
  for (int i = 0; i < 99; ++i) window.Add(kOrigin, milliseconds(10), true);
  // Exactly at the threshold is not slow; 199.9 ms shares a bucket with 200.1 ms but is not slow.
  window.Add(kOrigin, milliseconds(200), true);
  EXPECT_FALSE(window.SlowExceedsQuantile(kOrigin, 0.99));
  window.Add(kOrigin, microseconds(200100), true);  // n = 101, slow = 1, rank 100: P99 = 200 ms
  EXPECT_FALSE(window.SlowExceedsQuantile(kOrigin, 0.99));
  window.Add(kOrigin, microseconds(200100), true);  // n = 102, slow = 2, rank 101 is slow
  EXPECT_TRUE(window.SlowExceedsQuantile(kOrigin, 0.99));
  EXPECT_EQ(window.GetTotals(kOrigin).slow, 2);
}

TEST(LatencyWindowTest, SlowCountingOffWithZeroThreshold) {
  LatencyWindow window(seconds(10), 10, LatencyWindow::duration::zero(), kOrigin);
  for (int i = 0; i < 10; ++i) window.Add(kOrigin, seconds(100), true);
  EXPECT_EQ(window.GetTotals(kOrigin).slow, 0);
  EXPECT_FALSE(window.SlowExceedsQuantile(kOrigin, 0.99));
}

TEST(LatencyWindowTest, OldSlicesAgeOut) {
  LatencyWindow window(seconds(10), 10, milliseconds(100), kOrigin);
  window.Add(kOrigin, milliseconds(150), false);                  // slice 0
  window.Add(kOrigin + seconds(5), milliseconds(50), true);       // slice 5
  LatencyWindow::Totals totals = window.GetTotals(kOrigin + milliseconds(9999));
  EXPECT_EQ(totals.requests, 2);
  EXPECT_EQ(totals.errors, 1);
  EXPECT_EQ(totals.slow, 1);
  // At 10 s slice 0 leaves the window (it covers slices 1..10).
  totals = window.GetTotals(kOrigin + seconds(10));
  EXPECT_EQ(totals.requests, 1);
  EXPECT_EQ(totals.errors, 0);
  EXPECT_EQ(totals.slow, 0);
  EXPECT_EQ(window.Quantile(kOrigin + seconds(10), 0.99),
            microseconds(LatencyWindow::BucketUpperBoundMicros(
                LatencyWindow::BucketIndex(milliseconds(50)))));
  EXPECT_EQ(window.GetTotals(kOrigin + seconds(15)).requests, 0);
  EXPECT_EQ(window.Quantile(kOrigin + seconds(15), 0.99), LatencyWindow::duration::zero());
  // The ring reuses the slot of slice 0 for slice 20 without mixing in old counts.
  window.Add(kOrigin + seconds(20), milliseconds(1), true);
  EXPECT_EQ(window.GetTotals(kOrigin + seconds(20)).requests, 1);
}

TEST(LatencyWindowTest, LongIdleGapClearsEverything) {
  LatencyWindow window(seconds(10), 10, milliseconds(100), kOrigin);
  for (int s = 0; s < 10; ++s) window.Add(kOrigin + seconds(s), milliseconds(150), false);
  EXPECT_EQ(window.GetTotals(kOrigin + seconds(9)).requests, 10);
  EXPECT_EQ(window.GetTotals(kOrigin + std::chrono::hours(5)).requests, 0);
  window.Add(kOrigin + std::chrono::hours(5), milliseconds(1), true);
  const LatencyWindow::Totals totals = window.GetTotals(kOrigin + std::chrono::hours(5));
  EXPECT_EQ(totals.requests, 1);
  EXPECT_EQ(totals.errors, 0);
  EXPECT_EQ(totals.slow, 0);
}

TEST(LatencyWindowTest, LateTimestampCountsIntoNewestSlice) {
  LatencyWindow window(seconds(10), 10, milliseconds(100), kOrigin);
  window.Add(kOrigin + seconds(5), milliseconds(1), true);
  window.Add(kOrigin + seconds(1), milliseconds(1), true);  // arrived late
  EXPECT_EQ(window.GetTotals(kOrigin + seconds(5)).requests, 2);
  // Both live in slice 5, so both leave together at 15 s.
  EXPECT_EQ(window.GetTotals(kOrigin + milliseconds(14999)).requests, 2);
  EXPECT_EQ(window.GetTotals(kOrigin + seconds(15)).requests, 0);
}

TEST(LatencyWindowTest, ClearForgetsSamples) {
  LatencyWindow window(seconds(10), 10, milliseconds(100), kOrigin);
  for (int i = 0; i < 5; ++i) window.Add(kOrigin, milliseconds(150), false);
  window.Clear();
  const LatencyWindow::Totals totals = window.GetTotals(kOrigin);
  EXPECT_EQ(totals.requests, 0);
  EXPECT_EQ(totals.errors, 0);
  EXPECT_EQ(totals.slow, 0);
  EXPECT_EQ(window.Quantile(kOrigin, 0.99), LatencyWindow::duration::zero());
}

}  // namespace
}  // namespace tide::guard
