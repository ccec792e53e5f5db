// The pre-tokenizers of the WordPiece family and the generic splitters (HF `pre_tokenizers`):
// BertPreTokenizer, Whitespace, WhitespaceSplit, Punctuation, Digits and Sequence.
//
// Contract: built by MakePreTokenizer (components.h) from the tokenizer.json object; immutable and
// thread-safe. All of them only split text, so they implement the allocation-free Split fast
// path; Sequence does so when all of its children do. Errors: INVALID_ARGUMENT for malformed
// objects, UNIMPLEMENTED for unknown types or behaviours, naming the component.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/components.h"

namespace tide::tokenizer {

// How a splitter treats the delimiters it finds (HF SplitDelimiterBehavior).
enum class SplitDelimiterBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

absl::StatusOr<SplitDelimiterBehavior> ParseSplitDelimiterBehavior(std::string_view name);

// A byte range of text flagged as delimiter match or not, as HF's Pattern::find_matches yields.
struct SplitSegment {
  uint32_t begin, end;
  bool is_match;
};
// Applies `behavior` to `segments` (which cover a text in order) and appends the non-empty
// resulting ranges, shifted by `base`, to `spans`.
void ApplySplitBehavior(const std::vector<SplitSegment>& segments, SplitDelimiterBehavior behavior,
                        uint32_t base, std::vector<std::pair<uint32_t, uint32_t>>* spans);

// Builds one pre-tokenizer of the WordPiece family / generic set; MakePreTokenizer dispatches the
// SentencePiece/BPE family (Metaspace, Split, ByteLevel) itself.
absl::StatusOr<std::unique_ptr<PreTokenizer>> MakeWordPieceFamilyPreTokenizer(const nlohmann::json& json);

}  // namespace tide::tokenizer
