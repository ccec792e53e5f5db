// tide::tokenizer::Tokenizer — a HuggingFace-compatible tokenizer loaded from tokenizer.json or
// a BERT vocab.txt.
//
// Contract:
//  - Created by a factory; loading fails (absl::Status naming the component and the file) for any
//    tokenizer.json component tide does not implement, so a result never silently differs from HF.
//  - Immutable after creation: every method is const and thread-safe; share one instance between
//    all threads (e.g. via std::shared_ptr<const Tokenizer>).
//  - Hot path: Encode* write into caller-owned Encoding objects whose vectors keep their capacity,
//    so a reused Encoding costs no heap allocation per token.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "domain/truncation_direction.h"

namespace tide::tokenizer {

enum class TruncationStrategy { kLongestFirst, kOnlyFirst, kOnlySecond };

// Per-call settings. Fields left unset fall back to the tokenizer.json "truncation" block
// (and "padding" block) when it has one, else to no truncation / no padding.
struct EncodeOptions {
  std::optional<size_t> max_length;                 // total length including special tokens
  std::optional<TruncationStrategy> strategy;
  std::optional<TruncationDirection> direction;
  bool truncate = true;                             // false: never truncate (caller checks length)
  bool add_special_tokens = true;
  std::optional<bool> pad_to_max_length;            // pad every encoding to max_length
};

// One encoded sequence (or pair). All three vectors have the same length.
struct Encoding {
  std::vector<int64_t> ids;
  std::vector<int64_t> type_ids;
  std::vector<int64_t> attention_mask;
  // Number of tokens (special tokens included) before truncation; > ids.size() iff truncated.
  size_t untruncated_length = 0;

  void clear() {
    ids.clear();
    type_ids.clear();
    attention_mask.clear();
    untruncated_length = 0;
  }
  size_t size() const { return ids.size(); }
  bool truncated() const { return untruncated_length > ids.size(); }
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Loads tokenizer.json (old and current formats) or a BERT vocab.txt (by extension ".txt";
  // BERT uncased defaults unless `lowercase` says otherwise).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromFile(const std::string& path);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJson(std::string_view json,
                                                             std::string_view source_name);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromVocabTxt(const std::string& path,
                                                                 bool lowercase = true);

  // Encodes one text, or a pair when `pair` is set, applying normalizer, pre-tokenizer, model,
  // truncation, post-processor (special tokens) and padding like HF's Tokenizer::encode.
  virtual absl::Status Encode(std::string_view text, std::optional<std::string_view> pair,
                              const EncodeOptions& options, Encoding* out) const = 0;

  // Encodes (query, doc_i) for every document: the server's hot path. `out` is resized to
  // docs.size(); its elements are reused. The query is normalized and tokenized once.
  virtual absl::Status EncodePairs(std::string_view query, std::span<const std::string_view> docs,
                                   const EncodeOptions& options,
                                   std::vector<Encoding>* out) const = 0;

  // Token ids of `text` without special tokens, truncation or padding (e.g. for BM25 scoring).
  virtual absl::Status Tokenize(std::string_view text, std::vector<int64_t>* ids) const = 0;

  // Whether `id` is a special token (added token with "special": true, e.g. [CLS], <s>, [PAD]).
  virtual bool IsSpecialToken(int64_t id) const { return false; }
  virtual std::optional<int64_t> TokenToId(std::string_view token) const = 0;
  virtual std::optional<std::string> IdToToken(int64_t id) const = 0;
  virtual size_t vocab_size() const = 0;
  virtual int64_t pad_id() const = 0;
  // Special tokens the post-processor adds to a single sequence and to a pair.
  virtual size_t num_special_tokens(bool pair) const = 0;
  // max_length from the tokenizer.json truncation block, if any.
  virtual std::optional<size_t> default_max_length() const = 0;
};

}  // namespace tide::tokenizer
