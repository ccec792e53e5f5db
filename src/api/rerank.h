// tide::api TEI rerank wire format — `POST /rerank`, the shape of text-embeddings-inference.
//
// Request:  {"query": str, "texts": [str, ...], "raw_scores": false, "return_text": false,
//            "truncate": true, "truncation_direction": "Right" | "Left", "instruction"?: str}
// Response: [{"index": i, "score": s, "text"?: str}, ...] sorted by score, highest first.
//
// Contract:
//  - Pure functions, thread-safe, never throw.
//  - ParseRerankRequest errors: JSON syntax -> kInvalidArgument (400); empty query, empty or
//    missing texts, wrong types, a text over max_text_chars, more than max_documents texts, an
//    unknown truncation_direction, JSON deeper than max_json_depth -> kFailedPrecondition (422).
//    Messages name the field. Unknown fields are ignored (as TEI does); null means "not given".
//  - `truncate` defaults to true: tide truncates over-long inputs unless the client opts out; with
//    truncate=false the serving layer answers kFailedPrecondition for an input over the model's
//    max length. `raw_scores` is passed through: the serving layer decides sigmoid vs logits.
//  - RenderRerankResponse takes one score per text (scores[i] belongs to texts[i]) and fails with
//    kInternal when the counts differ or a score is NaN/infinite (JSON cannot carry those).
//    Ties keep the request order.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "api/request_limits.h"
#include "api/json_reader.h"
#include "domain/long_documents_mode.h"
#include "domain/truncation_direction.h"

namespace tide::api {

struct RerankRequest {
  std::string query;
  std::vector<std::string> texts;
  bool raw_scores = false;   // false: the serving layer returns sigmoid(logit)
  bool return_text = false;  // echo each text in the response
  bool truncate = true;      // false: over-long inputs are rejected (422), not cut
  // Unset: the model's `truncation_direction` parameter (default right).
  std::optional<tokenizer::TruncationDirection> truncation_direction;
  // Unset: the model's `long_documents` parameter (default truncate).
  std::optional<LongDocuments> long_documents;
  // A decoder-only reranker's instruction (its prompt_template's {instruction}); unset: the
  // model's default_instruction. A model without the slot answers 422.
  std::optional<std::string> instruction;
};

// The optional "long_documents" field ("truncate" | "chunk_max" | "chunk_mean") of a rerank body
// (TEI and Cohere): 422 for another string or another type.
absl::Status ReadLongDocuments(const ObjectReader& reader, std::optional<LongDocuments>* out);

absl::StatusOr<RerankRequest> ParseRerankRequest(std::string_view body,
                                                 const RequestLimits& limits = {});

// `degraded` (scores from a fallback while the model's breaker is open) adds "degraded": true to
// every result.
absl::StatusOr<std::string> RenderRerankResponse(const RerankRequest& request,
                                                 std::span<const float> scores, bool degraded = false);

// Indices 0..n-1 ordered by score, highest first, ties by index; kInternal if a score is not
// finite. Shared by the rerank renderers.
absl::StatusOr<std::vector<size_t>> RankByScore(std::span<const float> scores);

}  // namespace tide::api
