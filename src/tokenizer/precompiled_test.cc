#include "tokenizer/precompiled.h"

#include <cstdint>
#include <map>
#include <string>

#include "gtest/gtest.h"

namespace tide::tokenizer {
namespace {

// Serialises a Darts-style array (index -> unit) plus the replacement area into a charsmap blob.
std::string Blob(const std::map<uint32_t, uint32_t>& units, const std::string& normalized) {
  const uint32_t size = units.empty() ? 1 : units.rbegin()->first + 1;
  std::string blob;
  auto put = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) blob.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  };
  put(size * 4);
  for (uint32_t i = 0; i < size; ++i) {
    auto it = units.find(i);
    put(it == units.end() ? 0 : it->second);
  }
  return blob + normalized;
}

uint32_t Node(uint8_t label, bool has_leaf, uint32_t offset) {
  return (offset << 10) | (has_leaf ? (1u << 8) : 0u) | label;
}

// A trie holding "a" -> "b" and "ab" -> "c", built by hand:
// root offset 256; 'a' at 256^0x61 = 353 with leaf at 353^512 = 865 (value 0: "b");
// 'b' below it at 865^0x62 = 771 with leaf at 771^1024 = 1795 (value 2: "c").
std::string TwoKeyBlob() {
  return Blob({{0, 256u << 10}, {353, Node('a', true, 512)}, {865, 0}, {771, Node('b', true, 1024)},
               {1795, 2}},
              std::string("b\0c\0", 4));
}

TEST(PrecompiledCharsmap, ShortestPrefixWins) {
  auto map = PrecompiledCharsmap::Parse(TwoKeyBlob());
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->Transform("a"), "b");
  // spm_precompiled returns the first (shortest) key found, even though "ab" is a longer key.
  EXPECT_EQ(map->Transform("ab"), "b");
  EXPECT_EQ(map->Transform("abz"), "b");
  EXPECT_EQ(map->Transform("x"), std::nullopt);
  EXPECT_EQ(map->Transform(""), std::nullopt);
}

TEST(PrecompiledNormalizer, WholeShortGraphemeIsReplaced) {
  auto n = PrecompiledNormalizer::Create(TwoKeyBlob());
  ASSERT_TRUE(n.ok()) << n.status();
  std::string s = "ab";  // two graphemes: "a" -> "b", "b" unchanged
  (*n)->Normalize(&s);
  EXPECT_EQ(s, "bb");
  s = "xa\xCC\x81y";  // "a" + U+0301 is one 3-byte grapheme: replaced whole, accent dropped
  (*n)->Normalize(&s);
  EXPECT_EQ(s, "xby");
  // A grapheme of 6+ bytes is transformed code point by code point.
  s = "a\xCC\x81\xCC\x81\xCC\x81";
  (*n)->Normalize(&s);
  EXPECT_EQ(s, "b\xCC\x81\xCC\x81\xCC\x81");
  s = "";
  (*n)->Normalize(&s);
  EXPECT_EQ(s, "");
  s = std::string("a\0a", 3);
  (*n)->Normalize(&s);
  EXPECT_EQ(s, std::string("b\0b", 3));
}

TEST(PrecompiledNormalizer, InvalidUtf8PassesThrough) {
  auto n = PrecompiledNormalizer::Create(TwoKeyBlob());
  ASSERT_TRUE(n.ok());
  std::string s = "\xFF" "a\xC3";
  (*n)->Normalize(&s);
  EXPECT_EQ(s, "\xFF" "b\xC3");
}

TEST(PrecompiledCharsmap, MalformedBlobsAreRejected) {
  EXPECT_EQ(PrecompiledCharsmap::Parse("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PrecompiledCharsmap::Parse("\x08\x00\x00").status().code(),
            absl::StatusCode::kInvalidArgument);
  // Declares 8 bytes of trie but holds 4.
  EXPECT_EQ(PrecompiledCharsmap::Parse(std::string("\x08\x00\x00\x00\x00\x00\x00\x00", 8))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  // Zero-unit trie.
  EXPECT_EQ(PrecompiledCharsmap::Parse(std::string("\x00\x00\x00\x00", 4)).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Replacement area that is not UTF-8.
  EXPECT_EQ(PrecompiledCharsmap::Parse(Blob({{0, 0}}, "\xFF")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakePrecompiledNormalizer(nlohmann::json{{"type", "Precompiled"},
                                                     {"precompiled_charsmap", "!!notbase64"}})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakePrecompiledNormalizer(nlohmann::json{{"type", "Precompiled"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PrecompiledCharsmap, HostileTrieNeverReadsOutOfBounds) {
  // Offsets that point far outside the array, a leaf outside it, and values past the blob end or
  // inside a UTF-8 sequence: all mean "no match".
  auto far = PrecompiledCharsmap::Parse(Blob({{0, 0xFFFFFC00u}}, ""));
  ASSERT_TRUE(far.ok());
  EXPECT_EQ(far->Transform("abc"), std::nullopt);
  auto leaf_outside = PrecompiledCharsmap::Parse(Blob({{0, 256u << 10}, {353, Node('a', true, 4096)}}, "x"));
  ASSERT_TRUE(leaf_outside.ok());
  EXPECT_EQ(leaf_outside->Transform("a"), std::nullopt);
  auto value_outside = PrecompiledCharsmap::Parse(
      Blob({{0, 256u << 10}, {353, Node('a', true, 512)}, {865, 1000}}, "x"));
  ASSERT_TRUE(value_outside.ok());
  EXPECT_EQ(value_outside->Transform("a"), std::nullopt);
  auto mid_char = PrecompiledCharsmap::Parse(
      Blob({{0, 256u << 10}, {353, Node('a', true, 512)}, {865, 1}}, "\xC3\xA9"));
  ASSERT_TRUE(mid_char.ok());
  EXPECT_EQ(mid_char->Transform("a"), std::nullopt);
}

}  // namespace
}  // namespace tide::tokenizer
