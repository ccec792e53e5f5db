#include "loadgen/arrival_schedule.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace tide::loadgen {
namespace {

using std::chrono::nanoseconds;

TEST(ArrivalSchedule, ConstantArrivalsAreEvenlySpacedFromZero) {
  auto s = ArrivalSchedule::Create(100, Arrivals::kConstant, 1);
  ASSERT_TRUE(s.ok());
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(s->Next(), nanoseconds(int64_t{i} * 10'000'000)) << i;
}

TEST(ArrivalSchedule, ConstantSpacingDoesNotDriftAtOddRates) {
  auto s = ArrivalSchedule::Create(3, Arrivals::kConstant, 1);
  ASSERT_TRUE(s.ok());
  nanoseconds last{};
  for (int i = 0; i <= 30000; ++i) last = s->Next();
  EXPECT_EQ(last, nanoseconds(int64_t{10000} * 1'000'000'000));  // 30000 / 3 s exactly
}

TEST(ArrivalSchedule, PoissonGapsAreExponentialWithTheRequestedMean) {
  const double rate = 200;  // mean gap 5 ms
  auto s = ArrivalSchedule::Create(rate, Arrivals::kPoisson, 42);
  ASSERT_TRUE(s.ok());
  const int n = 50000;
  std::vector<double> gaps;
  double prev = 0;
  for (int i = 0; i < n; ++i) {
    const double t = s->Next().count() / 1e9;
    ASSERT_GT(t, prev);
    gaps.push_back(t - prev);
    prev = t;
  }
  double mean = 0;
  for (double g : gaps) mean += g;
  mean /= n;
  EXPECT_NEAR(mean, 1 / rate, 0.02 / rate);              // mean rate within 2%
  EXPECT_NEAR(n / prev, rate, 0.02 * rate);
  double var = 0;
  for (double g : gaps) var += (g - mean) * (g - mean);
  const double cv = std::sqrt(var / n) / mean;
  EXPECT_NEAR(cv, 1.0, 0.03);  // exponential: standard deviation equals the mean
  // Memorylessness at a few points: P(gap > k * mean) = e^-k.
  for (double k : {0.5, 1.0, 2.0}) {
    size_t above = 0;
    for (double g : gaps) above += g > k / rate;
    EXPECT_NEAR(static_cast<double>(above) / n, std::exp(-k), 0.01) << k;
  }
}

TEST(ArrivalSchedule, SeedFixesTheSchedule) {
  auto a = ArrivalSchedule::Create(50, Arrivals::kPoisson, 7);
  auto b = ArrivalSchedule::Create(50, Arrivals::kPoisson, 7);
  auto c = ArrivalSchedule::Create(50, Arrivals::kPoisson, 8);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    nanoseconds ta = a->Next();
    EXPECT_EQ(ta, b->Next());
    differs |= ta != c->Next();
  }
  EXPECT_TRUE(differs);
}

TEST(ArrivalSchedule, RejectsBadRates) {
  EXPECT_FALSE(ArrivalSchedule::Create(0, Arrivals::kConstant, 1).ok());
  EXPECT_FALSE(ArrivalSchedule::Create(-1, Arrivals::kPoisson, 1).ok());
  EXPECT_FALSE(ArrivalSchedule::Create(INFINITY, Arrivals::kPoisson, 1).ok());
  EXPECT_FALSE(ParseArrivals("bursty").ok());
  EXPECT_EQ(*ParseArrivals("poisson"), Arrivals::kPoisson);
}

}  // namespace
}  // namespace tide::loadgen
