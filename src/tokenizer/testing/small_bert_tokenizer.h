// tide::tokenizer::testing::SmallBertTokenizer — a tiny BERT WordPiece tokenizer for unit tests
// that need a real Tokenizer but no files: [PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3 (special), then one
// token per word of `words` from id 4 on; BertNormalizer (lower-case), BertPreTokenizer and
// BertProcessing, so pairs get token types 0 and 1. Test-only (header-only, uses GoogleTest's
// EXPECT to report a load failure, then returns null).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tokenizer/tokenizer.h"

namespace tide::tokenizer::testing {

inline std::unique_ptr<Tokenizer> SmallBertTokenizer(const std::vector<std::string>& words) {
  using json = nlohmann::json;
  json vocab = {{"[PAD]", 0}, {"[UNK]", 1}, {"[CLS]", 2}, {"[SEP]", 3}};
  for (size_t i = 0; i < words.size(); ++i) vocab[words[i]] = static_cast<int>(4 + i);
  json added = json::array();
  for (auto [tok, id] : std::vector<std::pair<std::string, int>>{{"[PAD]", 0}, {"[UNK]", 1}, {"[CLS]", 2}, {"[SEP]", 3}}) {
    added.push_back({{"id", id}, {"content", tok}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  json j = {{"version", "1.0"},
            {"truncation", nullptr},
            {"padding", nullptr},
            {"added_tokens", added},
            {"normalizer", {{"type", "BertNormalizer"}, {"lowercase", true}}},
            {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
            {"post_processor", {{"type", "BertProcessing"}, {"sep", {"[SEP]", 3}}, {"cls", {"[CLS]", 2}}}},
            {"model", {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"continuing_subword_prefix", "##"},
                       {"max_input_chars_per_word", 100}, {"vocab", vocab}}}};
  auto tok = Tokenizer::FromJson(j.dump(), "test.json");
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

}  // namespace tide::tokenizer::testing
