#include "tokenizer/unigram.h"

#include <optional>
#include <string>
#include <string_view>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared_assets.h"
#include "tokenizer/metaspace.h"
#include "tokenizer/precompiled.h"
#include "tokenizer/unicode.h"
#include "tokenizer/word_cache.h"

namespace tide::tokenizer {
namespace {

using ::testing::ElementsAre;

std::unique_ptr<Model> Make(const nlohmann::json& json) {
  auto m = MakeUnigramModel(json);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

std::vector<int64_t> Ids(const Model& m, std::string_view piece) {
  std::vector<int64_t> ids;
  m.Tokenize(piece, &ids);
  return ids;
}

// vocab ids:            0          1          2          3            4          5              6
const nlohmann::json kVocab = nlohmann::json::parse(
    R"([["<unk>", 0.0], ["a", -1.0], ["b", -2.0], ["ab", -2.5], ["c", -3.0], ["abc", -7.0], ["bc", -4.0]])");

TEST(Unigram, BestPath) {
  auto m = Make({{"type", "Unigram"}, {"unk_id", 0}, {"vocab", kVocab}});
  ASSERT_NE(m, nullptr);
  EXPECT_THAT(Ids(*m, "ab"), ElementsAre(3));        // ab -2.5 beats a+b -3
  EXPECT_THAT(Ids(*m, "abc"), ElementsAre(1, 6));    // a+bc -5 beats ab+c -5.5, a+b+c -6, abc -7
  EXPECT_THAT(Ids(*m, "cab"), ElementsAre(4, 3));
  EXPECT_THAT(Ids(*m, ""), ElementsAre());
  EXPECT_EQ(m->vocab_size(), 7u);
  EXPECT_EQ(m->TokenToId("bc"), 6);
  EXPECT_EQ(m->IdToToken(5), "abc");
  EXPECT_EQ(m->IdToToken(7), std::nullopt);
  EXPECT_EQ(m->TokenToId("zz"), std::nullopt);
}

TEST(Unigram, TiesKeepTheFirstCandidate) {
  // a+b and ab both score -2; the lattice sees "ab" (from position 0) before "a"+"b" completes.
  auto m = Make({{"type", "Unigram"}, {"unk_id", 0},
                 {"vocab", nlohmann::json::parse(R"([["<unk>", 0], ["a", -1], ["b", -1], ["ab", -2]])")}});
  ASSERT_NE(m, nullptr);
  EXPECT_THAT(Ids(*m, "ab"), ElementsAre(3));
}

TEST(Unigram, UnknownRunsAreFused) {
  auto m = Make({{"type", "Unigram"}, {"unk_id", 0}, {"vocab", kVocab}});
  ASSERT_NE(m, nullptr);
  EXPECT_THAT(Ids(*m, "xy"), ElementsAre(0));
  EXPECT_THAT(Ids(*m, "axyb"), ElementsAre(1, 0, 2));
  EXPECT_THAT(Ids(*m, "\xE6\x97\xA5\xE6\x9C\xAC" "a"), ElementsAre(0, 1));  // two CJK chars, one unk
  EXPECT_THAT(Ids(*m, "\xFF" "a\xC3"), ElementsAre(0, 1, 0));                // invalid bytes
  // The literal text "<unk>" is a vocab piece with the unk id, so it fuses with a following
  // unknown character into one unk, as in HF.
  EXPECT_THAT(Ids(*m, "<unk>z"), ElementsAre(0));
}

TEST(Unigram, ByteFallback) {
  auto vocab = kVocab;
  vocab.push_back({"<0x78>", -5.0});  // 7: "x"
  vocab.push_back({"<0x79>", -5.0});  // 8: "y"
  vocab.push_back({"<0xC3>", -5.0});  // 9: first byte of "é" only
  auto m = Make({{"type", "Unigram"}, {"unk_id", 0}, {"vocab", vocab}, {"byte_fallback", true}});
  ASSERT_NE(m, nullptr);
  EXPECT_THAT(Ids(*m, "axyb"), ElementsAre(1, 7, 8, 2));  // fused "xy" falls back byte by byte
  EXPECT_THAT(Ids(*m, "\xC3\xA9"), ElementsAre(0));          // <0xA9> missing: unk
}

TEST(Unigram, LongWord) {
  auto m = Make({{"type", "Unigram"}, {"unk_id", 0}, {"vocab", kVocab}});
  ASSERT_NE(m, nullptr);
  std::string word;
  for (int i = 0; i < 5000; ++i) word += "ab";
  auto ids = Ids(*m, word);
  ASSERT_EQ(ids.size(), 5000u);
  for (auto id : ids) ASSERT_EQ(id, 3);
  ids = Ids(*m, std::string(10000, 'z'));
  EXPECT_THAT(ids, ElementsAre(0));
}

TEST(Unigram, BadConfig) {
  EXPECT_EQ(MakeUnigramModel({{"type", "Unigram"}, {"unk_id", 0}, {"vocab", nlohmann::json::array()}})
                .status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeUnigramModel({{"type", "Unigram"}, {"unk_id", 9}, {"vocab", kVocab}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeUnigramModel({{"type", "Unigram"}, {"unk_id", nullptr}, {"vocab", kVocab}}).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(MakeUnigramModel({{"type", "Unigram"}, {"unk_id", 0},
                              {"vocab", nlohmann::json::parse(R"([["a"]])")}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ---- the real t5-small tokenizer.json (Precompiled + WhitespaceSplit + Metaspace + Unigram) ----

constexpr std::string_view kT5Tokenizer = "tokenizers/t5-small-unigram/tokenizer.json";

std::optional<nlohmann::json> LoadAsset(std::string_view relative) {
  const std::optional<std::string> text = tide::testing::ReadSharedAsset(relative);
  if (!text) return std::nullopt;
  return nlohmann::json::parse(*text);
}

// HF's WhitespaceSplit (split on Rust char::is_whitespace), which t5's Sequence pre-tokenizer
// applies before Metaspace; the framework owns the real one.
Pieces WhitespaceSplit(const std::string& text) {
  Pieces out;
  std::string current;
  for (size_t pos = 0; pos < text.size();) {
    const size_t start = pos;
    const char32_t cp = unicode::Next(text, &pos);
    if (unicode::IsWhitespace(cp)) {
      if (!current.empty()) out.push_back(std::move(current));
      current.clear();
    } else {
      current.append(text, start, pos - start);
    }
  }
  if (!current.empty()) out.push_back(std::move(current));
  return out;
}

struct Golden {
  const char* text;
  std::vector<int64_t> ids;
};

// Expected ids from the HF reference (tokenizers 0.23.2 Node binding), computed with
// tok.encode(text, null, {addSpecialTokens: false}) on ../shared/assets/tokenizers/
// t5-small-unigram/tokenizer.json.
const Golden kT5Golden[] = {
    {"Hello world",
     {8774, 296}},
    {"The giant panda is a bear species endemic to China.",
     {37, 6079, 2131, 26, 9, 19, 3, 9, 4595, 3244, 3, 3406, 3113, 12, 1473, 5}},
    {"",
     {}},
    {"  leading and trailing  ",
     {1374, 11, 5032, 53}},
    {"\xef""\xac""\x81""\xcc""\x81""ne caf\xc3""\xa9"" na\xc3""\xaf""ve",
     {1399, 11949, 3, 29, 9, 2, 162}},
    {"\xef""\xbc""\xb4""\xef""\xbd""\x8f""\xef""\xbd""\x8b""\xef""\xbd""\x99""\xef""\xbd""\x8f""\xe3""\x80""\x80""\xef""\xbc""\x92""\xef""\xbc""\x90""\xef""\xbc""\x92""\xef""\xbc""\x90"" \xe2""\x91""\xa0""\xe2""\x91""\xa1""",
     {12653, 6503, 586}},
    {"\xe6""\x97""\xa5""\xe6""\x9c""\xac""\xe8""\xaa""\x9e""\xe3""\x81""\xae""\xe3""\x83""\x86""\xe3""\x82""\xad""\xe3""\x82""\xb9""\xe3""\x83""\x88""",
     {3, 2}},
    {"emoji \xf0""\x9f""\x91""\x8d""\xf0""\x9f""\x8f""\xbd"" test \xf0""\x9f""\x91""\xa8""\xe2""\x80""\x8d""\xf0""\x9f""\x91""\xa9""\xe2""\x80""\x8d""\xf0""\x9f""\x91""\xa7""",
     {3, 15, 51, 21892, 3, 2, 794, 3, 2, 3, 2, 3, 2}},
    {"x\xcc""\x81""y\xcc""\x88""",
     {3, 226, 2}},
    {"tab\x09""new\x0a""line",
     {3808, 126, 689}},
    {"\xe1""\xbc""\x88""\xce""\xb8""\xe1""\xbf""\x86""\xce""\xbd""\xce""\xb1""\xce""\xb9"" \xc5""\x89"" \xc7""\x85""",
     {3, 2, 3, 2, 29, 309, 2}},
    {"What is the capital of France? Paris, of course!",
     {363, 19, 8, 1784, 13, 1410, 58, 1919, 6, 13, 503, 55}},
    {"\xc3""\x9c""berm\xc3""\xa4""\xc3""\x9f""ig gro\xc3""\x9f""e Stra\xc3""\x9f""en \xe2""\x80""\x94"" \xe2""\x80""\x9e""Anf\xc3""\xbc""hrungszeichen\xe2""\x80""\x9c"" \xe2""\x80""\xa6"" und \xc2""\xbd"" Liter.",
     {3333, 11914, 4859, 17028, 3, 318, 395, 188, 29, 12367, 7, 16549, 735, 3, 233, 64, 209, 2, 357, 16515, 5}},
    {"\xef""\xbc""\xa1""\xef""\xbc""\xa2""\xef""\xbc""\xa3""\xef""\xbc""\x91""\xef""\xbc""\x92""\xef""\xbc""\x93"" \xef""\xbd""\xb6""\xef""\xbe""\x80""\xef""\xbd""\xb6""\xef""\xbe""\x85"" \xe3""\x8d""\xbf"" \xe3""\x8c""\x94""",
     {14213, 14574, 3, 2, 3, 2, 3, 2}},
    {"C++ std::vector<int> x = {1, 2, 3}; // comment",
     {205, 16702, 3, 7, 17, 26, 10, 10, 162, 5317, 2, 77, 17, 3155, 3, 226, 3274, 3, 2, 4347, 3547, 220, 2, 117, 13751, 1670}},
    {"supercalifragilisticexpialidocious antidisestablishmentarianism",
     {1355, 15534, 20791, 173, 3040, 994, 102, 23, 4288, 7171, 2936, 1181, 26, 159, 222, 15403, 1273, 297, 6286, 14378}},
    {"\xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82"", \xd0""\xbc""\xd0""\xb8""\xd1""\x80""! \xce""\x95""\xce""\xbb""\xce""\xbb""\xce""\xb7""\xce""\xbd""\xce""\xb9""\xce""\xba""\xce""\xac"". \xd8""\xa7""\xd9""\x84""\xd8""\xb9""\xd8""\xb1""\xd8""\xa8""\xd9""\x8a""\xd8""\xa9"". \xd7""\xa2""\xd7""\x91""\xd7""\xa8""\xd7""\x99""\xd7""\xaa"".",
     {3, 2, 14709, 6609, 15042, 6, 3, 21325, 8452, 55, 3, 2, 5, 3, 2, 5, 3, 2, 5}},
    {"$1,234.56 (approx.) 50% off -- e-mail: a.b@c.de",
     {1970, 6, 2773, 12451, 948, 41, 12497, 226, 5, 61, 5743, 326, 1636, 3, 15, 18, 1963, 10, 3, 9, 5, 115, 1741, 75, 5, 221}},
    {"\xc2""\xa0""nbsp\xe2""\x80""\x83""em\xe2""\x80""\x8b""zero\xc2""\xad""soft",
     {3, 29, 115, 7, 102, 3, 15, 51, 5733, 575, 12369}},
    {"A\xcc""\x8a"" \xc7""\x96"" \xe1""\xb8""\x9d"" \xc3""\x85""",
     {3, 2, 3, 2, 3, 2, 3, 2}},
};

TEST(UnigramT5, MatchesHuggingFace) {
  auto json = LoadAsset(kT5Tokenizer);
  if (!json) GTEST_SKIP() << tide::testing::MissingSharedAsset(kT5Tokenizer);
  auto normalizer = MakePrecompiledNormalizer((*json)["normalizer"]);
  ASSERT_TRUE(normalizer.ok()) << normalizer.status();
  auto metaspace = MakeMetaspacePreTokenizer((*json)["pre_tokenizer"]["pretokenizers"][1]);
  ASSERT_TRUE(metaspace.ok()) << metaspace.status();
  auto model = MakeUnigramModel((*json)["model"]);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->vocab_size(), 32100u);
  for (const Golden& g : kT5Golden) {
    std::string text = g.text;
    (*normalizer)->Normalize(&text);
    Pieces pieces = WhitespaceSplit(text), scratch;
    (*metaspace)->PreTokenize(&pieces, &scratch);
    std::vector<int64_t> ids;
    for (const auto& p : pieces) (*model)->Tokenize(p, &ids);
    EXPECT_EQ(ids, g.ids) << "text: " << g.text;
  }
}

}  // namespace
}  // namespace tide::tokenizer

namespace tide::tokenizer {
namespace {

// Two models alive in one thread must never see each other's cached words, including after one
// is destroyed and another takes its place.
TEST(UnigramCache, IsPerModel) {
  auto first = MakeUnigramModel({{"type", "Unigram"}, {"unk_id", 0},
                                 {"vocab", nlohmann::json::parse(R"([["<unk>", 0], ["ab", -1]])")}});
  auto second = MakeUnigramModel({{"type", "Unigram"}, {"unk_id", 0},
                                  {"vocab", nlohmann::json::parse(R"([["<unk>", 0], ["a", -1], ["b", -1]])")}});
  ASSERT_TRUE(first.ok() && second.ok());
  for (int round = 0; round < 3; ++round) {
    std::vector<int64_t> ids;
    (*first)->Tokenize("ab", &ids);
    (*second)->Tokenize("ab", &ids);
    EXPECT_THAT(ids, ElementsAre(1, 1, 2));
  }
  first->reset();
  auto third = MakeUnigramModel({{"type", "Unigram"}, {"unk_id", 0},
                                 {"vocab", nlohmann::json::parse(R"([["<unk>", 0], ["b", -1], ["a", -1]])")}});
  ASSERT_TRUE(third.ok());
  std::vector<int64_t> ids;
  (*third)->Tokenize("ab", &ids);
  EXPECT_THAT(ids, ElementsAre(2, 1));
}

// More distinct words than the cache holds: results stay right after it is cleared.
TEST(UnigramCache, StaysCorrectPastCapacity) {
  auto m = MakeUnigramModel({{"type", "Unigram"}, {"unk_id", 0}, {"vocab", kVocab}});
  ASSERT_TRUE(m.ok());
  for (size_t i = 0; i < WordCache::kMaxWords + 100; ++i) {
    std::string word = "ab" + std::to_string(i);  // digits are unknown: ab + one fused unk
    std::vector<int64_t> ids;
    (*m)->Tokenize(word, &ids);
    ASSERT_THAT(ids, ElementsAre(3, 0)) << word;
  }
}

}  // namespace
}  // namespace tide::tokenizer

namespace tide::tokenizer {
namespace {

// Arbitrary bytes through the real t5 pipeline: no crash, and every byte is accounted for by
// some token (a non-empty piece never yields zero ids).
TEST(UnigramT5, ArbitraryBytesNeverCrash) {
  auto json = LoadAsset(kT5Tokenizer);
  if (!json) GTEST_SKIP() << tide::testing::MissingSharedAsset(kT5Tokenizer);
  auto normalizer = MakePrecompiledNormalizer((*json)["normalizer"]);
  auto metaspace = MakeMetaspacePreTokenizer((*json)["pre_tokenizer"]["pretokenizers"][1]);
  auto model = MakeUnigramModel((*json)["model"]);
  ASSERT_TRUE(normalizer.ok() && metaspace.ok() && model.ok());
  uint64_t state = 987654321;
  for (int round = 0; round < 500; ++round) {
    std::string text;
    const size_t len = round % 48;
    for (size_t i = 0; i < len; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const unsigned char pool[] = {'a', ' ', 'Z', 0xCC, 0x81, 0xEF, 0xAC, 0x81, 0xE3, 0x80, 0xF0, 0x9F, 0xFF, 0x00};
      text.push_back(static_cast<char>(pool[(state >> 33) % sizeof(pool)]));
    }
    (*normalizer)->Normalize(&text);
    Pieces pieces = {text}, scratch;
    (*metaspace)->PreTokenize(&pieces, &scratch);
    for (const auto& piece : pieces) {
      std::vector<int64_t> ids;
      (*model)->Tokenize(piece, &ids);
      EXPECT_FALSE(ids.empty());
      for (auto id : ids) EXPECT_LT(static_cast<size_t>(id), (*model)->vocab_size());
    }
  }
}

}  // namespace
}  // namespace tide::tokenizer
