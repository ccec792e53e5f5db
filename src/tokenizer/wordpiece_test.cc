#include "tokenizer/wordpiece.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tide::tokenizer {
namespace {

std::unique_ptr<Model> Make(size_t max_chars = 100) {
  WordPieceOptions o;
  o.vocab = {"[UNK]", "un", "##aff", "##able", "a", "##b", "b", "ünï", "##çødé"};
  o.max_input_chars_per_word = max_chars;
  auto m = MakeWordPieceModel(std::move(o));
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

std::vector<int64_t> Tok(const Model& m, std::string_view word) {
  std::vector<int64_t> ids;
  m.Tokenize(word, &ids);
  return ids;
}

TEST(WordPieceTest, GreedyLongestMatchWithPrefix) {
  auto m = Make();
  EXPECT_EQ(Tok(*m, "unaffable"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(Tok(*m, "ab"), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(Tok(*m, "ünïçødé"), (std::vector<int64_t>{7, 8}));
}

TEST(WordPieceTest, UncoverableWordIsOneUnk) {
  auto m = Make();
  EXPECT_EQ(Tok(*m, "abz"), (std::vector<int64_t>{0}));
  std::vector<int64_t> ids = {42};
  m->Tokenize("unaffablez", &ids);  // earlier ids are kept, partial pieces dropped
  EXPECT_EQ(ids, (std::vector<int64_t>{42, 0}));
}

TEST(WordPieceTest, MaxInputCharsCountsCharacters) {
  auto m = Make(3);
  EXPECT_EQ(Tok(*m, "ünï"), (std::vector<int64_t>{7}));     // 3 chars, 6 bytes
  EXPECT_EQ(Tok(*m, "abbb"), (std::vector<int64_t>{0}));    // 4 chars
}

TEST(WordPieceTest, VocabLookups) {
  auto m = Make();
  EXPECT_EQ(m->TokenToId("##able"), 3);
  EXPECT_EQ(m->TokenToId("nope"), std::nullopt);
  EXPECT_EQ(m->IdToToken(1), "un");
  EXPECT_EQ(m->IdToToken(99), std::nullopt);
  EXPECT_EQ(m->vocab_size(), 9u);
}

TEST(WordPieceTest, MissingUnkFails) {
  WordPieceOptions o;
  o.vocab = {"a"};
  EXPECT_FALSE(MakeWordPieceModel(std::move(o)).ok());
}

TEST(WordPieceTest, FromJsonOldAndNewFormat) {
  nlohmann::json old_format = {{"unk_token", "[UNK]"},
                               {"continuing_subword_prefix", "##"},
                               {"max_input_chars_per_word", 100},
                               {"vocab", {{"[UNK]", 0}, {"x", 1}, {"##y", 2}}}};
  auto m = MakeModel(old_format);  // no "type": WordPiece implied by its fields
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Tok(**m, "xy"), (std::vector<int64_t>{1, 2}));
  old_format["type"] = "WordPiece";
  EXPECT_TRUE(MakeModel(old_format).ok());
  auto word_level = MakeModel({{"type", "WordLevel"}, {"vocab", {{"a", 0}}}, {"unk_token", "a"}});
  ASSERT_FALSE(word_level.ok());
  EXPECT_EQ(word_level.status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace tide::tokenizer
