// tide::grpc_edge tei.v1 protobuf conversions — TEI's gRPC rerank, predict, tokenize and decode messages as the
// api:: requests the HTTP edge parses from JSON (same fields, same checks, same error words), and
// scores as a RerankResponse.
//
// Contract:
//  - Pure functions (RerankStreamCollector: one object per stream, one thread at a time); never
//    throw; safe on any message (fuzz/grpc_fuzz.cc).
//  - Errors are kFailedPrecondition (422 / INVALID_ARGUMENT) naming the field, as
//    api::ParseRerankRequest: an empty query, no texts, more than max_documents texts, a text or
//    query over max_text_chars; EncodeRequest: an input over max_text_chars, a prompt_name (tide
//    has no prompts). An empty EncodeRequest.inputs is tokenized (TEI does the same).
//  - truncation_direction: proto3 cannot tell RIGHT (0) from "not given", so RIGHT means the
//    model's truncation_direction (right unless its config.pbtxt says left), as an HTTP request
//    without the field; LEFT is explicit. `truncate` is taken as sent (proto3 default false: an
//    over-long input is refused, as in TEI).
//  - `instruction` (tide's extension on RerankRequest, RerankStreamRequest's first message and
//    PredictPairRequest, field 1000): a decoder-only reranker's instruction, at most
//    max_text_chars; unset: the model's default_instruction.
//  - RerankResponseToProto ranks by score, highest first, ties in request order; kInternal for a
//    score that is not finite or a count that differs from the texts'.
//  - Predict: one input (PredictRequest.inputs) or one pair (PredictPairRequest.inputs: exactly
//    two strings, else kFailedPrecondition), each over max_text_chars refused; truncate and
//    truncation_direction as for Rerank. Decode: no ids -> kEmpty (INVALID_ARGUMENT), more than
//    max_batch_tensor_elements ids -> kFailedPrecondition, as api::ParseDecodeRequest.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/request_limits.h"
#include "api/embed.h"
#include "api/rerank.h"
#include "api/tei_decode.h"
#include "api/tei_info.h"
#include "api/tei_predict.h"
#include "api/tokenize.h"
#include "tei.pb.h"

namespace tide::grpc_edge {

absl::StatusOr<api::RerankRequest> RerankRequestFromProto(const tei::v1::RerankRequest& request,
                                                          const api::RequestLimits& limits);

// RerankStream: every message adds one text; the first message's query and options hold for all.
class RerankStreamCollector {
 public:
  explicit RerankStreamCollector(const api::RequestLimits& limits) : limits_(limits) {}
  // kFailedPrecondition for a text over max_text_chars, a text beyond max_documents, or a
  // message after the first whose query differs.
  absl::Status Add(const tei::v1::RerankStreamRequest& message);
  // The whole request (the same checks as RerankRequestFromProto: no messages -> no texts).
  absl::StatusOr<api::RerankRequest> Finish();

 private:
  api::RequestLimits limits_;
  bool started_ = false;
  tei::v1::RerankRequest request_;
};

absl::StatusOr<api::TokenizeRequest> TokenizeRequestFromProto(const tei::v1::EncodeRequest& request,
                                                              const api::RequestLimits& limits);

absl::StatusOr<api::PredictRequest> PredictRequestFromProto(const tei::v1::PredictRequest& request,
                                                            const api::RequestLimits& limits);
absl::StatusOr<api::PredictRequest> PredictRequestFromProto(const tei::v1::PredictPairRequest& request,
                                                            const api::RequestLimits& limits);
// Embed: one input (an empty one is TEI's Empty), truncate as sent (proto3: false unless set, as in
// TEI's gRPC API), normalize / prompt_name / dimensions when present.
absl::StatusOr<api::EmbedRequest> EmbedRequestFromProto(const tei::v1::EmbedRequest& request,
                                                        const api::RequestLimits& limits);
// EmbedAll: one input as Embed's (no normalize or dimensions: the states are raw).
absl::StatusOr<api::EmbedRequest> EmbedAllRequestFromProto(const tei::v1::EmbedAllRequest& request,
                                                           const api::RequestLimits& limits);
absl::StatusOr<api::DecodeRequest> DecodeRequestFromProto(const tei::v1::DecodeRequest& request,
                                                          const api::RequestLimits& limits);

struct RerankAccounting {
  uint32_t compute_chars = 0;
  uint32_t compute_tokens = 0;
  uint64_t total_time_ns = 0;
  uint64_t tokenization_time_ns = 0;
  uint64_t queue_time_ns = 0;
  uint64_t inference_time_ns = 0;
};

absl::Status RerankResponseToProto(const api::RerankRequest& request, std::span<const float> scores,
                                   const RerankAccounting& accounting, tei::v1::RerankResponse* out);

// TEI's Metadata from the accounting (shared by Rerank and Predict answers).
void MetadataToProto(const RerankAccounting& accounting, tei::v1::Metadata* out);

// GET /info's answer as tei.v1.InfoResponse (model_type EMBEDDING for an embedding model,
// CLASSIFIER for a classifier, else RERANKER;
// numbers above UINT32_MAX are clamped).
void InfoToProto(const api::TeiInfo& info, tei::v1::InfoResponse* out);

// One input's tokens (POST /tokenize's) as an EncodeResponse: id, text, special, and start / stop
// when the token's offsets are known.
void TokensToProto(const std::vector<api::TokenInfo>& tokens, tei::v1::EncodeResponse* out);

}  // namespace tide::grpc_edge
