#include "serving/warmup_shapes.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "serving/served_model.h"

namespace tide::serving {
namespace {

using ::testing::ElementsAre;

std::vector<std::pair<int64_t, int64_t>> Pairs(const std::vector<BatchShape>& shapes) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const BatchShape& s : shapes) out.emplace_back(s.batch, s.seq_len);
  return out;
}

batching::BatcherOptions Options(std::vector<size_t> buckets, size_t max_batch_size, size_t max_batch_tokens) {
  batching::BatcherOptions o;
  o.sequence_buckets = std::move(buckets);
  o.max_batch_size = max_batch_size;
  o.max_batch_tokens = max_batch_tokens;
  return o;
}

TEST(WarmupShapesTest, EveryBucketAtBatchOneAndAtTheMostRowsItsBudgetAllows) {
  const auto shapes = WarmupShapes(config::ModelConfig(), Options({32, 128, 512}, 16, 2048));
  // 2048 / 32 = 64 rows, capped at max_batch_size 16; 2048 / 128 = 16; 2048 / 512 = 4.
  EXPECT_THAT(Pairs(shapes), ElementsAre(std::pair{1, 32}, std::pair{16, 32}, std::pair{1, 128}, std::pair{16, 128},
                                         std::pair{1, 512}, std::pair{4, 512}));
}

TEST(WarmupShapesTest, ABucketLongerThanTheBudgetRunsOnceAlone) {
  const auto shapes = WarmupShapes(config::ModelConfig(), Options({256, 512}, 8, 300));
  EXPECT_THAT(Pairs(shapes), ElementsAre(std::pair{1, 256}, std::pair{1, 512}));
}

TEST(WarmupShapesTest, AllowedBatchSizesGiveEveryBucketTimesSizeWithinTheBudget) {
  batching::BatcherOptions o = Options({64, 256}, 8, 1024);
  o.allowed_batch_sizes = {2, 4, 8};
  const auto shapes = WarmupShapes(config::ModelConfig(), o);
  // 64 x {2,4,8} all fit 1024; 256 x 2 = 512 and 256 x 4 = 1024 fit, 256 x 8 does not.
  EXPECT_THAT(Pairs(shapes), ElementsAre(std::pair{2, 64}, std::pair{4, 64}, std::pair{8, 64}, std::pair{2, 256},
                                         std::pair{4, 256}));
}

TEST(WarmupShapesTest, TheSmallestAllowedSizeRunsEvenWhenOverBudget) {
  batching::BatcherOptions o = Options({512}, 8, 512);
  o.allowed_batch_sizes = {2, 8};
  EXPECT_THAT(Pairs(WarmupShapes(config::ModelConfig(), o)), ElementsAre(std::pair{2, 512}));
}

TEST(WarmupShapesTest, PastFiveHundredTwelveOnlyTheLongestBucketWarms) {
  const auto shapes = WarmupShapes(config::ModelConfig(), Options({256, 512, 576, 1024, 8192}, 8, 8192));
  EXPECT_THAT(Pairs(shapes), ElementsAre(std::pair{1, 256}, std::pair{8, 256}, std::pair{1, 512}, std::pair{8, 512},
                                         std::pair{1, 8192}));
}

TEST(WarmupShapesTest, TheBatchSaturationBoundsTheRowsLikeTheBudget) {
  batching::BatcherOptions o = Options({128, 512}, 16, 8192);
  o.saturation_tokens = 300;  // a decoder's: one row of 512 already past it
  EXPECT_THAT(Pairs(WarmupShapes(config::ModelConfig(), o)),
              ElementsAre(std::pair{1, 128}, std::pair{2, 128}, std::pair{1, 512}));
}

TEST(WarmupShapesTest, ConfigModelWarmupReplacesTheDefaultShapes) {
  config::ModelConfig c;
  ModelWarmup* w = c.add_model_warmup();
  w->set_batch_size(3);
  w->set_count(2);
  ModelWarmup::Input& in = (*w->mutable_inputs())["input_ids"];
  in.add_dims(96);
  EXPECT_THAT(Pairs(WarmupShapes(c, Options({32, 512}, 8, 4096))), ElementsAre(std::pair{3, 96}, std::pair{3, 96}));
}

}  // namespace
}  // namespace tide::serving

namespace tide::serving {
namespace {

TEST(DefaultSequenceBucketsTest, EncoderLengthsKeepTheFixedList) {
  EXPECT_EQ(DefaultSequenceBuckets(512),
            (std::vector<size_t>{16, 32, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512}));
  EXPECT_EQ(DefaultSequenceBuckets(128), (std::vector<size_t>{16, 32, 64, 96, 128}));
  EXPECT_EQ(DefaultSequenceBuckets(100), (std::vector<size_t>{16, 32, 64, 96, 100}));
}

TEST(DefaultSequenceBucketsTest, LongContextModelsGetEightBucketsPerDoubling) {
  const std::vector<size_t> b = DefaultSequenceBuckets(8192);
  EXPECT_EQ(b.back(), 8192u);
  // Every row is padded by at most 1/8 of its length past 512 (a 530-token pair to 576, not 8192).
  for (size_t i = 1; i < b.size(); ++i) {
    ASSERT_LT(b[i - 1], b[i]);
    if (b[i - 1] >= 512) EXPECT_LE(b[i] - b[i - 1], b[i - 1] / 8) << b[i];
  }
  EXPECT_NE(std::find(b.begin(), b.end(), 576u), b.end());
  EXPECT_NE(std::find(b.begin(), b.end(), 1152u), b.end());
  EXPECT_NE(std::find(b.begin(), b.end(), 4608u), b.end());
  EXPECT_EQ(b.size(), 13u + 7u + 8u * 3u + 1u);  // to 512; 576..960; 1024..7680 (x3 doublings); 8192
  const std::vector<size_t> odd = DefaultSequenceBuckets(600);
  EXPECT_EQ(std::vector<size_t>(odd.end() - 3, odd.end()), (std::vector<size_t>{512, 576, 600}));
}

TEST(DefaultBatchSaturationTest, FromTheModelsWeightFlopsPerToken) {
  EXPECT_EQ(DefaultBatchSaturationTokens(0), 0u) << "unknown: no cap";
  // MiniLM-L6 (6 x 1.77 M weights): 3202 tokens by its work, held at the 400-token ceiling.
  EXPECT_EQ(DefaultBatchSaturationTokens(2 * 6 * 1769472), kBatchSaturationMaxTokens);
  EXPECT_EQ(kBatchSaturationMaxTokens, 400u);
  EXPECT_EQ(DefaultBatchSaturationTokens(static_cast<uint64_t>(kBatchSaturationFlops / 399)), 399u)
      << "below the ceiling, the work rule";
  // bge-reranker-base (12 x 7.08 M): a SciFact-length pair (~326 tokens, bucket 384) runs alone.
  EXPECT_EQ(DefaultBatchSaturationTokens(2 * 12 * 7077888), 400u);
  // qwen3-reranker-0.6b (28 x 15.73 M): one SciFact-length row (~410 tokens) is already past it.
  EXPECT_EQ(DefaultBatchSaturationTokens(2ull * 28 * 15728640), 77u);
  EXPECT_EQ(DefaultBatchSaturationTokens(uint64_t{1} << 50), 16u) << "at least one bucket of 16";
}

}  // namespace
}  // namespace tide::serving
