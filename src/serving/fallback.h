// tide::serving fallback — what a reranker answers while its circuit breaker is open: BM25 over the
// request's own documents, tokenized with the model's own tokenizer (no special tokens).
//
// Contract: thread-safe (each thread keeps its own scorer and buffers, reused across calls); the
// scores are BM25 values (>= 0, higher is more relevant), not probabilities. Errors come only from
// the tokenizer (invalid UTF-8: INVALID_ARGUMENT).
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "tokenizer/tokenizer.h"

namespace tide::serving {

inline constexpr char kFallbackBm25[] = "bm25";

absl::Status Bm25Scores(const tokenizer::Tokenizer& tokenizer, std::string_view query,
                        std::span<const std::string_view> documents, std::vector<float>* scores);

}  // namespace tide::serving
