#include "loadgen/token_distribution.h"

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"
#include "loadgen/latency_recorder.h"

namespace tide::loadgen {
namespace {

TEST(TokenDistribution, SciFactHasThePublishedQuantilesAndMeans) {
  TokenDistribution q = TokenDistribution::SciFact(TextKind::kQuery);
  EXPECT_DOUBLE_EQ(q.Quantile(0.5), 19);
  EXPECT_DOUBLE_EQ(q.Quantile(0.9), 34);
  EXPECT_DOUBLE_EQ(q.Quantile(0.99), 42);
  EXPECT_NEAR(q.Mean(), 20.8, 0.05);
  TokenDistribution d = TokenDistribution::SciFact(TextKind::kDocument);
  EXPECT_DOUBLE_EQ(d.Quantile(0.5), 314);
  EXPECT_DOUBLE_EQ(d.Quantile(0.9), 500);
  EXPECT_DOUBLE_EQ(d.Quantile(0.99), 762);
  EXPECT_DOUBLE_EQ(d.Quantile(1), 1937);
  EXPECT_NEAR(d.Mean(), 335, 0.5);
}

TEST(TokenDistribution, SamplesFollowTheQuantiles) {
  TokenDistribution d = TokenDistribution::SciFact(TextKind::kDocument);
  std::mt19937_64 rng(42);
  LatencyRecorder samples;  // reused for its percentile math
  double sum = 0;
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    int t = d.Sample(rng);
    ASSERT_GE(t, 94);
    ASSERT_LE(t, 1937);
    samples.Record(t);
    sum += t;
  }
  EXPECT_NEAR(samples.Percentile(50), 314, 6);
  EXPECT_NEAR(samples.Percentile(90), 500, 8);
  EXPECT_NEAR(samples.Percentile(99), 762, 40);
  EXPECT_NEAR(sum / n, 335, 335 * 0.02);
}

TEST(TokenDistribution, ParsesEverySpelling) {
  auto fixed = TokenDistribution::Parse("128", TextKind::kDocument);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  std::mt19937_64 rng(1);
  EXPECT_EQ(fixed->Sample(rng), 128);
  EXPECT_EQ(fixed->spec(), "128");

  auto uniform = TokenDistribution::Parse("uniform:10:20", TextKind::kQuery);
  ASSERT_TRUE(uniform.ok()) << uniform.status();
  for (int i = 0; i < 1000; ++i) {
    int t = uniform->Sample(rng);
    ASSERT_GE(t, 10);
    ASSERT_LE(t, 20);
  }
  EXPECT_DOUBLE_EQ(uniform->Mean(), 15);

  auto q = TokenDistribution::Parse("quantiles:0=6,0.5=19,1=60", TextKind::kQuery);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_DOUBLE_EQ(q->Quantile(0.25), 12.5);

  auto sci = TokenDistribution::Parse("scifact", TextKind::kQuery);
  ASSERT_TRUE(sci.ok());
  EXPECT_DOUBLE_EQ(sci->Quantile(0.5), 19);
}

TEST(TokenDistribution, RejectsMalformedSpecs) {
  for (const char* spec : {"", "zero", "0", "uniform:5", "uniform:9:3", "quantiles:0.5=3,1=4",
                           "quantiles:0=10,1=5", "quantiles:0=1,0.5", "normal:3:4"}) {
    EXPECT_FALSE(TokenDistribution::Parse(spec, TextKind::kQuery).ok()) << spec;
  }
}

TEST(TokenDistribution, SameSeedSameSamples) {
  TokenDistribution d = TokenDistribution::SciFact(TextKind::kQuery);
  std::mt19937_64 a(5), b(5);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(d.Sample(a), d.Sample(b));
}

}  // namespace
}  // namespace tide::loadgen
