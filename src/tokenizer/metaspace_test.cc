#include "tokenizer/metaspace.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tide::tokenizer {
namespace {

using ::testing::ElementsAre;

const char* const kBar = "\xE2\x96\x81";  // U+2581

Pieces PreTok(const nlohmann::json& json, Pieces pieces) {
  auto p = MakeMetaspacePreTokenizer(json);
  EXPECT_TRUE(p.ok()) << p.status();
  Pieces scratch;
  (*p)->PreTokenize(&pieces, &scratch);
  return pieces;
}

TEST(Metaspace, OldFormAddPrefixSpace) {
  nlohmann::json j = {{"type", "Metaspace"}, {"replacement", kBar}, {"add_prefix_space", true}};
  EXPECT_THAT(PreTok(j, {"Hello  my friend"}),
              ElementsAre("\xE2\x96\x81Hello", "\xE2\x96\x81", "\xE2\x96\x81my",
                          "\xE2\x96\x81" "friend"));
  // A leading space becomes the replacement: no second one is prepended.
  EXPECT_THAT(PreTok(j, {" hi"}), ElementsAre("\xE2\x96\x81hi"));
  EXPECT_THAT(PreTok(j, {"a", "b"}), ElementsAre("\xE2\x96\x81" "a", "\xE2\x96\x81" "b"));
  EXPECT_THAT(PreTok(j, {""}), ElementsAre());
  j["add_prefix_space"] = false;
  EXPECT_THAT(PreTok(j, {"Hello world "}),
              ElementsAre("Hello", "\xE2\x96\x81world", "\xE2\x96\x81"));
}

// Combinations checked against HF tokenizers 0.23.2: a declared scheme wins, and
// add_prefix_space=false contradicting it fails to load.
TEST(Metaspace, PrependSchemeAndAddPrefixSpace) {
  nlohmann::json j = {{"type", "Metaspace"},
                      {"replacement", kBar},
                      {"add_prefix_space", true},
                      {"prepend_scheme", "never"}};
  EXPECT_THAT(PreTok(j, {"x"}), ElementsAre("x"));
  j["add_prefix_space"] = false;
  EXPECT_THAT(PreTok(j, {"x"}), ElementsAre("x"));
  j["prepend_scheme"] = "first";
  EXPECT_EQ(MakeMetaspacePreTokenizer(j).status().code(), absl::StatusCode::kInvalidArgument);
  j["add_prefix_space"] = true;
  EXPECT_THAT(PreTok(j, {"x"}), ElementsAre("\xE2\x96\x81x"));
}

TEST(Metaspace, NewFormSchemes) {
  nlohmann::json j = {{"type", "Metaspace"}, {"replacement", kBar}, {"prepend_scheme", "never"},
                      {"split", true}};
  EXPECT_THAT(PreTok(j, {"a b"}), ElementsAre("a", "\xE2\x96\x81" "b"));
  j["prepend_scheme"] = "first";
  EXPECT_THAT(PreTok(j, {"a b", "c"}), ElementsAre("\xE2\x96\x81" "a", "\xE2\x96\x81" "b", "c"));
  auto p = MakeMetaspacePreTokenizer(j);
  ASSERT_TRUE(p.ok());
  Pieces pieces = {"a", "c"}, scratch;
  static_cast<const MetaspacePreTokenizer&>(**p).PreTokenizeSections(&pieces, &scratch, false);
  EXPECT_THAT(pieces, ElementsAre("a", "c"));
  j["prepend_scheme"] = "always";
  j["split"] = false;
  EXPECT_THAT(PreTok(j, {"a b  c"}),
              ElementsAre("\xE2\x96\x81" "a\xE2\x96\x81" "b\xE2\x96\x81\xE2\x96\x81" "c"));
  // Defaults when neither field is present: always, split.
  EXPECT_THAT(PreTok({{"type", "Metaspace"}, {"replacement", "_"}}, {"a b"}),
              ElementsAre("_a", "_b"));
}

TEST(Metaspace, BadConfig) {
  EXPECT_FALSE(MakeMetaspacePreTokenizer({{"type", "Metaspace"}}).ok());
  EXPECT_FALSE(MakeMetaspacePreTokenizer({{"type", "Metaspace"}, {"replacement", "ab"}}).ok());
  EXPECT_FALSE(MakeMetaspacePreTokenizer(
                   {{"type", "Metaspace"}, {"replacement", "_"}, {"prepend_scheme", "sometimes"}})
                   .ok());
}

TEST(Metaspace, LongInput) {
  std::string text(10000, 'x');
  text[5000] = ' ';
  EXPECT_THAT(PreTok({{"type", "Metaspace"}, {"replacement", "_"}}, {text}),
              ElementsAre("_" + std::string(5000, 'x'), "_" + std::string(4999, 'x')));
}

}  // namespace
}  // namespace tide::tokenizer
