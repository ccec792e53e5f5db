// tide::api embedding wire formats — TEI `POST /embed`, OpenAI `POST /v1/embeddings` and Cohere v2
// `POST /v2/embed`, decoded into one EmbedRequest, and their answers and error bodies.
//
// TEI /embed
//   Request:  {"inputs": str | [str, ...], "normalize"?: bool, "truncate"?: bool,
//              "truncation_direction"?: "Left" | "Right", "prompt_name"?: str, "dimensions"?: int}
//   Response: [[f, ...], ...] (one vector per input, also for a single string, as TEI answers)
//   Errors:   tide's (TEI's) {"error": str, "error_type": str} with the kind's status.
// TEI /embed_all
//   Request:  {"inputs": str | [str, ...], "truncate"?: bool, "truncation_direction"?: "Left" |
//              "Right", "prompt_name"?: str} (normalize and dimensions are not its fields: ignored)
//   Response: [[[f, ...] (one per token, special tokens included), ...] (one per input), ...]
// OpenAI /v1/embeddings
//   Request:  {"input": str | [str, ...] | [int, ...] | [[int, ...], ...], "model"?: str,
//              "encoding_format"?: "float" | "base64", "dimensions"?: int, "user"?: str}
//             (token arrays are the model's token ids, fed as they are: no special tokens added)
//   Response: {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [f...] |
//              "<base64 of little-endian float32>"}], "model": str,
//              "usage": {"prompt_tokens": n, "total_tokens": n}}
//   Errors:   {"error": {"message": str, "type": str, "param": str | null, "code": str | null}};
//             a request the server refuses as invalid (400, 413, 422 elsewhere) is 400
//             "invalid_request_error", as OpenAI answers; other kinds keep their status.
// Cohere v2 /v2/embed
//   Request:  {"texts": [str, ...], "model"?: str, "input_type"?: "search_document" |
//              "search_query" | "classification" | "clustering", "embedding_types"?: ["float" |
//              "int8" | "uint8" | "binary" | "ubinary", ...], "truncate"?: "NONE" | "START" | "END",
//              "output_dimension"?: int}
//   Response: {"id": str, "embeddings": {"<type>": [[...], ...], ...}, "texts": [str, ...],
//              "meta": {"api_version": {"version": "2"}, "billed_units": {"input_tokens": n}},
//              "response_type": "embeddings_by_type"}
//   Errors:   {"message": str}; invalid requests 400, other kinds keep their status.
//
// Contract:
//  - Pure functions, thread-safe, never throw.
//  - Parse errors: JSON syntax -> kMalformedRequest (400); an empty input list (or a missing one) ->
//    kEmpty (400); wrong types, an empty token array, more than max_documents inputs
//    (max_client_batch_size), a text over max_text_chars, dimensions < 1, an unknown
//    encoding_format / embedding_type / input_type / truncate -> kInvalidInput (422). Whether
//    `dimensions` fits the model is the serving side's question. Unknown fields are ignored;
//    null means "not given".
//  - Renderers take the served vectors [inputs, dim] row-major (cut and normalized already,
//    api/embedding_vectors.h); kInternal when the shapes disagree.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/embedding_vectors.h"
#include "api/request_limits.h"
#include "domain/truncation_direction.h"

namespace tide::api {

enum class EmbedApi { kTei, kOpenAi, kCohere };

struct EmbedInput {
  std::string text;
  std::optional<std::vector<int64_t>> ids;  // OpenAI token arrays: the model's ids, as they are
};

struct EmbedRequest {
  EmbedApi api = EmbedApi::kTei;
  std::vector<EmbedInput> inputs;  // never empty after a successful parse
  std::optional<std::string> model;  // OpenAI / Cohere: the model to route to (unset: the default)
  std::optional<bool> normalize;     // unset: the model's normalize parameter
  std::optional<bool> truncate;      // unset: truncate (tide's auto_truncate)
  std::optional<tokenizer::TruncationDirection> truncation_direction;
  std::optional<std::string> prompt_name;  // TEI prompt_name; Cohere input_type's (see PromptNamesFor)
  std::optional<size_t> dimensions;        // unset: the model's dimension
  bool base64 = false;                     // OpenAI encoding_format "base64"
  std::vector<EmbeddingType> embedding_types;  // Cohere; empty: float
  std::optional<std::string> input_type;       // Cohere, as sent
};

absl::StatusOr<EmbedRequest> ParseTeiEmbedRequest(std::string_view body, const RequestLimits& limits = {});
absl::StatusOr<EmbedRequest> ParseTeiEmbedAllRequest(std::string_view body, const RequestLimits& limits = {});
absl::StatusOr<EmbedRequest> ParseOpenAiEmbeddingsRequest(std::string_view body, const RequestLimits& limits = {});
absl::StatusOr<EmbedRequest> ParseCohereEmbedRequest(std::string_view body, const RequestLimits& limits = {});

// The prompt names a Cohere input_type looks for, in order (the first the model has is used):
// search_query -> query; search_document -> document, passage; classification, clustering ->
// their own name.
std::vector<std::string> PromptNamesFor(std::string_view input_type);

// vectors: [request.inputs.size(), dim].
absl::StatusOr<std::string> RenderTeiEmbedResponse(size_t inputs, std::span<const float> vectors, size_t dim);
// states: one [tokens, hidden] row-major block per input (kInternal when one is not whole rows).
absl::StatusOr<std::string> RenderTeiEmbedAllResponse(std::span<const std::vector<float>> states, size_t hidden);
absl::StatusOr<std::string> RenderOpenAiEmbeddingsResponse(const EmbedRequest& request, std::string_view model,
                                                           std::span<const float> vectors, size_t dim,
                                                           size_t prompt_tokens);
absl::StatusOr<std::string> RenderCohereEmbedResponse(const EmbedRequest& request, std::string_view id,
                                                      std::span<const float> vectors, size_t dim,
                                                      size_t input_tokens);

// The imitated API's error answer for `status`: its HTTP status and body (TEI's is tide's own
// http::ErrorResponse, not here).
struct ApiError {
  int http_status = 500;
  std::string body;
};
ApiError OpenAiError(const absl::Status& status);
ApiError CohereError(const absl::Status& status);

}  // namespace tide::api
