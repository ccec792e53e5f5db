// The WordPiece model (HF `models::wordpiece`): greedy longest-match-first over a vocabulary,
// continuation pieces carrying a prefix ("##"), [UNK] for words it cannot cover or that exceed
// max_input_chars_per_word characters.
//
// Contract: immutable after creation, thread-safe; Tokenize does no heap allocation beyond growing
// the caller's id vector (continuation lookups use a second table keyed without the prefix).
// Errors: INVALID_ARGUMENT for a malformed model object, a vocab.txt that cannot be read, or an
// unk_token missing from the vocabulary.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/components.h"

namespace tide::tokenizer {

struct WordPieceOptions {
  std::vector<std::string> vocab;          // token text by id (ids are the positions)
  std::string unk_token = "[UNK]";
  std::string continuing_subword_prefix = "##";
  size_t max_input_chars_per_word = 100;   // longer words become unk_token
};

absl::StatusOr<std::unique_ptr<Model>> MakeWordPieceModel(WordPieceOptions options);

// Parses the model object of tokenizer.json (current format with "type": "WordPiece", or the old
// format without "type" whose fields imply WordPiece). "vocab" maps token -> id.
absl::StatusOr<std::unique_ptr<Model>> MakeWordPieceModelFromJson(const nlohmann::json& json);

// Reads a BERT vocab.txt (one token per line, id = line number).
absl::StatusOr<std::vector<std::string>> ReadVocabTxt(const std::string& path);

}  // namespace tide::tokenizer
