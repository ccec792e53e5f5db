// tide::tokenizer token text — from vocabulary pieces back to text: Decode (TEI's /decode) and
// AlignTokens (TEI's /tokenize offsets, where each token's text is the input's own substring).
//
// Contract:
//  - Pure functions over a Tokenizer's IdToToken / IsSpecialToken; thread-safe; never fail.
//  - tide's tokenizers do not track offsets, so both work from the pieces, recognising the three
//    piece conventions by their marks: WordPiece continuations ("##fe" joins the previous word),
//    SentencePiece/Metaspace ("▁" is a space) and GPT-2 byte-level ("Ġ" is a space; every piece
//    maps back to raw bytes). A piece with none of these marks is a word of its own (WordPiece).
//  - Decode: skip_special_tokens drops special tokens (IsSpecialToken); the WordPiece cleanup of
//    HF's decoder is applied (" ." -> ".", " n't" -> "n't", ...). An id outside the vocabulary
//    decodes to nothing. Invalid UTF-8 from byte-level pieces is kept as is (the renderer
//    replaces it).
//  - AlignTokens: finds each non-special piece in `text` from left to right, skipping whitespace,
//    comparing ASCII letters without case. A piece the text does not spell as such (accents
//    stripped, Unicode normalisation) is unaligned; a run of exactly one unaligned piece between
//    two aligned ones (or the end) gets the gap between them. A special token the text itself
//    spells where the tokenizer found it (an added token such as `<|im_start|>` in a decoder's
//    prompt, a literal `[SEP]` in an input) takes that place, exactly as written, and the next
//    piece is looked for after it; one the tokenizer added ([CLS], [SEP] around a pair) has no
//    offsets, nor do unaligned pieces. Offsets are byte offsets into `text`, [start, stop).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace tide::tokenizer {

std::string Decode(const Tokenizer& tokenizer, std::span<const int64_t> ids, bool skip_special_tokens);

// The text a piece stands for ("##fe" -> "fe", "▁the" -> " the", "Ġthe" -> " the").
std::string PieceText(std::string_view piece);

using TokenSpan = std::optional<std::pair<size_t, size_t>>;  // [start, stop) in bytes

// One span per piece; special[i]: piece i is a special token (aligned only where the text spells it).
std::vector<TokenSpan> AlignTokens(std::string_view text, std::span<const std::string> pieces,
                                   const std::vector<bool>& special);

}  // namespace tide::tokenizer
