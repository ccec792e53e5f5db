// tide::api Cohere/Jina rerank wire format — `POST /v1/rerank` (Cohere v1, Jina) and
// `POST /v2/rerank` (Cohere v2, vLLM). One format: the two versions differ only in meta's
// api_version (Cohere v2 dropped return_documents and rank_fields from its documentation, but its
// SDKs still send them, so both versions accept both).
//
// Request:  {"model"?: str, "query": str, "documents": [str | {...}, ...],
//            "top_n"?: int >= 1, "return_documents"?: bool, "max_tokens_per_doc"?: int >= 1,
//            "rank_fields"?: [str, ...]}
// Response: {"id": str, "model": str,
//            "results": [{"index": i, "relevance_score": s, "document"?: {...}}, ...],
//            "usage": {"total_tokens": n},
//            "meta": {"api_version": {"version": "1"|"2"}, "billed_units": {"search_units": n}}}
//           results sorted by relevance_score, highest first, cut to top_n.
//
// Documents: a string is the text scored; an object is scored on its "text" field, or, with
// rank_fields, on the named fields in that order, each as a line "field: value" (a non-string
// value as its JSON), as Cohere does for structured documents. A returned document is the
// object as sent, every field kept ({"text": str} for a string document).
// return_documents: default false (Cohere's) unless "model" starts with "jina" (Jina's default is
// true; tide routes on "model", so this applies to a model served under a Jina name).
// search_units: one per started 100 documents (Cohere bills a search as one unit per 100
// documents; tide bills nothing, the field is there for clients that read it).
//
// Contract:
//  - Pure functions, thread-safe, never throw.
//  - Parse errors: JSON syntax -> kInvalidArgument (400); empty documents -> kEmpty (400, TEI's
//    Empty); empty query, missing documents, a document that is neither a string nor an object,
//    an object without "text" (no rank_fields) or without any of rank_fields, an empty or
//    non-string rank_fields entry, top_n or
//    max_tokens_per_doc < 1, wrong types, limits (max_documents, max_text_chars, max_json_depth)
//    -> kFailedPrecondition (422). Unknown fields are ignored; null means "not given".
//  - top_n larger than the number of documents returns every document (as Cohere does).
//  - max_tokens_per_doc is parsed and handed to the serving layer, which truncates each document
//    to that many tokens (tide always truncates on this endpoint, as Cohere does).
//  - RenderCohereRerankResponse: scores[i] belongs to documents[i]; kInternal when the counts
//    differ or a score is not finite. Ties keep the request order.
#pragma once

#include "domain/long_documents_mode.h"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "api/request_limits.h"

namespace tide::api {

enum class CohereApiVersion { kV1, kV2 };

struct CohereRerankRequest {
  CohereApiVersion api_version = CohereApiVersion::kV1;
  std::optional<std::string> model;  // echoed back; the serving layer may route on it
  std::string query;
  std::vector<std::string> documents;  // the text scored per document (see rank_fields above)
  // Per document: its JSON object as sent (compact), or "" for a string document.
  std::vector<std::string> document_objects;
  std::optional<size_t> top_n;         // unset: return every document
  bool return_documents = false;       // echo each document in its result
  std::optional<size_t> max_tokens_per_doc;
  std::vector<std::string> rank_fields;  // empty: objects are scored on "text"
  // tide's extension: "truncate" | "chunk_max" | "chunk_mean"; unset: the model's parameter.
  std::optional<LongDocuments> long_documents;
  // A decoder-only reranker's instruction (tide's extension; see api/rerank.h).
  std::optional<std::string> instruction;
};

// What the serving layer knows after scoring.
struct CohereRerankResponseInfo {
  std::string id;          // request id (e.g. a UUID or counter the serving layer assigns)
  std::string model;       // name of the model that scored
  size_t total_tokens = 0; // tokens fed to the model over all (query, document) pairs
  bool degraded = false;   // scores from a fallback (breaker open): adds "degraded": true at the top
};

absl::StatusOr<CohereRerankRequest> ParseCohereRerankRequest(
    std::string_view body, const RequestLimits& limits = {},
    CohereApiVersion api_version = CohereApiVersion::kV1);

absl::StatusOr<std::string> RenderCohereRerankResponse(const CohereRerankRequest& request,
                                                       std::span<const float> scores,
                                                       const CohereRerankResponseInfo& info);

}  // namespace tide::api
