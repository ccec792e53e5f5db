#include "guard/bm25.h"

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tide::guard {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;

std::unique_ptr<Bm25Scorer> MakeScorer(const Bm25Options& options = {}) {
  auto scorer = Bm25Scorer::Create(options);
  EXPECT_TRUE(scorer.ok()) << scorer.status();
  return *std::move(scorer);
}

// Worked example (k1 = 1.2, b = 0.75), N = 3, lengths 3, 5, 2, avgdl = 10/3:
//   idf(1) = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln(1.6)    = 0.4700036
//   idf(3) = ln(1 + (3 - 1 + 0.5) / (1 + 0.5)) = ln(8/3)    = 0.9808293
//   d0: K = 1.2 * (0.25 + 0.75 * 3 / (10/3)) = 1.11
//       0.4700036 * 1 * 2.2 / (1 + 1.11) + 0.9808293 * 1 * 2.2 / (1 + 1.11) = 1.5127167
//   d1: K = 1.2 * (0.25 + 0.75 * 5 / (10/3)) = 1.65
//       0.4700036 * 2 * 2.2 / (2 + 1.65)                                    = 0.5665797
//   d2: no query token                                                      = 0
const std::vector<std::vector<int64_t>> kDocuments = {{1, 2, 3}, {1, 1, 4, 5, 6}, {7, 8}};

TEST(Bm25Test, MatchesHandComputedScores) {
  auto scorer = MakeScorer();
  std::vector<float> scores;
  const std::vector<int64_t> query = {1, 3};
  scorer->Score(query, kDocuments, &scores);
  EXPECT_THAT(scores, ElementsAre(FloatNear(1.5127167f, 1e-5f), FloatNear(0.5665797f, 1e-5f), 0.0f));
}

TEST(Bm25Test, SpanOverloadAgreesWithVectorOverload) {
  auto scorer = MakeScorer();
  std::vector<std::span<const int64_t>> spans(kDocuments.begin(), kDocuments.end());
  std::vector<float> from_spans;
  std::vector<float> from_vectors;
  const std::vector<int64_t> query = {3, 1};
  scorer->Score(query, std::span<const std::span<const int64_t>>(spans), &from_spans);
  scorer->Score(query, kDocuments, &from_vectors);
  EXPECT_EQ(from_spans, from_vectors);
  EXPECT_THAT(from_spans, ElementsAre(FloatNear(1.5127167f, 1e-5f), FloatNear(0.5665797f, 1e-5f), 0.0f));
}

TEST(Bm25Test, RepeatedQueryTokenCountsOnce) {
  auto scorer = MakeScorer();
  std::vector<float> once;
  std::vector<float> repeated;
  scorer->Score(std::vector<int64_t>{1, 3}, kDocuments, &once);
  scorer->Score(std::vector<int64_t>{1, 3, 1, 1}, kDocuments, &repeated);
  EXPECT_EQ(once, repeated);
}

TEST(Bm25Test, PresenceOnlyWithZeroK1) {
  // k1 = 0: each matching term contributes exactly its idf.
  auto scorer = MakeScorer({.k1 = 0.0, .b = 0.75});
  std::vector<float> scores;
  scorer->Score(std::vector<int64_t>{1, 3}, kDocuments, &scores);
  EXPECT_THAT(scores, ElementsAre(FloatNear(0.4700036f + 0.9808293f, 1e-5f),
                                  FloatNear(0.4700036f, 1e-5f), 0.0f));
}

TEST(Bm25Test, NoLengthNormalisationWithZeroB) {
  auto scorer = MakeScorer({.k1 = 1.2, .b = 0.0});
  std::vector<float> scores;
  scorer->Score(std::vector<int64_t>{5}, {{5}, {5, 9, 9, 9, 9, 9}, {9}}, &scores);
  ASSERT_EQ(scores.size(), 3u);
  EXPECT_FLOAT_EQ(scores[0], scores[1]);
  EXPECT_GT(scores[0], 0.0f);
  EXPECT_EQ(scores[2], 0.0f);
  // With the default b the longer document scores lower.
  auto normalised = MakeScorer();
  normalised->Score(std::vector<int64_t>{5}, {{5}, {5, 9, 9, 9, 9, 9}, {9}}, &scores);
  EXPECT_GT(scores[0], scores[1]);
}

TEST(Bm25Test, TermInEveryDocumentStillScoresPositive) {
  // idf = ln(1 + (2 - 2 + 0.5) / (2 + 0.5)) = ln(1.2); equal lengths so K = k1:
  // score = ln(1.2) * 2.2 / 2.2 = 0.1823216.
  auto scorer = MakeScorer();
  std::vector<float> scores;
  scorer->Score(std::vector<int64_t>{4}, {{4, 7}, {8, 4}}, &scores);
  EXPECT_THAT(scores, ElementsAre(FloatNear(0.1823216f, 1e-6f), FloatNear(0.1823216f, 1e-6f)));
}

TEST(Bm25Test, MoreOccurrencesScoreHigherButSaturate) {
  auto scorer = MakeScorer({.k1 = 1.2, .b = 0.0});
  std::vector<float> scores;
  scorer->Score(std::vector<int64_t>{2}, {{2}, {2, 2}, {2, 2, 2, 2, 2, 2, 2, 2}, {3}}, &scores);
  ASSERT_EQ(scores.size(), 4u);
  EXPECT_LT(scores[0], scores[1]);
  EXPECT_LT(scores[1], scores[2]);
  // tf saturates at (k1 + 1) * idf.
  const float idf = static_cast<float>(std::log(1.0 + (4 - 3 + 0.5) / (3 + 0.5)));
  EXPECT_LT(scores[2], 2.2f * idf);
}

TEST(Bm25Test, EdgeCases) {
  auto scorer = MakeScorer();
  std::vector<float> scores = {42.0f};
  scorer->Score(std::vector<int64_t>{1}, std::vector<std::vector<int64_t>>{}, &scores);
  EXPECT_TRUE(scores.empty());
  scorer->Score(std::vector<int64_t>{}, kDocuments, &scores);
  EXPECT_THAT(scores, ElementsAre(0.0f, 0.0f, 0.0f));
  scorer->Score(std::vector<int64_t>{1}, {{}, {}}, &scores);
  EXPECT_THAT(scores, ElementsAre(0.0f, 0.0f));
  scorer->Score(std::vector<int64_t>{1}, {{}, {1}}, &scores);
  EXPECT_EQ(scores[0], 0.0f);
  EXPECT_GT(scores[1], 0.0f);
}

TEST(Bm25Test, ScratchReuseDoesNotLeakBetweenCalls) {
  auto reused = MakeScorer();
  std::vector<float> scores;
  reused->Score(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {{1, 2}, {3, 4, 5, 6, 1}, {6}, {2, 2}}, &scores);
  reused->Score(std::vector<int64_t>{1, 3}, kDocuments, &scores);
  std::vector<float> fresh;
  MakeScorer()->Score(std::vector<int64_t>{1, 3}, kDocuments, &fresh);
  EXPECT_EQ(scores, fresh);
}

TEST(Bm25Test, RejectsInvalidOptions) {
  EXPECT_EQ(Bm25Scorer::Create({.k1 = -1.0, .b = 0.75}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Bm25Scorer::Create({.k1 = 1.2, .b = 1.5}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Bm25Scorer::Create({.k1 = std::nan(""), .b = 0.5}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Bm25Scorer::Create({.k1 = 0.0, .b = 1.0}).ok());
}

}  // namespace
}  // namespace tide::guard
