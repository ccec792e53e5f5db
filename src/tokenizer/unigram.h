// Unigram model (SentencePiece unigram language model), reproducing HF tokenizers' `Unigram`.
//
// Contract:
//  - Create takes vocab [[piece, score], ...], unk_id and byte_fallback. INVALID_ARGUMENT for an
//    empty vocab, an unk_id outside it, or a malformed entry; UNIMPLEMENTED for unk_id null
//    (HF then fails at encode time on any unknown character, which tide's void Tokenize cannot
//    report, so tide refuses the model at load time instead).
//  - Immutable and thread-safe. Tokenize allocates nothing per token: the Viterbi lattice lives in
//    thread-local buffers that keep their capacity.
//  - Tokenize accepts any bytes: an invalid UTF-8 byte is a one-byte unknown character.
//
// Implementation details follow. Like HF: every vocab piece (special pieces included) goes into
// the trie; the best path maximises the sum of piece scores; a character no piece of its own length
// covers gets an unknown node scored min_score - 10; consecutive unknown nodes are fused (HF's
// Unigram always fuses) and the fused string is looked up again, then byte fallback (<0xXX>), then
// unk_id. Ties keep the first candidate found (shorter pieces first, left to right).
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

// A byte trie over the vocabulary, flattened into arrays (children of a node are a contiguous,
// label-sorted edge range; the root has a direct 256-entry table).
class PieceTrie {
 public:
  // `keys[i]` maps to `values[i]`; keys may repeat (the last value wins).
  void Build(const std::vector<std::string_view>& keys, const std::vector<int32_t>& values);

  // Calls fn(length, value) for each key that is a prefix of `text`, shortest first.
  template <typename Fn>
  void CommonPrefixSearch(std::string_view text, Fn&& fn) const {
    if (text.empty() || root_[static_cast<unsigned char>(text[0])] < 0) return;
    uint32_t node = static_cast<uint32_t>(root_[static_cast<unsigned char>(text[0])]);
    for (size_t i = 1;; ++i) {
      if (nodes_[node].value >= 0) fn(i, nodes_[node].value);
      if (i == text.size()) return;
      const uint8_t c = static_cast<uint8_t>(text[i]);
      const Node& n = nodes_[node];
      if (n.dense >= 0) {
        const int32_t child = dense_[static_cast<size_t>(n.dense) * 256 + c];
        if (child < 0) return;
        node = static_cast<uint32_t>(child);
        continue;
      }
      const uint32_t begin = n.first_edge;
      const uint32_t end = begin + n.num_edges;
      uint32_t e = begin;
      while (e < end && labels_[e] < c) ++e;
      if (e == end || labels_[e] != c) return;
      node = targets_[e];
    }
  }

 private:
  struct Node {
    uint32_t first_edge = 0;
    uint32_t num_edges = 0;
    int32_t value = -1;
    int32_t dense = -1;  // row in dense_ for nodes with many children, else -1
  };
  static constexpr uint32_t kDenseMinEdges = 12;
  int32_t root_[256];
  std::vector<Node> nodes_;
  std::vector<uint8_t> labels_;
  std::vector<uint32_t> targets_;
  std::vector<int32_t> dense_;  // 256 child indices (-1: none) per dense node
};

class UnigramModel : public Model {
 public:
  struct Options {
    std::vector<std::pair<std::string, double>> vocab;
    std::optional<int64_t> unk_id;  // required (see contract)
    bool byte_fallback = false;
  };
  static absl::StatusOr<std::unique_ptr<UnigramModel>> Create(Options options);

  void Tokenize(std::string_view piece, std::vector<int64_t>* ids) const override;
  std::optional<int64_t> TokenToId(std::string_view token) const override;
  std::optional<std::string> IdToToken(int64_t id) const override;
  size_t vocab_size() const override { return pieces_.size(); }

 private:
  UnigramModel() = default;
  // Appends the ids for an unknown (fused) span: vocab lookup, byte fallback, then unk_id.
  void AppendUnknown(std::string_view text, std::vector<int64_t>* ids) const;
  void TokenizeUncached(std::string_view piece, std::vector<int64_t>* ids) const;

  std::vector<std::string> pieces_;
  std::vector<double> scores_;
  absl::flat_hash_map<std::string, int32_t> piece_to_id_;
  PieceTrie trie_;
  int32_t unk_id_ = 0;
  double unk_score_ = 0;
  bool byte_fallback_ = false;
  int32_t byte_ids_[256];  // id of "<0xXX>" or -1
  bool all_bytes_ = false;  // every "<0xXX>" exists
  uint64_t cache_owner_ = 0;  // WordCache key
};

}  // namespace tide::tokenizer
