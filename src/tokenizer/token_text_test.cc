#include "tokenizer/token_text.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tokenizer/testing/small_bert_tokenizer.h"

namespace tide::tokenizer {
namespace {

using ::testing::ElementsAre;

TEST(PieceTextTest, TheThreeConventions) {
  EXPECT_EQ(PieceText("##fe"), "fe");
  EXPECT_EQ(PieceText("\xE2\x96\x81the"), " the");
  EXPECT_EQ(PieceText("\xC4\xA0the"), " the");  // Ġthe
  EXPECT_EQ(PieceText("caf"), "caf");
}

TEST(DecodeTest, WordPieceJoinsContinuationsAndSkipsSpecialTokens) {
  auto tok = testing::SmallBertTokenizer({"the", "caf", "##e", "is", "open", "."});
  ASSERT_NE(tok, nullptr);
  Encoding e;
  ASSERT_TRUE(tok->Encode("The cafe is open.", std::nullopt, {}, &e).ok());
  EXPECT_EQ(Decode(*tok, e.ids, /*skip_special_tokens=*/true), "the cafe is open.");
  EXPECT_EQ(Decode(*tok, e.ids, /*skip_special_tokens=*/false), "[CLS] the cafe is open. [SEP]");
  const std::vector<int64_t> out_of_vocabulary = {4, 999999};
  EXPECT_EQ(Decode(*tok, out_of_vocabulary, true), "the");
}

TEST(AlignTokensTest, OffsetsAreTheInputsOwnBytes) {
  const std::vector<std::string> pieces = {"[CLS]", "the", "caf", "##e", "is", "[SEP]"};
  const std::vector<bool> special = {true, false, false, false, false, true};
  const std::string text = "The  Cafe is";
  const auto spans = AlignTokens(text, pieces, special);
  ASSERT_EQ(spans.size(), 6u);
  EXPECT_FALSE(spans[0].has_value());
  EXPECT_EQ(spans[1], std::make_pair(size_t{0}, size_t{3}));
  EXPECT_EQ(text.substr(spans[2]->first, spans[2]->second - spans[2]->first), "Caf");
  EXPECT_EQ(text.substr(spans[3]->first, spans[3]->second - spans[3]->first), "e");
  EXPECT_EQ(spans[4], std::make_pair(size_t{10}, size_t{12}));
  EXPECT_FALSE(spans[5].has_value());
}

// A decoder's prompt holds its chat template's added tokens: each takes its place in the text, so
// the words after it are found after it (byte-level pieces, "Ċ" a newline without offsets).
TEST(AlignTokensTest, SpecialTokensTheTextSpellsTakeTheirPlace) {
  const std::string text = "<|im_start|>system\nJudge it<|im_end|>\n<|im_start|>user";
  const std::vector<std::string> pieces = {"<|im_start|>", "system", "\xC4\x8A", "Judge", "\xC4\xA0it",
                                           "<|im_end|>",   "\xC4\x8A", "<|im_start|>", "user"};
  const std::vector<bool> special = {true, false, false, false, false, true, false, true, false};
  const auto spans = AlignTokens(text, pieces, special);
  auto at = [&](size_t i) {
    return spans[i].has_value() ? text.substr(spans[i]->first, spans[i]->second - spans[i]->first) : "<none>";
  };
  EXPECT_EQ(at(0), "<|im_start|>");
  EXPECT_EQ(at(1), "system");
  EXPECT_EQ(at(3), "Judge");
  EXPECT_EQ(at(4), "it");
  EXPECT_EQ(at(5), "<|im_end|>");
  EXPECT_EQ(at(7), "<|im_start|>");
  EXPECT_EQ(spans[7]->first, text.rfind("<|im_start|>"));
  EXPECT_EQ(at(8), "user");
}

// After a piece the text spells otherwise, a spelled special token ends its gap; an added one
// ([SEP] the tokenizer put at the end) stays without offsets.
TEST(AlignTokensTest, ASpelledSpecialTokenEndsTheGapOfAnUnalignedPiece) {
  const std::string text = "café<|im_end|>x";
  const std::vector<std::string> pieces = {"cafe", "<|im_end|>", "x", "[SEP]"};
  const std::vector<bool> special = {false, true, false, true};
  const auto spans = AlignTokens(text, pieces, special);
  ASSERT_TRUE(spans[0].has_value() && spans[1].has_value() && spans[2].has_value());
  EXPECT_EQ(text.substr(spans[0]->first, spans[0]->second - spans[0]->first), "café");
  EXPECT_EQ(text.substr(spans[1]->first, spans[1]->second - spans[1]->first), "<|im_end|>");
  EXPECT_EQ(text.substr(spans[2]->first, spans[2]->second - spans[2]->first), "x");
  EXPECT_FALSE(spans[3].has_value());
}

TEST(AlignTokensTest, OnePieceTheTextSpellsOtherwiseGetsTheGap) {
  // BERT uncased strips accents: the piece "cafe" is spelled "café" in the input.
  const std::string text = "café au lait";
  const std::vector<std::string> pieces = {"cafe", "au", "lait"};
  const std::vector<bool> special(3, false);
  const auto spans = AlignTokens(text, pieces, special);
  ASSERT_TRUE(spans[0].has_value());
  EXPECT_EQ(text.substr(spans[0]->first, spans[0]->second - spans[0]->first), "café");
  EXPECT_EQ(text.substr(spans[2]->first, spans[2]->second - spans[2]->first), "lait");
}

TEST(AlignTokensTest, ByteLevelAndMetaspacePieces) {
  const std::string text = "Hello world";
  const std::vector<bool> special(2, false);
  EXPECT_THAT(AlignTokens(text, std::vector<std::string>{"Hello", "\xC4\xA0world"}, special),
              ElementsAre(std::make_pair(size_t{0}, size_t{5}), std::make_pair(size_t{6}, size_t{11})));
  EXPECT_THAT(AlignTokens(text, std::vector<std::string>{"\xE2\x96\x81Hello", "\xE2\x96\x81world"}, special),
              ElementsAre(std::make_pair(size_t{0}, size_t{5}), std::make_pair(size_t{6}, size_t{11})));
}

}  // namespace
}  // namespace tide::tokenizer
