// Added and special tokens of a tokenizer.json ("added_tokens"), matched in the text before the
// model sees it, as HF's AddedVocabulary does: tokens with normalized=false are found in the raw
// text before normalization, tokens with normalized=true in the normalized text (their content
// normalized the same way). Matching is leftmost-longest and honours single_word, lstrip, rstrip.
//
// Contract: immutable after Create, thread-safe; Split appends to a caller-owned vector and does
// not allocate otherwise. Errors: INVALID_ARGUMENT for malformed added_tokens entries.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "tokenizer/components.h"

namespace tide::tokenizer {

struct AddedToken {
  std::string content;
  int64_t id = 0;
  bool single_word = false;  // only match when not inside a word
  bool lstrip = false;       // swallow whitespace on the left
  bool rstrip = false;       // swallow whitespace on the right
  bool normalized = true;    // matched in normalized text (true) or raw text (false)
  bool special = false;
};

// A range of text, either plain text to tokenize (id < 0) or an added token (its id).
struct TextSegment {
  uint32_t begin, end;
  int64_t id;
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // `normalizer` (may be null) normalizes the content of normalized tokens for matching.
  static absl::StatusOr<AddedVocabulary> Create(std::vector<AddedToken> tokens,
                                                const Normalizer* normalizer);
  static absl::StatusOr<std::vector<AddedToken>> ParseJson(const nlohmann::json& added_tokens);

  bool has_raw() const { return !raw_.patterns.empty(); }
  bool has_normalized() const { return !normalized_.patterns.empty(); }
  // Splits `text` on raw (normalized=false) or normalized tokens; appends segments covering it.
  void SplitRaw(std::string_view text, std::vector<TextSegment>* out) const {
    Split(raw_, text, out);
  }
  void SplitNormalized(std::string_view text, std::vector<TextSegment>* out) const {
    Split(normalized_, text, out);
  }

  std::optional<int64_t> TokenToId(std::string_view content) const;
  std::optional<std::string> IdToToken(int64_t id) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Pattern {
    std::string text;
    size_t token;  // index into tokens_
  };
  struct Matcher {
    std::vector<Pattern> patterns;                   // sorted by first byte, then longest first
    std::array<std::pair<uint32_t, uint32_t>, 256> by_first_byte{};  // [begin, end) in patterns
  };
  static void Build(Matcher* m);
  void Split(const Matcher& m, std::string_view text, std::vector<TextSegment>* out) const;

  std::vector<AddedToken> tokens_;
  Matcher raw_, normalized_;
  absl::flat_hash_map<std::string, int64_t> by_content_;
};

}  // namespace tide::tokenizer
