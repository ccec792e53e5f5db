#include "server/grpc/tei_proto.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/error.h"
#include "common/status_macros.h"

namespace tide::grpc_edge {

namespace {

absl::Status TooLong(std::string_view field, size_t bytes, const api::RequestLimits& limits) {
  return errors::InvalidInput(absl::StrCat("field '", std::string(field), "' has ", bytes, " bytes; the limit is max_text_chars=",
                                           limits.max_text_chars));
}

absl::Status CheckQuery(const std::string& query, const api::RequestLimits& limits) {
  if (query.empty()) return errors::InvalidInput("field 'query' must not be empty");
  if (query.size() > limits.max_text_chars) return TooLong("query", query.size(), limits);
  return absl::OkStatus();
}

std::optional<tokenizer::TruncationDirection> DirectionFromProto(tei::v1::TruncationDirection d) {
  if (d == tei::v1::TRUNCATION_DIRECTION_LEFT) return tokenizer::TruncationDirection::kLeft;
  return std::nullopt;  // RIGHT is proto3's default: the model's direction (see the header)
}

// tide's `instruction` extension field (decoder-only rerankers): at most max_text_chars.
template <typename Proto>
absl::Status InstructionFromProto(const Proto& proto, const api::RequestLimits& limits,
                                  std::optional<std::string>* out) {
  if (!proto.has_instruction()) return absl::OkStatus();
  if (proto.instruction().size() > limits.max_text_chars) {
    return TooLong("instruction", proto.instruction().size(), limits);
  }
  *out = proto.instruction();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<api::RerankRequest> RerankRequestFromProto(const tei::v1::RerankRequest& proto,
                                                          const api::RequestLimits& limits) {
  TIDE_RETURN_IF_ERROR(CheckQuery(proto.query(), limits));
  if (proto.texts_size() == 0) return errors::InvalidInput("field 'texts' must not be empty");
  if (static_cast<size_t>(proto.texts_size()) > limits.max_documents) {
    return errors::InvalidInput(absl::StrCat("texts has ", proto.texts_size(), " entries; the limit is max_documents=",
                                             limits.max_documents));
  }
  api::RerankRequest request;
  request.query = proto.query();
  request.texts.reserve(proto.texts_size());
  for (int i = 0; i < proto.texts_size(); ++i) {
    if (proto.texts(i).size() > limits.max_text_chars) {
      return TooLong(absl::StrCat("texts[", i, "]"), proto.texts(i).size(), limits);
    }
    request.texts.push_back(proto.texts(i));
  }
  request.truncate = proto.truncate();
  request.raw_scores = proto.raw_scores();
  request.return_text = proto.return_text();
  request.truncation_direction = DirectionFromProto(proto.truncation_direction());
  TIDE_RETURN_IF_ERROR(InstructionFromProto(proto, limits, &request.instruction));
  return request;
}

absl::Status RerankStreamCollector::Add(const tei::v1::RerankStreamRequest& message) {
  if (!started_) {
    started_ = true;
    TIDE_RETURN_IF_ERROR(CheckQuery(message.query(), limits_));
    request_.set_query(message.query());
    request_.set_truncate(message.truncate());
    request_.set_raw_scores(message.raw_scores());
    request_.set_return_text(message.return_text());
    request_.set_truncation_direction(message.truncation_direction());
    if (message.has_instruction()) request_.set_instruction(message.instruction());
  } else if (!message.query().empty() && message.query() != request_.query()) {
    return errors::InvalidInput(absl::StrCat("field 'query' of message ", request_.texts_size(),
                                             " differs from the first message's; one stream ranks against one query"));
  }
  if (static_cast<size_t>(request_.texts_size()) >= limits_.max_documents) {
    return errors::InvalidInput(absl::StrCat("texts has more than ", limits_.max_documents,
                                             " entries; the limit is max_documents=", limits_.max_documents));
  }
  if (message.text().size() > limits_.max_text_chars) {
    return TooLong(absl::StrCat("texts[", request_.texts_size(), "]"), message.text().size(), limits_);
  }
  request_.add_texts(message.text());
  return absl::OkStatus();
}

absl::StatusOr<api::RerankRequest> RerankStreamCollector::Finish() {
  if (!started_) return errors::InvalidInput("field 'texts' must not be empty");
  return RerankRequestFromProto(request_, limits_);
}

absl::StatusOr<api::TokenizeRequest> TokenizeRequestFromProto(const tei::v1::EncodeRequest& proto,
                                                              const api::RequestLimits& limits) {
  if (proto.has_prompt_name()) {
    return errors::InvalidInput("field 'prompt_name': tide's rerankers have no prompts; leave it unset");
  }
  if (proto.inputs().size() > limits.max_text_chars) return TooLong("inputs", proto.inputs().size(), limits);
  api::TokenizeRequest request;
  request.inputs.push_back(api::TokenizeInput{proto.inputs(), std::nullopt});
  request.add_special_tokens = proto.add_special_tokens();
  return request;
}

absl::Status RerankResponseToProto(const api::RerankRequest& request, std::span<const float> scores,
                                   const RerankAccounting& accounting, tei::v1::RerankResponse* out) {
  if (scores.size() != request.texts.size()) {
    return errors::Internal(absl::StrCat(scores.size(), " scores for ", request.texts.size(), " texts"));
  }
  TIDE_ASSIGN_OR_RETURN(const std::vector<size_t> order, api::RankByScore(scores));
  for (size_t i : order) {
    tei::v1::Rank* rank = out->add_ranks();
    rank->set_index(static_cast<uint32_t>(i));
    rank->set_score(scores[i]);
    if (request.return_text) rank->set_text(request.texts[i]);
  }
  MetadataToProto(accounting, out->mutable_metadata());
  return absl::OkStatus();
}

namespace {

template <typename Proto>
absl::StatusOr<api::PredictRequest> PredictOptions(const Proto& proto, api::PredictRequest request) {
  request.truncate = proto.truncate();
  request.raw_scores = proto.raw_scores();
  request.truncation_direction = DirectionFromProto(proto.truncation_direction());
  return request;
}

}  // namespace

absl::StatusOr<api::EmbedRequest> EmbedRequestFromProto(const tei::v1::EmbedRequest& proto,
                                                        const api::RequestLimits& limits) {
  if (proto.inputs().empty()) return errors::Empty("field 'inputs' must not be empty");
  if (proto.inputs().size() > limits.max_text_chars) return TooLong("inputs", proto.inputs().size(), limits);
  api::EmbedRequest request;
  request.api = api::EmbedApi::kTei;
  request.inputs.push_back({proto.inputs(), std::nullopt});
  request.truncate = proto.truncate();
  request.truncation_direction = DirectionFromProto(proto.truncation_direction());
  if (proto.has_normalize()) request.normalize = proto.normalize();
  if (proto.has_prompt_name()) request.prompt_name = proto.prompt_name();
  if (proto.has_dimensions()) {
    if (proto.dimensions() < 1) return errors::InvalidInput("field 'dimensions' must be at least 1");
    request.dimensions = proto.dimensions();
  }
  return request;
}

absl::StatusOr<api::EmbedRequest> EmbedAllRequestFromProto(const tei::v1::EmbedAllRequest& proto,
                                                           const api::RequestLimits& limits) {
  if (proto.inputs().empty()) return errors::Empty("field 'inputs' must not be empty");
  if (proto.inputs().size() > limits.max_text_chars) return TooLong("inputs", proto.inputs().size(), limits);
  api::EmbedRequest request;
  request.api = api::EmbedApi::kTei;
  request.inputs.push_back({proto.inputs(), std::nullopt});
  request.truncate = proto.truncate();
  request.truncation_direction = DirectionFromProto(proto.truncation_direction());
  if (proto.has_prompt_name()) request.prompt_name = proto.prompt_name();
  return request;
}

absl::StatusOr<api::PredictRequest> PredictRequestFromProto(const tei::v1::PredictRequest& proto,
                                                            const api::RequestLimits& limits) {
  if (proto.inputs().size() > limits.max_text_chars) return TooLong("inputs", proto.inputs().size(), limits);
  api::PredictRequest request;
  request.inputs.push_back({proto.inputs(), std::nullopt});
  return PredictOptions(proto, std::move(request));
}

absl::StatusOr<api::PredictRequest> PredictRequestFromProto(const tei::v1::PredictPairRequest& proto,
                                                            const api::RequestLimits& limits) {
  if (proto.inputs_size() != 2) {
    return errors::InvalidInput(
        absl::StrCat("field 'inputs' must hold one pair (text, text_pair): 2 strings, got ", proto.inputs_size()));
  }
  for (int i = 0; i < 2; ++i) {
    if (proto.inputs(i).size() > limits.max_text_chars) {
      return TooLong(absl::StrCat("inputs[", i, "]"), proto.inputs(i).size(), limits);
    }
  }
  api::PredictRequest request;
  request.inputs.push_back({proto.inputs(0), proto.inputs(1)});
  TIDE_RETURN_IF_ERROR(InstructionFromProto(proto, limits, &request.instruction));
  return PredictOptions(proto, std::move(request));
}

absl::StatusOr<api::DecodeRequest> DecodeRequestFromProto(const tei::v1::DecodeRequest& proto,
                                                          const api::RequestLimits& limits) {
  if (proto.ids_size() == 0) return errors::Empty("field 'ids' must not be empty");
  if (static_cast<size_t>(proto.ids_size()) > limits.max_batch_tensor_elements) {
    return errors::InvalidInput(absl::StrCat("ids has ", proto.ids_size(),
                                             " entries; the limit is max_batch_tensor_elements=",
                                             limits.max_batch_tensor_elements));
  }
  api::DecodeRequest request;
  request.ids.emplace_back(proto.ids().begin(), proto.ids().end());
  request.skip_special_tokens = proto.skip_special_tokens();
  return request;
}

void MetadataToProto(const RerankAccounting& a, tei::v1::Metadata* out) {
  out->set_compute_chars(a.compute_chars);
  out->set_compute_tokens(a.compute_tokens);
  out->set_total_time_ns(a.total_time_ns);
  out->set_tokenization_time_ns(a.tokenization_time_ns);
  out->set_queue_time_ns(a.queue_time_ns);
  out->set_inference_time_ns(a.inference_time_ns);
}

namespace {

uint32_t Clamp32(int64_t v) { return static_cast<uint32_t>(std::clamp<int64_t>(v, 0, UINT32_MAX)); }

}  // namespace

void InfoToProto(const api::TeiInfo& info, tei::v1::InfoResponse* out) {
  out->set_version(info.version);
  out->set_model_id(info.model_id);
  out->set_model_dtype(info.model_dtype);
  out->set_model_type(info.embedding_pooling.has_value() ? tei::v1::MODEL_TYPE_EMBEDDING
                      : info.classifier                   ? tei::v1::MODEL_TYPE_CLASSIFIER
                                                          : tei::v1::MODEL_TYPE_RERANKER);
  out->set_max_concurrent_requests(Clamp32(info.max_concurrent_requests));
  out->set_max_input_length(Clamp32(info.max_input_length));
  out->set_max_batch_tokens(Clamp32(info.max_batch_tokens));
  if (info.max_batch_requests.has_value()) out->set_max_batch_requests(Clamp32(*info.max_batch_requests));
  out->set_max_client_batch_size(Clamp32(info.max_client_batch_size));
  out->set_tokenization_workers(Clamp32(info.tokenization_workers));
}

void TokensToProto(const std::vector<api::TokenInfo>& tokens, tei::v1::EncodeResponse* out) {
  for (const api::TokenInfo& t : tokens) {
    tei::v1::SimpleToken* token = out->add_tokens();
    token->set_id(Clamp32(t.id));
    token->set_text(t.text);
    token->set_special(t.special);
    if (t.start.has_value()) token->set_start(Clamp32(static_cast<int64_t>(*t.start)));
    if (t.stop.has_value()) token->set_stop(Clamp32(static_cast<int64_t>(*t.stop)));
  }
}

}  // namespace tide::grpc_edge
