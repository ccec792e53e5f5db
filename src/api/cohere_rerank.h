// tide::api Cohere/Jina rerank wire format — `POST /v1/rerank`.
//
// Request:  {"model"?: str, "query": str, "documents": [str | {"text": str}, ...],
//            "top_n"?: int >= 1, "return_documents": false, "max_tokens_per_doc"?: int >= 1}
// Response: {"id": str, "model": str,
//            "results": [{"index": i, "relevance_score": s, "document"?: {"text": str}}, ...],
//            "usage": {"total_tokens": n}}
//           results sorted by relevance_score, highest first, cut to top_n.
//
// Contract:
//  - Pure functions, thread-safe, never throw.
//  - Parse errors: JSON syntax -> kInvalidArgument (400); empty query, empty or missing
//    documents, a document that is neither a string nor {"text": string}, top_n or
//    max_tokens_per_doc < 1, wrong types, limits (max_documents, max_text_chars, max_json_depth)
//    -> kFailedPrecondition (422). Unknown fields are ignored; null means "not given".
//  - top_n larger than the number of documents returns every document (as Cohere does).
//  - max_tokens_per_doc is parsed and handed to the serving layer, which truncates each document
//    to that many tokens (tide always truncates on this endpoint, as Cohere does).
//  - RenderCohereRerankResponse: scores[i] belongs to documents[i]; kInternal when the counts
//    differ or a score is not finite. Ties keep the request order.
#pragma once

#include "common/long_documents.h"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "api/request_limits.h"

namespace tide::api {

struct CohereRerankRequest {
  std::optional<std::string> model;  // echoed back; the serving layer may route on it
  std::string query;
  std::vector<std::string> documents;  // {"text": ...} objects are flattened to their text
  std::optional<size_t> top_n;         // unset: return every document
  bool return_documents = false;       // echo {"text": ...} in each result
  std::optional<size_t> max_tokens_per_doc;
  // tide's extension: "truncate" | "chunk_max" | "chunk_mean"; unset: the model's parameter.
  std::optional<LongDocuments> long_documents;
};

// What the serving layer knows after scoring.
struct CohereRerankResponseInfo {
  std::string id;          // request id (e.g. a UUID or counter the serving layer assigns)
  std::string model;       // name of the model that scored
  size_t total_tokens = 0; // tokens fed to the model over all (query, document) pairs
  bool degraded = false;   // scores from a fallback (breaker open): adds "degraded": true at the top
};

absl::StatusOr<CohereRerankRequest> ParseCohereRerankRequest(std::string_view body,
                                                             const RequestLimits& limits = {});

absl::StatusOr<std::string> RenderCohereRerankResponse(const CohereRerankRequest& request,
                                                       std::span<const float> scores,
                                                       const CohereRerankResponseInfo& info);

}  // namespace tide::api
