#include "tokenizer/split.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tide::tokenizer {
namespace {

using ::testing::ElementsAre;

Pieces PreTok(const nlohmann::json& json, Pieces pieces) {
  auto p = MakeSplitPreTokenizer(json);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return {};
  Pieces scratch;
  (*p)->PreTokenize(&pieces, &scratch);
  return pieces;
}

nlohmann::json Dash(const char* behavior, bool invert = false) {
  return {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", invert}};
}

// The examples of HF's SplitDelimiterBehavior documentation.
TEST(Split, Behaviors) {
  const Pieces in = {"the-final--countdown"};
  EXPECT_THAT(PreTok(Dash("Removed"), in), ElementsAre("the", "final", "countdown"));
  EXPECT_THAT(PreTok(Dash("Isolated"), in), ElementsAre("the", "-", "final", "-", "-", "countdown"));
  EXPECT_THAT(PreTok(Dash("MergedWithPrevious"), in), ElementsAre("the-", "final-", "-", "countdown"));
  EXPECT_THAT(PreTok(Dash("MergedWithNext"), in), ElementsAre("the", "-final", "-", "-countdown"));
  EXPECT_THAT(PreTok(Dash("Contiguous"), in), ElementsAre("the", "-", "final", "--", "countdown"));
}

TEST(Split, Invert) {
  EXPECT_THAT(PreTok(Dash("Removed", true), {"the-final--countdown"}), ElementsAre("-", "-", "-"));
  EXPECT_THAT(PreTok(Dash("MergedWithPrevious", true), {"-a-"}), ElementsAre("-a", "-"));
}

TEST(Split, Regex) {
  nlohmann::json j = {{"type", "Split"},
                      {"pattern", {{"Regex", "\\s+"}}},
                      {"behavior", "Removed"},
                      {"invert", false}};
  EXPECT_THAT(PreTok(j, {"a  b\xE3\x80\x80" "c\t"}), ElementsAre("a", "b", "c"));  // U+3000 is \s
  j["pattern"] = {{"Regex", "\\p{L}+|\\p{N}{1,3}"}};
  j["behavior"] = "Isolated";
  EXPECT_THAT(PreTok(j, {"\xC3\xA9t\xC3\xA9 12345!"}),
              ElementsAre("\xC3\xA9t\xC3\xA9", " ", "123", "45", "!"));
  // Empty matches split nothing.
  j["pattern"] = {{"Regex", "x*"}};
  EXPECT_THAT(PreTok(j, {"abxxc"}), ElementsAre("a", "b", "xx", "c"));
  EXPECT_THAT(PreTok(j, {""}), ElementsAre());
}

TEST(Split, LiteralIsNotARegex) {
  nlohmann::json j = {{"type", "Split"}, {"pattern", {{"String", ".*"}}}, {"behavior", "Removed"}};
  EXPECT_THAT(PreTok(j, {"a.*b.c"}), ElementsAre("a", "b.c"));
}

TEST(Split, SpanFastPathAgreesWithPieces) {
  auto p = MakeSplitPreTokenizer(Dash("MergedWithNext"));
  ASSERT_TRUE(p.ok());
  std::vector<std::pair<uint32_t, uint32_t>> spans;
  ASSERT_TRUE((*p)->Split("the-final--countdown", &spans));
  EXPECT_THAT(spans, ElementsAre(std::pair<uint32_t, uint32_t>{0, 3}, std::pair<uint32_t, uint32_t>{3, 9},
                                 std::pair<uint32_t, uint32_t>{9, 10},
                                 std::pair<uint32_t, uint32_t>{10, 20}));
}

TEST(Split, BadConfig) {
  EXPECT_EQ(MakeSplitPreTokenizer({{"type", "Split"}, {"pattern", {{"Regex", "("}}}, {"behavior", "Removed"}})
                .status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(MakeSplitPreTokenizer({{"type", "Split"}, {"pattern", "-"}, {"behavior", "Removed"}}).ok());
  EXPECT_FALSE(MakeSplitPreTokenizer(
                   {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", "Sideways"}}).ok());
}

TEST(Split, InvalidUtf8GivesNoRegexMatch) {
  nlohmann::json j = {{"type", "Split"}, {"pattern", {{"Regex", "b"}}}, {"behavior", "Removed"}};
  EXPECT_THAT(PreTok(j, {"ab\xFF" "b"}), ElementsAre("ab\xFF" "b"));
}

}  // namespace
}  // namespace tide::tokenizer
