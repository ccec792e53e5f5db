#include "tokenizer/pre_tokenizers.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tide::tokenizer {
namespace {

using json = nlohmann::json;

// Runs both paths (Split spans and PreTokenize pieces) and checks they agree.
std::vector<std::string> Apply(const json& config, const std::string& text) {
  auto pre = MakePreTokenizer(config);
  EXPECT_TRUE(pre.ok()) << pre.status();
  if (!pre.ok()) return {};
  Pieces pieces{text}, scratch;
  (*pre)->PreTokenize(&pieces, &scratch);
  std::vector<std::pair<uint32_t, uint32_t>> spans;
  if ((*pre)->Split(text, &spans)) {
    std::vector<std::string> from_spans;
    for (auto [b, e] : spans) from_spans.push_back(text.substr(b, e - b));
    EXPECT_EQ(from_spans, pieces) << "Split and PreTokenize disagree";
  }
  return pieces;
}

using V = std::vector<std::string>;

TEST(BertPreTokenizerTest, SplitsWhitespaceAndIsolatesPunctuation) {
  EXPECT_EQ(Apply({{"type", "BertPreTokenizer"}}, "Hello, world!! a$b"),
            (V{"Hello", ",", "world", "!", "!", "a", "$", "b"}));
  EXPECT_EQ(Apply({{"type", "BertPreTokenizer"}}, "\xc2\xa0x\xe3\x80\x80y\xe3\x80\x82"),  // NBSP, U+3000, 。
            (V{"x", "y", "\xe3\x80\x82"}));
  EXPECT_EQ(Apply({{"type", "BertPreTokenizer"}}, "   "), V{});
}

TEST(WhitespacePreTokenizerTest, WordRunsAndSymbolRuns) {
  EXPECT_EQ(Apply({{"type", "Whitespace"}}, "Hey man!! how's it_going?"),
            (V{"Hey", "man", "!!", "how", "'", "s", "it_going", "?"}));
  EXPECT_EQ(Apply({{"type", "Whitespace"}}, "a\xc2\xb2" "b"), (V{"a", "\xc2\xb2", "b"}));  // ² is not \w
}

TEST(WhitespaceSplitTest, OnlyWhitespace) {
  EXPECT_EQ(Apply({{"type", "WhitespaceSplit"}}, " a-b  c\td "), (V{"a-b", "c", "d"}));
}

TEST(PunctuationTest, Behaviours) {
  const std::string t = "x!!?y. ok";
  EXPECT_EQ(Apply({{"type", "Punctuation"}}, t), (V{"x", "!", "!", "?", "y", ".", " ok"}));
  EXPECT_EQ(Apply({{"type", "Punctuation"}, {"behavior", "Removed"}}, t), (V{"x", "y", " ok"}));
  EXPECT_EQ(Apply({{"type", "Punctuation"}, {"behavior", "MergedWithPrevious"}}, t),
            (V{"x!", "!", "?", "y.", " ok"}));
  EXPECT_EQ(Apply({{"type", "Punctuation"}, {"behavior", "MergedWithNext"}}, t),
            (V{"x", "!", "!", "?y", ". ok"}));
  EXPECT_EQ(Apply({{"type", "Punctuation"}, {"behavior", "Contiguous"}}, t),
            (V{"x", "!!?", "y", ".", " ok"}));
  EXPECT_FALSE(MakePreTokenizer({{"type", "Punctuation"}, {"behavior", "Sideways"}}).ok());
}

TEST(DigitsTest, ContiguousOrIndividual) {
  EXPECT_EQ(Apply({{"type", "Digits"}, {"individual_digits", false}}, "ab123c4"),
            (V{"ab", "123", "c", "4"}));
  EXPECT_EQ(Apply({{"type", "Digits"}, {"individual_digits", true}}, "ab12"), (V{"ab", "1", "2"}));
  // char::is_numeric: Arabic-Indic digits count.
  EXPECT_EQ(Apply({{"type", "Digits"}, {"individual_digits", false}}, "a\xd9\xa3" "4"),
            (V{"a", "\xd9\xa3" "4"}));
}

TEST(SequencePreTokenizerTest, ChainsSplitters) {
  json seq = {{"type", "Sequence"},
              {"pretokenizers", {{{"type", "WhitespaceSplit"}}, {{"type", "Digits"}, {"individual_digits", true}}}}};
  EXPECT_EQ(Apply(seq, "ab12 c3"), (V{"ab", "1", "2", "c", "3"}));
}

TEST(PreTokenizerFactoryTest, UnknownTypeIsUnimplemented) {
  auto p = MakePreTokenizer({{"type", "CharDelimiterSplit"}, {"delimiter", "x"}});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(p.status().message().find("CharDelimiterSplit"), std::string::npos);
}

}  // namespace
}  // namespace tide::tokenizer
