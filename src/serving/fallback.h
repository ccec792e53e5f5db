// tide::serving fallback — what a model answers while its circuit breaker is open:
//  - a reranker: BM25 over the request's own documents, tokenized with the model's own tokenizer
//    (no special tokens);
//  - a classifier (task "classify"): its configured default result (the breaker_default_result
//    parameter, one logit per label) for every input, or nothing (the edge answers 503).
//
// Contract: thread-safe (each thread keeps its own scorer and buffers, reused across calls); BM25
// scores are BM25 values (>= 0, higher is more relevant), not probabilities. Errors come only from
// the tokenizer (invalid UTF-8: INVALID_ARGUMENT).
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "serving/inference_request.h"
#include "tokenizer/tokenizer.h"

namespace tide::serving {

// The value of the x-tide-degraded header and of the `fallback` label of
// tide_degraded_responses_total.
inline constexpr char kFallbackBm25[] = "bm25";
inline constexpr char kFallbackDefault[] = "default";

absl::Status Bm25Scores(const tokenizer::Tokenizer& tokenizer, std::string_view query,
                        std::span<const std::string_view> documents, std::vector<float>* scores);

// `rows` copies of a classifier's default logits row, shaped like a model's result (no tokens, zero
// timings), so that it renders through the same code as a real one. `logits_row` must not be empty.
InferenceResult DefaultResult(std::span<const float> logits_row, int64_t rows);

}  // namespace tide::serving
