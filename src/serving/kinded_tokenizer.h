// tide::serving::KindedTokenizer — where the tokenizer library's statuses enter serving: a
// tokenizer::Tokenizer that forwards every call to the one it owns and gives the statuses of
// Encode / EncodePairs / Tokenize an error kind (common/error.h), so that they reach an edge with
// the answer they always had.
//
// Contract:
//  - The tokenizer's request-time errors are INVALID_ARGUMENT (text that is not UTF-8, a
//    truncation the input cannot satisfy): kMalformedRequest (400, "validation"). Any other
//    status from it is a bug or a broken tokenizer file: kInternal (500). A status that carries a
//    kind already keeps it.
//  - Thread safety and lifetime: those of the wrapped tokenizer (read-only after loading).
//  Header-only: one thin forwarding layer, no state beyond the wrapped tokenizer.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace tide::serving {

class KindedTokenizer final : public tokenizer::Tokenizer {
 public:
  explicit KindedTokenizer(std::unique_ptr<const tokenizer::Tokenizer> inner) : inner_(std::move(inner)) {}

  // The kind a tokenizer status gets at the boundary (see the contract above).
  static absl::Status Kinded(absl::Status status) {
    if (status.ok()) return status;
    const ErrorKind kind =
        status.code() == absl::StatusCode::kInvalidArgument ? ErrorKind::kMalformedRequest : ErrorKind::kInternal;
    return EnsureKind(std::move(status), kind);
  }

  absl::Status Encode(std::string_view text, std::optional<std::string_view> pair,
                      const tokenizer::EncodeOptions& options, tokenizer::Encoding* out) const override {
    return Kinded(inner_->Encode(text, pair, options, out));
  }
  absl::Status EncodePairs(std::string_view query, std::span<const std::string_view> docs,
                           const tokenizer::EncodeOptions& options,
                           std::vector<tokenizer::Encoding>* out) const override {
    return Kinded(inner_->EncodePairs(query, docs, options, out));
  }
  absl::Status Tokenize(std::string_view text, std::vector<int64_t>* ids) const override {
    return Kinded(inner_->Tokenize(text, ids));
  }
  bool IsSpecialToken(int64_t id) const override { return inner_->IsSpecialToken(id); }
  std::optional<int64_t> TokenToId(std::string_view token) const override { return inner_->TokenToId(token); }
  std::optional<std::string> IdToToken(int64_t id) const override { return inner_->IdToToken(id); }
  size_t vocab_size() const override { return inner_->vocab_size(); }
  int64_t pad_id() const override { return inner_->pad_id(); }
  size_t num_special_tokens(bool pair) const override { return inner_->num_special_tokens(pair); }
  std::optional<size_t> default_max_length() const override { return inner_->default_max_length(); }

 private:
  std::unique_ptr<const tokenizer::Tokenizer> inner_;
};

}  // namespace tide::serving
