// tide::serving scoring — the two ends of a rerank request around the model: (query, document)
// pairs to token rows, and logits to relevance scores.
//
// Contract: pure functions of an immutable model; thread-safe.
//  - TokenizePairs encodes every (query, document) pair with truncation to the model's
//    max_sequence_length (LongestFirst, as HF's cross-encoders do). With `truncate` false an input
//    that would need cutting is refused with FAILED_PRECONDITION (HTTP 422) naming the document
//    and the lengths.
//  - RerankScore: the model's relevance logit is its last output label (a 1-label reranker's only
//    one; a 2-label classifier's "positive" one). score_activation sigmoid (default) maps it to
//    0..1, softmax takes the probability of the last label, none returns the logit; raw=true always
//    returns the logit (TEI's raw_scores).
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "serving/inference_request.h"
#include "serving/served_model.h"
#include "tokenizer/tokenizer.h"

namespace tide::serving {

struct PairOptions {
  bool truncate = true;
  // Unset: the model's truncation_direction parameter (right unless config.pbtxt says left).
  std::optional<tokenizer::TruncationDirection> direction;
  // Cohere's max_tokens_per_doc: additionally cut each document to this many tokens.
  std::optional<size_t> max_tokens_per_doc;
};

// `between_chunks`, when set, is called before each chunk of kTokenizeChunkDocuments documents;
// a non-OK status stops tokenizing and is returned (the caller's deadline and client-gone check).
inline constexpr size_t kTokenizeChunkDocuments = 64;
absl::Status TokenizePairs(const ServedModel& model, std::string_view query,
                           std::span<const std::string_view> documents, const PairOptions& options,
                           std::vector<tokenizer::Encoding>* rows,
                           const std::function<absl::Status()>& between_chunks = nullptr);

float RerankScore(const InferenceResult& result, int64_t row, config::ScoreActivation activation, bool raw);

}  // namespace tide::serving
