#include "tokenizer/normalizers.h"

#include <string>

#include "gtest/gtest.h"

namespace tide::tokenizer {
namespace {

using json = nlohmann::json;

std::string Apply(const json& config, std::string text) {
  auto n = MakeNormalizer(config);
  EXPECT_TRUE(n.ok()) << n.status();
  if (!n.ok()) return "<error>";
  (*n)->Normalize(&text);
  return text;
}

TEST(BertNormalizerTest, LowercasesStripsAccentsAndSpacesCjk) {
  json bert = {{"type", "BertNormalizer"}, {"lowercase", true}};
  EXPECT_EQ(Apply(bert, "Héllo WÖRLD"), "hello world");
  EXPECT_EQ(Apply(bert, "中文"), " 中  文 ");
  // Control characters (Cc, Cf) are dropped before whitespace is mapped: U+000B disappears.
  EXPECT_EQ(Apply(bert, "a\tb\x0b" "c\xe2\x80\x8b" "d"), "a bcd");
  // U+0130 lowercases to i + U+0307, whose mark is then stripped.
  EXPECT_EQ(Apply(bert, "\xc4\xb0stanbul"), "istanbul");
  // Only nonspacing marks are stripped: U+0903 (Mc) stays.
  EXPECT_EQ(Apply(bert, "a\xe0\xa4\x83"), "a\xe0\xa4\x83");
}

TEST(BertNormalizerTest, CasedKeepsCaseAndAccents) {
  json cased = {{"type", "BertNormalizer"}, {"lowercase", false}, {"handle_chinese_chars", false}};
  EXPECT_EQ(Apply(cased, "Héllo 中"), "Héllo 中");
  json strip = {{"type", "BertNormalizer"}, {"lowercase", false}, {"strip_accents", true}};
  EXPECT_EQ(Apply(strip, "Héllo"), "Hello");
}

TEST(UnicodeNormalizerTest, AllFourForms) {
  const std::string decomposed = "e\xcc\x81";  // e + U+0301
  EXPECT_EQ(Apply({{"type", "NFC"}}, decomposed), "\xc3\xa9");
  EXPECT_EQ(Apply({{"type", "NFD"}}, "\xc3\xa9"), decomposed);
  EXPECT_EQ(Apply({{"type", "NFKC"}}, "\xef\xac\x81"), "fi");        // U+FB01 ligature
  EXPECT_EQ(Apply({{"type", "NFKD"}}, "\xc2\xb2"), "2");             // superscript two
}

TEST(SimpleNormalizersTest, LowercaseStripStripAccentsPrepend) {
  EXPECT_EQ(Apply({{"type", "Lowercase"}}, "ABC Ä"), "abc ä");
  EXPECT_EQ(Apply({{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}}, "  a  "), "a  ");
  EXPECT_EQ(Apply({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}, "\xc2\xa0 a \t"), "a");
  EXPECT_EQ(Apply({{"type", "StripAccents"}}, "e\xcc\x81\xe0\xa4\x83x"), "ex");
  EXPECT_EQ(Apply({{"type", "Prepend"}, {"prepend", "_"}}, "ab"), "_ab");
  EXPECT_EQ(Apply({{"type", "Prepend"}, {"prepend", "_"}}, ""), "");
}

TEST(ReplaceNormalizerTest, StringAndRegex) {
  EXPECT_EQ(Apply({{"type", "Replace"}, {"pattern", {{"String", "ab"}}}, {"content", "X"}}, "abcab"),
            "XcX");
  EXPECT_EQ(Apply({{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}}, "a \t\n b"),
            "a b");
  EXPECT_EQ(Apply({{"type", "Replace"}, {"pattern", {{"Regex", "[0-9]+"}}}, {"content", "#"}}, "a12b3"),
            "a#b#");
}

TEST(SequenceNormalizerTest, AppliesInOrder) {
  json seq = {{"type", "Sequence"},
              {"normalizers", {{{"type", "NFD"}}, {{"type", "StripAccents"}}, {{"type", "Lowercase"}}}}};
  EXPECT_EQ(Apply(seq, "ÉCOLE"), "ecole");
}

TEST(NormalizerFactoryTest, ErrorsNameTheComponent) {
  auto unknown = MakeNormalizer({{"type", "ByteLevel"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(unknown.status().message().find("ByteLevel"), std::string::npos);
  auto bad_regex = MakeNormalizer({{"type", "Replace"}, {"pattern", {{"Regex", "("}}}, {"content", ""}});
  ASSERT_FALSE(bad_regex.ok());
  EXPECT_EQ(bad_regex.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(MakeNormalizer({{"type", "Strip"}, {"strip_left", "yes"}}).ok());
}

}  // namespace
}  // namespace tide::tokenizer
