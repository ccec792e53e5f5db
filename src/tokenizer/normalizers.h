// The normalizers of the WordPiece family and the generic ones (HF `normalizers`): BertNormalizer,
// NFC/NFD/NFKC/NFKD, Lowercase, Strip, StripAccents, Replace, Prepend and Sequence.
//
// Contract: built by MakeNormalizer (components.h) from the tokenizer.json object; immutable and
// thread-safe; Normalize reuses a per-thread buffer, so steady-state calls do not allocate.
// Errors (from the factories): INVALID_ARGUMENT for malformed objects or bad regexes,
// UNIMPLEMENTED for normalizer types tide does not support, naming the component.
#pragma once

#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "tokenizer/components.h"

namespace tide::tokenizer {

struct BertNormalizerOptions {
  bool clean_text = true;                // drop control chars, map whitespace to ' '
  bool handle_chinese_chars = true;      // surround CJK ideographs with spaces
  std::optional<bool> strip_accents;     // unset: follows `lowercase`
  bool lowercase = true;
};
std::unique_ptr<Normalizer> MakeBertNormalizer(const BertNormalizerOptions& options);

// Builds one normalizer of the WordPiece family / generic set from its JSON object; the
// SentencePiece family (Precompiled) is dispatched by MakeNormalizer itself.
absl::StatusOr<std::unique_ptr<Normalizer>> MakeWordPieceFamilyNormalizer(const nlohmann::json& json);

}  // namespace tide::tokenizer
