// ByteLevel pre-tokenizer (GPT-2 / RoBERTa): optional leading space, the GPT-2 split regex, then
// every byte of each piece rewritten as one printable code point (GPT-2's bytes_to_unicode).
//
// Contract:
//  - Options from tokenizer.json: add_prefix_space (default true), use_regex (default true),
//    trim_offsets (default true; offsets only, no effect on ids). Unknown extra fields are ignored.
//  - add_prefix_space applies to every piece the pre-tokenizer receives (HF applies it per split).
//  - Immutable and thread-safe; reuses thread-local buffers.
//  - The regex step needs valid UTF-8 (the framework guarantees it); other bytes are still mapped.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "tokenizer/components.h"
#include "tokenizer/split.h"

namespace tide::tokenizer {

// GPT-2's byte-to-code-point table, as UTF-8: printable Latin-1 bytes map to themselves, the other
// 68 bytes to U+0100.. in byte order.
const std::string& ByteLevelChar(unsigned char byte);
// Appends the byte-level rewrite of `bytes` to `out`.
void AppendByteLevel(std::string_view bytes, std::string* out);

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  struct Options {
    bool add_prefix_space = true;
    bool use_regex = true;
    bool trim_offsets = true;  // offsets only; kept so the configuration round-trips
  };
  static absl::StatusOr<std::unique_ptr<ByteLevelPreTokenizer>> Create(const Options& options);
  void PreTokenize(Pieces* pieces, Pieces* scratch) const override;

 private:
  explicit ByteLevelPreTokenizer(Options options) : options_(options) {}
  Options options_;
  std::unique_ptr<Regex> regex_;
};

// The split pattern of GPT-2 that HF's ByteLevel uses.
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace tide::tokenizer
