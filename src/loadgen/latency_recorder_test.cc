#include "loadgen/latency_recorder.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace tide::loadgen {
namespace {

TEST(PercentileOfSorted, NearestRankOnTheTextbookExample) {
  // Nearest rank on {15, 20, 35, 40, 50}: rank = ceil(q/100 * 5).
  const std::vector<double> v = {15, 20, 35, 40, 50};
  EXPECT_EQ(PercentileOfSorted(v, 0), 15);
  EXPECT_EQ(PercentileOfSorted(v, 5), 15);    // rank 1
  EXPECT_EQ(PercentileOfSorted(v, 30), 20);   // ceil(1.5) = 2
  EXPECT_EQ(PercentileOfSorted(v, 40), 20);   // rank 2 exactly
  EXPECT_EQ(PercentileOfSorted(v, 41), 35);   // ceil(2.05) = 3
  EXPECT_EQ(PercentileOfSorted(v, 50), 35);   // ceil(2.5) = 3
  EXPECT_EQ(PercentileOfSorted(v, 100), 50);
}

TEST(PercentileOfSorted, EmptyIsZero) { EXPECT_EQ(PercentileOfSorted({}, 50), 0); }

TEST(LatencyRecorder, SummaryOfOneToOneThousandShuffled) {
  std::vector<double> values(1000);
  std::iota(values.begin(), values.end(), 1.0);
  std::mt19937_64 rng(7);
  std::shuffle(values.begin(), values.end(), rng);
  LatencyRecorder r;
  for (double v : values) r.Record(v);
  LatencySummary s = r.Summarize();
  EXPECT_EQ(s.count, 1000u);
  EXPECT_DOUBLE_EQ(s.mean_ms, 500.5);
  EXPECT_EQ(s.min_ms, 1);
  EXPECT_EQ(s.p50_ms, 500);   // ceil(0.5 * 1000) = 500
  EXPECT_EQ(s.p90_ms, 900);
  EXPECT_EQ(s.p95_ms, 950);
  EXPECT_EQ(s.p99_ms, 990);
  EXPECT_EQ(s.p999_ms, 999);  // ceil(0.999 * 1000) = 999: no floating-point off-by-one
  EXPECT_EQ(s.max_ms, 1000);
}

TEST(LatencyRecorder, SmallSampleTailPercentilesAreTheMaximum) {
  LatencyRecorder r;
  for (double v : {3.0, 1.0, 2.0, 10.0}) r.Record(v);
  LatencySummary s = r.Summarize();
  EXPECT_EQ(s.p50_ms, 2);  // ceil(2) = rank 2
  EXPECT_EQ(s.p90_ms, 10);
  EXPECT_EQ(s.p99_ms, 10);
  EXPECT_DOUBLE_EQ(s.mean_ms, 4);
}

TEST(LatencyRecorder, MergeKeepsEverySample) {
  LatencyRecorder a, b;
  a.Record(1);
  a.Record(2);
  b.Record(3);
  a.Merge(b);
  EXPECT_EQ(a.count(), 3u);
  EXPECT_EQ(a.Percentile(100), 3);
  EXPECT_EQ(a.Summarize().count, 3u);
}

TEST(LatencyRecorder, LogHistogramCountsEverySampleInItsBucket) {
  LatencyRecorder r;
  for (double v : {1.0, 1.1, 9.9, 10.0, 55.0, 100.0}) r.Record(v);
  std::vector<HistogramBucket> buckets = r.LogHistogram(10);
  ASSERT_FALSE(buckets.empty());
  size_t total = 0;
  for (const HistogramBucket& b : buckets) {
    total += b.count;
    EXPECT_LT(b.lower_ms, b.upper_ms);
  }
  EXPECT_EQ(total, 6u);
  EXPECT_LE(buckets.front().lower_ms, 1.0);
  EXPECT_GE(buckets.back().upper_ms, 100.0);
  // 10 buckets per decade from 1 ms: [1, 1.26) holds 1 and 1.1.
  EXPECT_EQ(buckets.front().count, 2u);
  EXPECT_TRUE(LatencyRecorder().LogHistogram().empty());
}

}  // namespace
}  // namespace tide::loadgen
