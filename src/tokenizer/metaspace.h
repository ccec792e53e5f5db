// Metaspace pre-tokenizer (SentencePiece-style): replaces every ASCII space with a replacement
// character (usually U+2581 "▁"), optionally prepends one, and splits before each replacement.
//
// Contract:
//  - Accepts both tokenizer.json forms, resolved as HF tokenizers 0.23 does: a declared
//    `prepend_scheme` ("always" | "never" | "first") wins; `add_prefix_space` alone maps
//    true -> "always", false -> "never"; add_prefix_space=false with a scheme other than "never"
//    is INVALID_ARGUMENT (HF refuses to load it). Neither: "always". `split` defaults to true.
//    `replacement` must be exactly one character; INVALID_ARGUMENT otherwise.
//  - Scheme "first" prepends only to the piece that starts the original text (HF checks that the
//    piece's original offset is 0). PreTokenize assumes `(*pieces)[0]` starts the text; a caller
//    pre-tokenizing a section that does not (e.g. the text after a leading added token) must call
//    PreTokenizeSections(pieces, scratch, /*first_section_starts_text=*/false) instead.
//    Known gap: inside a Sequence after a splitter that drops leading whitespace, HF's first piece
//    is not at offset 0 and gets no prefix, while tide prepends to it.
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
