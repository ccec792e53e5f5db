// The fallback path as the serving layer runs it: the model's own tokenizer (no special tokens)
// feeding Bm25Scorer. Needs the real bert-base-uncased tokenizer from ../shared/assets.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "guard/bm25.h"
#include "shared_assets.h"
#include "tokenizer/tokenizer.h"

namespace tide::guard {
namespace {

class Bm25TokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kBertBaseUncasedTokenizer);
    auto tokenizer = tokenizer::Tokenizer::FromFile(
        tide::testing::SharedAssetPath(tide::testing::kBertBaseUncasedTokenizer).string());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
  }

  std::vector<int64_t> Ids(std::string_view text) {
    std::vector<int64_t> ids;
    EXPECT_TRUE(tokenizer_->Tokenize(text, &ids).ok());
    return ids;
  }

  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
};

TEST_F(Bm25TokenizerTest, RanksTheLexicallyMatchingDocumentFirst) {
  const std::vector<int64_t> query = Ids("what is panda?");
  // Tokenize leaves out [CLS]/[SEP]: "what is panda?" is what, is, panda, ?.
  EXPECT_EQ(query, (std::vector<int64_t>{2054, 2003, 25462, 1029}));
  const std::vector<std::vector<int64_t>> documents = {
      Ids("Paris is the capital of France."),
      Ids("The giant panda is a bear species endemic to China."),
      Ids("Stock markets fell sharply on Monday."),
      Ids("Pandas eat bamboo; a panda spends most of the day eating."),
  };
  auto scorer = *Bm25Scorer::Create();
  std::vector<float> scores;
  scorer->Score(query, documents, &scores);
  ASSERT_EQ(scores.size(), 4u);
  // Only documents 1 and 3 contain "panda"; "is" alone (document 0) is worth less; document 2
  // shares nothing with the query.
  EXPECT_GT(scores[1], scores[0]);
  EXPECT_GT(scores[3], scores[0]);
  EXPECT_GT(scores[0], 0.0f);
  EXPECT_EQ(scores[2], 0.0f);
}

}  // namespace
}  // namespace tide::guard
