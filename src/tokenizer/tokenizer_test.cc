#include "tokenizer/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tide::tokenizer {
namespace {

using json = nlohmann::json;
using Ids = std::vector<int64_t>;

// A small BERT-like tokenizer.json: ids 0-4 special, then words.
json SmallBert() {
  json vocab = {{"[PAD]", 0}, {"[UNK]", 1}, {"[CLS]", 2}, {"[SEP]", 3}, {"[MASK]", 4},
                {"hello", 5}, {"world", 6}, {"a", 7},     {"b", 8},     {"c", 9},
                {"d", 10},    {"e", 11},    {"##s", 12},  {"!", 13}};
  json added = json::array();
  for (auto [tok, id] : std::vector<std::pair<std::string, int>>{
           {"[PAD]", 0}, {"[UNK]", 1}, {"[CLS]", 2}, {"[SEP]", 3}, {"[MASK]", 4}}) {
    added.push_back({{"id", id}, {"content", tok}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", {{"type", "BertNormalizer"}, {"lowercase", true}}},
          {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
          {"post_processor", {{"type", "BertProcessing"}, {"sep", {"[SEP]", 3}}, {"cls", {"[CLS]", 2}}}},
          {"model", {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"continuing_subword_prefix", "##"},
                     {"max_input_chars_per_word", 100}, {"vocab", vocab}}}};
}

std::unique_ptr<Tokenizer> Load(const json& j) {
  auto tok = Tokenizer::FromJson(j.dump(), "test.json");
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

Encoding Enc(const Tokenizer& t, std::string_view a, std::optional<std::string_view> b,
             EncodeOptions o = {}) {
  Encoding e;
  absl::Status s = t.Encode(a, b, o, &e);
  EXPECT_TRUE(s.ok()) << s;
  return e;
}

std::string Words(char w, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += w;
  }
  return s;
}

TEST(TokenizerTest, SingleAndPairWithSpecialTokens) {
  auto t = Load(SmallBert());
  Encoding e = Enc(*t, "Hello worlds!", std::nullopt);
  EXPECT_EQ(e.ids, (Ids{2, 5, 6, 12, 13, 3}));
  EXPECT_EQ(e.type_ids, (Ids{0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(e.attention_mask, (Ids{1, 1, 1, 1, 1, 1}));
  Encoding p = Enc(*t, "a", std::string_view("b c"));
  EXPECT_EQ(p.ids, (Ids{2, 7, 3, 8, 9, 3}));
  EXPECT_EQ(p.type_ids, (Ids{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(t->num_special_tokens(false), 2u);
  EXPECT_EQ(t->num_special_tokens(true), 3u);
}

TEST(TokenizerTest, SpecialTokensMatchedBeforeNormalization) {
  auto t = Load(SmallBert());
  EXPECT_EQ(Enc(*t, "hello[MASK]world", std::nullopt).ids, (Ids{2, 5, 4, 6, 3}));
  // Lowercase "[mask]" is not the special token: it is normalized and split as text.
  EXPECT_EQ(Enc(*t, "[mask]", std::nullopt).ids, (Ids{2, 1, 1, 1, 3}));
}

TEST(TokenizerTest, WithoutSpecialTokensAndTokenize) {
  auto t = Load(SmallBert());
  EncodeOptions o;
  o.add_special_tokens = false;
  Encoding e = Enc(*t, "a", std::string_view("b"), o);
  EXPECT_EQ(e.ids, (Ids{7, 8}));
  EXPECT_EQ(e.type_ids, (Ids{0, 1}));
  Ids ids;
  ASSERT_TRUE(t->Tokenize("Hello, a", &ids).ok());
  EXPECT_EQ(ids, (Ids{5, 1, 7}));
}

TEST(TokenizerTest, LongestFirstMatchesReferenceSplits) {
  auto t = Load(SmallBert());
  EncodeOptions o;
  o.max_length = 16;  // 13 ids for the two sequences
  struct Case { int na, nb, want_a, want_b; };
  // Expected splits measured with the HF reference (tokenizers 0.23.2).
  for (Case c : {Case{1, 20, 1, 12}, Case{5, 5, 5, 5}, Case{8, 7, 7, 6}, Case{7, 8, 6, 7},
                 Case{12, 3, 10, 3}, Case{16, 15, 7, 6}, Case{17, 16, 6, 7}, Case{20, 20, 6, 7}}) {
    Encoding e = Enc(*t, Words('a', c.na), Words('b', c.nb), o);
    int a = 0, b = 0;
    for (int64_t id : e.ids) {
      a += id == 7;
      b += id == 8;
    }
    EXPECT_EQ(a, c.want_a) << c.na << "," << c.nb;
    EXPECT_EQ(b, c.want_b) << c.na << "," << c.nb;
    EXPECT_EQ(e.truncated(), c.na + c.nb > 13);
    EXPECT_EQ(e.untruncated_length >= e.size(), true);
  }
}

TEST(TokenizerTest, OnlyFirstOnlySecondAndLeft) {
  auto t = Load(SmallBert());
  EncodeOptions o;
  o.max_length = 7;  // 4 ids for the sequences
  o.strategy = TruncationStrategy::kOnlySecond;
  EXPECT_EQ(Enc(*t, "a", std::string_view("b c d e"), o).ids, (Ids{2, 7, 3, 8, 9, 10, 3}));
  o.direction = TruncationDirection::kLeft;
  EXPECT_EQ(Enc(*t, "a", std::string_view("b c d e"), o).ids, (Ids{2, 7, 3, 9, 10, 11, 3}));
  o.strategy = TruncationStrategy::kOnlyFirst;
  Encoding e;
  absl::Status s = t->Encode("a", std::string_view("b c d e"), o, &e);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;  // the reference errors too
  o.max_length = 2;  // shorter than the special tokens
  EXPECT_FALSE(t->Encode("a", std::nullopt, o, &e).ok());
  o = {};
  o.max_length = 4;
  o.truncate = false;
  EXPECT_EQ(Enc(*t, "a b c d e", std::nullopt, o).size(), 7u);
}

TEST(TokenizerTest, TruncationAndPaddingBlocksFromJson) {
  json j = SmallBert();
  j["truncation"] = {{"max_length", 6}, {"strategy", "LongestFirst"}, {"direction", "Right"}, {"stride", 0}};
  j["padding"] = {{"strategy", "BatchLongest"}, {"direction", "Right"}, {"pad_to_multiple_of", 4},
                  {"pad_id", 0}, {"pad_type_id", 0}, {"pad_token", "[PAD]"}};
  auto t = Load(j);
  EXPECT_EQ(t->default_max_length(), 6u);
  Encoding e = Enc(*t, "a b c d e", std::nullopt);
  EXPECT_EQ(e.ids, (Ids{2, 7, 8, 9, 10, 3, 0, 0}));  // truncated to 6, padded to a multiple of 4
  EXPECT_EQ(e.attention_mask, (Ids{1, 1, 1, 1, 1, 1, 0, 0}));
  EXPECT_EQ(e.untruncated_length, 7u);
  // Per-call settings override the block.
  EncodeOptions o;
  o.max_length = 4;
  o.pad_to_max_length = false;
  EXPECT_EQ(Enc(*t, "a b c d e", std::nullopt, o).ids, (Ids{2, 7, 8, 3}));
}

TEST(TokenizerTest, PadToMaxLengthAndFixedLeftPadding) {
  auto t = Load(SmallBert());
  EncodeOptions o;
  o.max_length = 6;
  o.pad_to_max_length = true;
  EXPECT_EQ(Enc(*t, "a", std::nullopt, o).ids, (Ids{2, 7, 3, 0, 0, 0}));
  json j = SmallBert();
  j["padding"] = {{"strategy", {{"Fixed", 5}}}, {"direction", "Left"}, {"pad_id", 0},
                  {"pad_type_id", 1}, {"pad_token", "[PAD]"}};
  auto left = Load(j);
  Encoding e = Enc(*left, "a", std::nullopt);
  EXPECT_EQ(e.ids, (Ids{0, 0, 2, 7, 3}));
  EXPECT_EQ(e.type_ids, (Ids{1, 1, 0, 0, 0}));
  EXPECT_EQ(e.attention_mask, (Ids{0, 0, 1, 1, 1}));
}

TEST(TokenizerTest, EncodePairsMatchesEncodeAndPadsBatchLongest) {
  json j = SmallBert();
  j["padding"] = {{"strategy", "BatchLongest"}, {"direction", "Right"}, {"pad_id", 0},
                  {"pad_type_id", 0}, {"pad_token", "[PAD]"}};
  auto t = Load(j);
  std::vector<std::string_view> docs = {"b", "b c d", "hello world!"};
  std::vector<Encoding> out;
  EncodeOptions o;
  o.pad_to_max_length = false;
  ASSERT_TRUE(t->EncodePairs("a e", docs, o, &out).ok());
  ASSERT_EQ(out.size(), 3u);
  for (size_t i = 0; i < docs.size(); ++i) {
    EXPECT_EQ(out[i].ids, Enc(*t, "a e", docs[i], o).ids) << i;
  }
  ASSERT_TRUE(t->EncodePairs("a e", docs, EncodeOptions{}, &out).ok());
  for (const Encoding& e : out) EXPECT_EQ(e.size(), 8u);  // padded to the longest pair
  EXPECT_EQ(out[0].attention_mask, (Ids{1, 1, 1, 1, 1, 1, 0, 0}));
  // Reused encodings keep their buffers.
  const int64_t* before = out[1].ids.data();
  ASSERT_TRUE(t->EncodePairs("a e", docs, EncodeOptions{}, &out).ok());
  EXPECT_EQ(out[1].ids.data(), before);
}

TEST(TokenizerTest, RejectsInvalidUtf8) {
  auto t = Load(SmallBert());
  Encoding e;
  EXPECT_EQ(t->Encode("a\xff", std::nullopt, {}, &e).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t->Encode("a", std::string_view("\xc3"), {}, &e).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TokenizerTest, UnsupportedComponentNamesComponentAndFile) {
  json j = SmallBert();
  j["pre_tokenizer"] = {{"type", "UnicodeScripts"}};
  auto t = Tokenizer::FromJson(j.dump(), "models/x/tokenizer.json");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(t.status().message().find("UnicodeScripts"), std::string::npos);
  EXPECT_NE(t.status().message().find("models/x/tokenizer.json"), std::string::npos);
  EXPECT_FALSE(Tokenizer::FromJson("{not json", "x.json").ok());
  EXPECT_FALSE(Tokenizer::FromFile("does/not/exist.json").ok());
}

TEST(TokenizerTest, OldFormatModelWithoutType) {
  json j = SmallBert();
  j["model"].erase("type");
  auto t = Load(j);
  EXPECT_EQ(Enc(*t, "hello", std::nullopt).ids, (Ids{2, 5, 3}));
}

TEST(TokenizerTest, FromVocabTxt) {
  const auto path = std::filesystem::path(testing::TempDir()) / "tide_vocab_test.txt";
  {
    std::ofstream f(path);
    f << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\nHello\n";
  }
  auto uncased = Tokenizer::FromVocabTxt(path.string(), true);
  ASSERT_TRUE(uncased.ok()) << uncased.status();
  EXPECT_EQ(Enc(**uncased, "HELLO", std::string_view("World")).ids, (Ids{2, 5, 3, 6, 3}));
  auto cased = Tokenizer::FromFile(path.string());  // .txt: vocab.txt, uncased by default
  ASSERT_TRUE(cased.ok());
  auto keep_case = Tokenizer::FromVocabTxt(path.string(), false);
  ASSERT_TRUE(keep_case.ok());
  EXPECT_EQ(Enc(**keep_case, "Hello", std::nullopt).ids, (Ids{2, 7, 3}));
  EXPECT_EQ((*keep_case)->pad_id(), 0);
  EXPECT_EQ((*keep_case)->TokenToId("world"), 6);
  EXPECT_EQ((*keep_case)->IdToToken(7), "Hello");
}

TEST(TokenizerTest, SharedAcrossThreads) {
  auto t = Load(SmallBert());
  std::vector<std::string> texts;
  for (int i = 0; i < 50; ++i) texts.push_back(Words('a' + i % 5, 1 + i % 9) + " hello!");
  std::vector<Ids> want;
  for (const auto& s : texts) want.push_back(Enc(*t, s, std::string_view("world d")).ids);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      Encoding e;
      for (int rep = 0; rep < 20; ++rep) {
        for (size_t i = 0; i < texts.size(); ++i) {
          if (!t->Encode(texts[i], std::string_view("world d"), {}, &e).ok() || e.ids != want[i]) {
            ++mismatches[k];
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(mismatches[k], 0);
}

}  // namespace
}  // namespace tide::tokenizer

namespace tide::tokenizer {
namespace {

// Found by fuzz_tokenizer: a component field of the wrong JSON type made nlohmann throw out of
// FromJson. Every such file must load as INVALID_ARGUMENT naming the source instead.
TEST(TokenizerFromJson, FieldsOfTheWrongTypeAreInvalidArgumentNotExceptions) {
  const char* cases[] = {
      R"({"pre_tokenizer": {"type": 5}, "model": {"type": "WordPiece", "vocab": {"a": 0}, "unk_token": "a"}})",
      R"({"normalizer": {"type": ["NFD"]}, "model": {"type": "WordPiece", "vocab": {"a": 0}, "unk_token": "a"}})",
      R"({"model": {"type": "WordPiece", "vocab": {"a": "zero"}, "unk_token": "a"}})",
      R"({"model": {"type": "WordPiece", "vocab": {"a": 0}, "unk_token": 7}})",
      R"({"pre_tokenizer": "Whitespace", "model": {"type": "WordPiece", "vocab": {"a": 0}, "unk_token": "a"}})",
  };
  for (const char* json : cases) {
    absl::StatusOr<std::unique_ptr<Tokenizer>> tok;
    EXPECT_NO_THROW(tok = Tokenizer::FromJson(json, "hostile.json")) << json;
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument) << json << " -> " << tok.status();
    EXPECT_NE(tok.status().message().find("hostile.json"), std::string_view::npos) << tok.status();
  }
}

}  // namespace
}  // namespace tide::tokenizer
