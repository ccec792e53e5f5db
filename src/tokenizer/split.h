// Split pre-tokenizer (HF `Split`) and the regex matcher that ByteLevel shares with it.
//
// Contract:
//  - Pattern {"String": s} matches s literally (non-overlapping, left to right);
//    {"Regex": r} is compiled with PCRE2 in UTF + UCP mode (JIT when available). HF compiles with
//    Oniguruma; for the patterns tokenizers use (GPT-2/Llama-3/Qwen splits: \p{L}, \p{N}, \s,
//    lookahead, possessive/lazy quantifiers, (?i:)) both agree. Known differences: Oniguruma-only
//    syntax such as \h (hex digit in Oniguruma, horizontal space in PCRE2) and the Unicode version
//    of property tables. A pattern PCRE2 rejects gives INVALID_ARGUMENT.
//  - behavior: Removed | Isolated | MergedWithPrevious | MergedWithNext | Contiguous; invert
//    swaps matches and non-matches before the behavior applies. Empty pieces are dropped.
//  - Immutable and thread-safe; per-thread PCRE2 match data and JIT stack are reused.
//  - Text that is not valid UTF-8 (which the framework never passes) yields no regex matches.
//    Should PCRE2 hit a resource limit mid-text (JIT stack capped at 16 MiB per thread; not
//    reached by the tokenizer patterns even on 10k-character runs), the rest of the text is
//    treated as one non-match rather than read past.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/components.h"

namespace tide::tokenizer {

// A compiled PCRE2 pattern. Thread-safe.
class Regex {
 public:
  static absl::StatusOr<std::unique_ptr<Regex>> Compile(std::string_view pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends [begin, end) byte ranges of successive matches in `text` (empty matches included,
  // never two at the same position; an empty match right after a match is skipped, as the Rust
  // regex and onig iterators do).
  void FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>* matches) const;

 private:
  Regex() = default;
  void* code_ = nullptr;  // pcre2_code_8*
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Splits `text` by `matches` (sorted, non-overlapping [begin,end) ranges) with HF's
// SplitDelimiterBehavior, appending the byte ranges of the non-empty pieces to `spans`.
// `invert` swaps the roles of matches and the text between them.
void SplitSpansByMatches(size_t text_size, const std::vector<std::pair<size_t, size_t>>& matches,
                         SplitBehavior behavior, bool invert,
                         std::vector<std::pair<uint32_t, uint32_t>>* spans);

class SplitPreTokenizer : public PreTokenizer {
 public:
  struct Options {
    std::string pattern;
    bool is_regex = false;  // false: `pattern` is a literal string
    SplitBehavior behavior = SplitBehavior::kRemoved;
    bool invert = false;
  };
  static absl::StatusOr<std::unique_ptr<SplitPreTokenizer>> Create(const Options& options);
  void PreTokenize(Pieces* pieces, Pieces* scratch) const override;
  // Split never rewrites text, so it offers the span fast path.
  bool Split(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>* spans) const override;

 private:
  explicit SplitPreTokenizer(Options options) : options_(std::move(options)) {}
  Options options_;
  std::unique_ptr<Regex> regex_;  // null for a literal pattern
};

}  // namespace tide::tokenizer
