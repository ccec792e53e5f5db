#include "cli/tokenize_command.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace tide::cli {
namespace {

std::string WriteVocab() {
  auto path = std::filesystem::path(testing::TempDir()) / "tide_tokenize_cmd_vocab.txt";
  std::ofstream(path) << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\n";
  return path.string();
}

TEST(TokenizeCommandTest, EncodesLinesAndReportsBadOnes) {
  TokenizeCommandOptions o{WriteVocab(), 0};
  std::istringstream in(
      "{\"text\": \"Hello\", \"text_pair\": \"world\"}\n"
      "\n"
      "not json\n"
      "{\"text\": \"hello world\"}\n");
  std::ostringstream out, err;
  EXPECT_EQ(RunTokenizeCommand(o, in, out, err), 1);
  EXPECT_EQ(out.str(),
            "{\"input_ids\":[2,5,3,6,3],\"token_type_ids\":[0,0,0,1,1],\"attention_mask\":[1,1,1,1,1]}\n"
            "{\"error\":\"each line must be a JSON object with a string \\\"text\\\"\"}\n"
            "{\"input_ids\":[2,5,6,3],\"token_type_ids\":[0,0,0,0],\"attention_mask\":[1,1,1,1]}\n");
}

TEST(TokenizeCommandTest, MaxLengthTruncates) {
  TokenizeCommandOptions o{WriteVocab(), 3};
  std::istringstream in("{\"text\": \"hello world hello\"}\n");
  std::ostringstream out, err;
  EXPECT_EQ(RunTokenizeCommand(o, in, out, err), 0);
  EXPECT_EQ(out.str(), "{\"input_ids\":[2,5,3],\"token_type_ids\":[0,0,0],\"attention_mask\":[1,1,1]}\n");
}

TEST(TokenizeCommandTest, UnloadableTokenizerExitsTwo) {
  TokenizeCommandOptions o{"does/not/exist.json", 0};
  std::istringstream in("{\"text\": \"x\"}\n");
  std::ostringstream out, err;
  EXPECT_EQ(RunTokenizeCommand(o, in, out, err), 2);
  EXPECT_NE(err.str().find("does/not/exist.json"), std::string::npos);
}

}  // namespace
}  // namespace tide::cli
