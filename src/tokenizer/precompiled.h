// Precompiled normalizer: SentencePiece's `precompiled_charsmap` (a Darts double-array trie over
// UTF-8 byte sequences plus a blob of NUL-terminated replacement strings), applied the way
// HuggingFace's `Precompiled` normalizer applies it.
//
// Contract:
//  - PrecompiledCharsmap::Parse copies the blob; it returns INVALID_ARGUMENT for a blob that is
//    truncated, has a trie size that is not a whole number of 32-bit units, or a replacement area
//    that is not UTF-8. Lookups bounds-check every trie index, so even a hostile trie that passed
//    parsing can only produce "no match", never an out-of-bounds read.
//  - Immutable after creation; all methods are const and thread-safe. Normalize allocates only
//    into a thread-local buffer that keeps its capacity.
//  - Input is expected to be valid UTF-8 (the framework validates it); invalid bytes are passed
//    through unchanged, one byte at a time.
//
// Implementation details follow. HF walks the text grapheme by grapheme (extended grapheme
// clusters): a grapheme shorter than 6 bytes whose bytes start with a trie key is replaced as a
// whole by the replacement of the *shortest* matching key (that is what spm_precompiled's
// `transform` returns, quirk included); otherwise each code point is looked up on its own.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/components.h"

namespace tide::tokenizer {

class PrecompiledCharsmap {
 public:
  // `blob` is the decoded (not base64) precompiled_charsmap.
  static absl::StatusOr<PrecompiledCharsmap> Parse(std::string_view blob);

  // The replacement of the shortest trie key that is a prefix of `chunk`, or nullopt.
  std::optional<std::string_view> Transform(std::string_view chunk) const;

 private:
  std::vector<uint32_t> units_;
  std::string normalized_;
};

class PrecompiledNormalizer : public Normalizer {
 public:
  static absl::StatusOr<std::unique_ptr<PrecompiledNormalizer>> Create(std::string_view blob);
  void Normalize(std::string* text) const override;

 private:
  explicit PrecompiledNormalizer(PrecompiledCharsmap charsmap);
  // Appends the HF transformation of one grapheme cluster to `out`.
  void AppendGrapheme(std::string_view grapheme, std::string* out) const;

  PrecompiledCharsmap charsmap_;
  // Replacement for each single ASCII byte (nullopt: unchanged); the common case costs one load.
  std::optional<std::string> ascii_[128];
};

}  // namespace tide::tokenizer
