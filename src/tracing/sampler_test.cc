#include "tracing/sampler.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace tide::tracing {
namespace {

// A trace id whose last 7 bytes (the randomness the ratio sampler reads) are `r`; the first 9 bytes
// are set to junk, which must not matter.
TraceId WithRandomness(uint64_t r) {
  TraceId id{};
  for (size_t i = 0; i < 9; ++i) id[i] = 0xA5;
  for (size_t i = 15; i >= 9; --i) {
    id[i] = static_cast<uint8_t>(r & 0xFF);
    r >>= 8;
  }
  return id;
}

constexpr uint64_t kMax56 = (uint64_t{1} << 56) - 1;

SpanContext Parent(bool sampled, bool remote) {
  SpanContext parent;
  parent.trace_id = WithRandomness(1);
  parent.span_id = SpanId{1, 2, 3, 4, 5, 6, 7, 8};
  parent.trace_flags = sampled ? kTraceFlagSampled : 0;
  parent.remote = remote;
  return parent;
}

TEST(SamplerTest, AlwaysOnAndOff) {
  const TraceId id = WithRandomness(0);
  EXPECT_EQ(MakeAlwaysOnSampler()->ShouldSample(nullptr, id), SamplingDecision::kRecordAndSample);
  EXPECT_EQ(MakeAlwaysOffSampler()->ShouldSample(nullptr, id), SamplingDecision::kDrop);
}

TEST(SamplerTest, RatioZeroSamplesNothingAndOneEverything) {
  const auto none = MakeTraceIdRatioSampler(0.0);
  const auto all = MakeTraceIdRatioSampler(1.0);
  for (uint64_t r : {uint64_t{0}, uint64_t{1}, kMax56 / 2, kMax56 - 1, kMax56}) {
    EXPECT_EQ(none->ShouldSample(nullptr, WithRandomness(r)), SamplingDecision::kDrop) << r;
    EXPECT_EQ(all->ShouldSample(nullptr, WithRandomness(r)), SamplingDecision::kRecordAndSample) << r;
  }
}

TEST(SamplerTest, RatioBoundaryIsTheRejectionThreshold) {
  // ratio 0.5: T = 2^55; sampled iff R >= T.
  const auto half = MakeTraceIdRatioSampler(0.5);
  const uint64_t threshold = uint64_t{1} << 55;
  EXPECT_EQ(half->ShouldSample(nullptr, WithRandomness(threshold - 1)), SamplingDecision::kDrop);
  EXPECT_EQ(half->ShouldSample(nullptr, WithRandomness(threshold)), SamplingDecision::kRecordAndSample);
  // ratio 0.25: T = 3 * 2^54.
  const auto quarter = MakeTraceIdRatioSampler(0.25);
  const uint64_t t25 = 3 * (uint64_t{1} << 54);
  EXPECT_EQ(quarter->ShouldSample(nullptr, WithRandomness(t25 - 1)), SamplingDecision::kDrop);
  EXPECT_EQ(quarter->ShouldSample(nullptr, WithRandomness(t25)), SamplingDecision::kRecordAndSample);
  // The first 9 bytes do not count.
  TraceId id = WithRandomness(threshold - 1);
  id[0] = 0xFF;
  id[8] = 0xFF;
  EXPECT_EQ(half->ShouldSample(nullptr, id), SamplingDecision::kDrop);
}

TEST(SamplerTest, RatioIsMonotoneAndRoughlyProportional) {
  const auto tenth = MakeTraceIdRatioSampler(0.1);
  const auto half = MakeTraceIdRatioSampler(0.5);
  int sampled_tenth = 0;
  constexpr int kIds = 20000;
  for (int i = 0; i < kIds; ++i) {
    const TraceId id = IdGenerator::NewTraceId();
    const bool t = tenth->ShouldSample(nullptr, id) == SamplingDecision::kRecordAndSample;
    const bool h = half->ShouldSample(nullptr, id) == SamplingDecision::kRecordAndSample;
    if (t) {
      EXPECT_TRUE(h) << "sampled at 0.1 but not at 0.5";
    }
    sampled_tenth += t;
  }
  // 2000 expected; the bound is ~9 standard deviations, so this fails only for a wrong algorithm.
  EXPECT_GT(sampled_tenth, 1600);
  EXPECT_LT(sampled_tenth, 2400);
}

TEST(SamplerTest, ParentBasedFollowsAValidParent) {
  const auto sampler = MakeParentBasedSampler(MakeAlwaysOffSampler());
  const TraceId id = WithRandomness(7);
  for (bool remote : {true, false}) {
    const SpanContext sampled = Parent(true, remote);
    const SpanContext unsampled = Parent(false, remote);
    EXPECT_EQ(sampler->ShouldSample(&sampled, id), SamplingDecision::kRecordAndSample);
    EXPECT_EQ(sampler->ShouldSample(&unsampled, id), SamplingDecision::kDrop);
  }
  // No parent, or an invalid one: the root sampler decides.
  EXPECT_EQ(sampler->ShouldSample(nullptr, id), SamplingDecision::kDrop);
  const SpanContext invalid;
  EXPECT_EQ(MakeParentBasedSampler(MakeAlwaysOnSampler())->ShouldSample(&invalid, id),
            SamplingDecision::kRecordAndSample);
}

TEST(SamplerTest, ParentBasedRatioUsesTheRatioOnlyForRoots) {
  const auto sampler = MakeParentBasedSampler(MakeTraceIdRatioSampler(0.0));
  const SpanContext sampled = Parent(true, true);
  EXPECT_EQ(sampler->ShouldSample(&sampled, WithRandomness(0)), SamplingDecision::kRecordAndSample);
  EXPECT_EQ(sampler->ShouldSample(nullptr, WithRandomness(kMax56)), SamplingDecision::kDrop);
}

TEST(SamplerTest, MakeSamplerByName) {
  const TraceId low = WithRandomness(0);
  const TraceId high = WithRandomness(kMax56);
  auto s = MakeSampler("always_on", std::nullopt);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->Description(), "AlwaysOnSampler");
  s = MakeSampler("parentbased_always_off", std::nullopt);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->Description(), "ParentBased{root=AlwaysOffSampler}");
  s = MakeSampler("traceidratio", "0.5");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->ShouldSample(nullptr, low), SamplingDecision::kDrop);
  EXPECT_EQ((*s)->ShouldSample(nullptr, high), SamplingDecision::kRecordAndSample);
  s = MakeSampler("parentbased_traceidratio", std::nullopt);  // ratio 1 by default
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->ShouldSample(nullptr, low), SamplingDecision::kRecordAndSample);
  s = MakeSampler("always_off", "junk");  // ignored for samplers without an argument
  EXPECT_TRUE(s.ok());
}

TEST(SamplerTest, MakeSamplerRefusesBadNamesAndArguments) {
  auto s = MakeSampler("sometimes", std::nullopt);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("unknown sampler \"sometimes\""), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("parentbased_traceidratio"), std::string::npos);
  for (const char* arg : {"1.5", "-0.1", "half", "0.5x", "nan"}) {
    s = MakeSampler("traceidratio", arg);
    ASSERT_FALSE(s.ok()) << arg;
    EXPECT_NE(s.status().message().find("from 0 to 1"), std::string::npos) << s.status();
  }
}

}  // namespace
}  // namespace tide::tracing
