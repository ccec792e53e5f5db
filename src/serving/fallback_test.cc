#include "serving/fallback.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "serving/scoring.h"

namespace tide::serving {
namespace {

// A classifier's default result has the shape of a real one: every row the configured logits.
TEST(DefaultResultTest, EveryRowIsTheConfiguredLogits) {
  const std::vector<float> row = {2.0f, -1.0f, 0.5f};
  const InferenceResult r = DefaultResult(row, 4);
  EXPECT_EQ(r.rows, 4);
  EXPECT_EQ(r.num_labels, 3);
  ASSERT_EQ(r.logits.size(), 12u);
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t l = 0; l < 3; ++l) EXPECT_EQ(r.at(i, l), row[l]) << i << "," << l;
  }
  EXPECT_EQ(r.real_tokens, 0u);
  EXPECT_EQ(DefaultResult(row, 0).logits.size(), 0u);
}

// On the rerank endpoints the default result scores like model output: the last label through the
// model's activation, or the raw logit.
TEST(DefaultResultTest, ScoresThroughTheModelsActivation) {
  const InferenceResult r = DefaultResult(std::vector<float>{1.0f, 3.0f}, 2);
  const double softmax = std::exp(3.0) / (std::exp(1.0) + std::exp(3.0));
  EXPECT_NEAR(RerankScore(r, 1, config::ScoreActivation::kSoftmax, false), softmax, 1e-6);
  EXPECT_NEAR(RerankScore(r, 0, config::ScoreActivation::kSigmoid, false), 1.0 / (1.0 + std::exp(-3.0)), 1e-6);
  EXPECT_EQ(RerankScore(r, 0, config::ScoreActivation::kSigmoid, true), 3.0f);
}

}  // namespace
}  // namespace tide::serving
