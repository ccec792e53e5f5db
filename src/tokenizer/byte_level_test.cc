#include "tokenizer/byte_level.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tide::tokenizer {
namespace {

using ::testing::ElementsAre;

Pieces PreTok(const nlohmann::json& json, Pieces pieces) {
  auto p = MakeByteLevelPreTokenizer(json);
  EXPECT_TRUE(p.ok()) << p.status();
  Pieces scratch;
  (*p)->PreTokenize(&pieces, &scratch);
  return pieces;
}

TEST(ByteLevel, ByteToUnicodeTable) {
  EXPECT_EQ(ByteLevelChar('A'), "A");
  EXPECT_EQ(ByteLevelChar(' '), "\xC4\xA0");    // U+0120 'Ġ' (32 is the 33rd unprintable byte)
  EXPECT_EQ(ByteLevelChar('\n'), "\xC4\x8A");   // U+010A 'Ċ'
  EXPECT_EQ(ByteLevelChar(0), "\xC4\x80");      // U+0100
  EXPECT_EQ(ByteLevelChar(0xAD), "\xC5\x83");   // soft hyphen is the 68th unprintable: U+0143
  EXPECT_EQ(ByteLevelChar(0xE9), "\xC3\xA9");   // printable Latin-1 maps to itself
  std::set<std::string> distinct;
  for (int b = 0; b < 256; ++b) distinct.insert(ByteLevelChar(static_cast<unsigned char>(b)));
  EXPECT_EQ(distinct.size(), 256u);
}

TEST(ByteLevel, Gpt2Split) {
  nlohmann::json j = {{"type", "ByteLevel"}, {"add_prefix_space", false}};
  EXPECT_THAT(PreTok(j, {"I'm here  now!!"}),
              ElementsAre("I", "'m", "\xC4\xA0here", "\xC4\xA0", "\xC4\xA0now", "!!"));
  EXPECT_THAT(PreTok(j, {"x1 2,3"}), ElementsAre("x", "1", "\xC4\xA0" "2", ",", "3"));
  // \s+(?!\S) leaves the last newline before "b" to the next match.
  EXPECT_THAT(PreTok(j, {"a\n\nb  "}),
              ElementsAre("a", "\xC4\x8A", "\xC4\x8A", "b", "\xC4\xA0\xC4\xA0"));
  EXPECT_THAT(PreTok(j, {""}), ElementsAre());
  j["add_prefix_space"] = true;
  EXPECT_THAT(PreTok(j, {"hi", " there"}), ElementsAre("\xC4\xA0hi", "\xC4\xA0there"));
  j["use_regex"] = false;
  EXPECT_THAT(PreTok(j, {"a b"}), ElementsAre("\xC4\xA0" "a\xC4\xA0" "b"));
}

TEST(ByteLevel, LongAndOddInput) {
  nlohmann::json j = {{"type", "ByteLevel"}, {"add_prefix_space", false}};
  auto pieces = PreTok(j, {std::string(10000, 'x') + std::string(10000, ' ') + "y"});
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0], std::string(10000, 'x'));
  EXPECT_EQ(pieces[1].size(), 2u * 9999);
  // Invalid UTF-8 cannot be matched by the regex; its bytes are still mapped, nothing is lost.
  pieces = PreTok(j, {"a\xFF"});
  EXPECT_THAT(pieces, ElementsAre("a\xC3\xBF"));
  EXPECT_FALSE(MakeByteLevelPreTokenizer({{"type", "ByteLevel"}, {"use_regex", "yes"}}).ok());
}

}  // namespace
}  // namespace tide::tokenizer

namespace tide::tokenizer {
namespace {

// Arbitrary bytes (valid UTF-8 or not) must never crash or lose bytes; run under ASan in CI's
// sanitizer build. The generator is a fixed-seed LCG so failures reproduce.
TEST(ByteLevel, ArbitraryBytesAreMappedLosslessly) {
  auto p = MakeByteLevelPreTokenizer({{"type", "ByteLevel"}, {"add_prefix_space", false}});
  ASSERT_TRUE(p.ok());
  uint64_t state = 12345;
  for (int round = 0; round < 500; ++round) {
    std::string text;
    const size_t len = round % 64;
    for (size_t i = 0; i < len; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      // Mostly ASCII and UTF-8 lead/continuation bytes, to hit both valid and broken sequences.
      const unsigned char pool[] = {'a', ' ', '\n', '\'', '1', 0xC3, 0xA9, 0xE2, 0x96, 0x81, 0xF0, 0xFF};
      text.push_back(static_cast<char>(pool[(state >> 33) % sizeof(pool)]));
    }
    Pieces pieces = {text}, scratch;
    (*p)->PreTokenize(&pieces, &scratch);
    std::string joined, expected;
    for (const auto& piece : pieces) joined += piece;
    AppendByteLevel(text, &expected);
    EXPECT_EQ(joined, expected);
  }
}

}  // namespace
}  // namespace tide::tokenizer
