// BPE model (byte-pair encoding), reproducing HF tokenizers' `BPE`.
//
// Contract:
//  - Create takes vocab {token: id}, merges (tokenizer.json "a b" strings or ["a", "b"] pairs, in
//    rank order), unk_token, continuing_subword_prefix, end_of_word_suffix, fuse_unk,
//    byte_fallback, ignore_merges. INVALID_ARGUMENT when a merge names a token (or produces one)
//    that is not in the vocab, or when unk_token is set but not in the vocab; UNIMPLEMENTED for a
//    dropout other than null/0 (random, so no reproducible result).
//  - Immutable and thread-safe. Tokenize works in thread-local buffers (symbol list and merge
//    queue) that keep their capacity: no heap allocation per token.
//  - Characters (or bytes, for invalid UTF-8) missing from the vocab become byte-fallback tokens
//    <0xXX> when enabled and all exist, else unk_token (fused runs when fuse_unk), else are dropped
//    exactly as HF drops them.
//
// Implementation details follow. Merging pops the lowest (rank, position) pair from a binary heap
// and skips stale entries, the algorithm of HF's Word::merge_all, so ties resolve identically.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "tokenizer/components.h"

namespace tide::tokenizer {

class BpeModel : public Model {
 public:
  struct Options {
    std::vector<std::pair<std::string, int64_t>> vocab;
    std::vector<std::pair<std::string, std::string>> merges;  // rank = index
    std::optional<double> dropout;                            // must be null or 0
    std::optional<std::string> unk_token;
    std::string continuing_subword_prefix;  // "" = none
    std::string end_of_word_suffix;         // "" = none
    bool fuse_unk = false;
    bool byte_fallback = false;
    bool ignore_merges = false;  // a piece that is itself in the vocab is one token
  };
  static absl::StatusOr<std::unique_ptr<BpeModel>> Create(Options options);

  void Tokenize(std::string_view piece, std::vector<int64_t>* ids) const override;
  std::optional<int64_t> TokenToId(std::string_view token) const override;
  std::optional<std::string> IdToToken(int64_t id) const override;
  size_t vocab_size() const override { return vocab_.size(); }

 private:
  struct Merge {
    uint32_t rank;
    uint32_t new_id;
  };
  static uint64_t PairKey(uint32_t a, uint32_t b) { return (uint64_t(a) << 32) | b; }
  BpeModel() = default;
  void TokenizeUncached(std::string_view piece, std::vector<int64_t>* ids) const;

  absl::flat_hash_map<std::string, uint32_t> vocab_;
  absl::flat_hash_map<uint32_t, std::string> vocab_r_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
  std::optional<uint32_t> unk_id_;
  std::string prefix_;
  std::string suffix_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  int64_t byte_ids_[256];  // id of "<0xXX>" or -1
  uint64_t cache_owner_ = 0;  // WordCache key
};

}  // namespace tide::tokenizer
