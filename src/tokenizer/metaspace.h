// Metaspace pre-tokenizer (SentencePiece-style): replaces every ASCII space with a replacement
// character (usually U+2581 "▁"), optionally prepends one, and splits before each replacement.
//
// Contract:
//  - Accepts both tokenizer.json forms, resolved as HF tokenizers 0.23 does: the old
//    `add_prefix_space` bool (true -> prepend "always", false -> "never"; it wins over
//    `prepend_scheme` when both are present) and the new `prepend_scheme`
//    ("always" | "never" | "first", default "always") with `split` (default true).
//    `replacement` must be exactly one character; INVALID_ARGUMENT otherwise.
//  - Scheme "first" prepends only to the first section of the text. HF decides this by the
//    section's offset in the original string (offset 0); the framework passes the sections of one
//    sequence to PreTokenize in order, so tide prepends to `(*pieces)[0]` only, and only when
//    `first_section_starts_text` in the call says the first piece begins the text. Callers that
//    split off a leading added token must use PreTokenizeSections(..., false).
//  - Immutable and thread-safe; no allocation beyond the output pieces.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tokenizer/components.h"

namespace tide::tokenizer {

enum class PrependScheme { kAlways, kNever, kFirst };

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  struct Options {
    std::string replacement = "\xE2\x96\x81";  // U+2581
    PrependScheme prepend_scheme = PrependScheme::kAlways;
    bool split = true;
  };
  static absl::StatusOr<std::unique_ptr<MetaspacePreTokenizer>> Create(const Options& options);

  // Same as PreTokenizeSections(pieces, scratch, /*first_section_starts_text=*/true).
  void PreTokenize(Pieces* pieces, Pieces* scratch) const override;
  void PreTokenizeSections(Pieces* pieces, Pieces* scratch, bool first_section_starts_text) const;

  const Options& options() const { return options_; }

 private:
  explicit MetaspacePreTokenizer(Options options) : options_(std::move(options)) {}
  Options options_;
};

}  // namespace tide::tokenizer
