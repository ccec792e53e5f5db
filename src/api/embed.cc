#include "api/embed.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "api/json_text.h"
#include "absl/strings/str_cat.h"
#include "api/json_reader.h"
#include "api/status_http.h"
#include "common/error.h"
#include "common/status_macros.h"

namespace tide::api {
namespace {

using nlohmann::json;


absl::Status TooManyInputs(std::string_view field, size_t n, const RequestLimits& limits) {
  return errors::InvalidInput(absl::StrCat("batch size ", n, " (", Sv(field), ") is larger than max_client_batch_size ",
                                           limits.max_documents));
}

// A list of strings (or one string when `single` allows it) into `out`.
absl::Status ReadTexts(const json& v, std::string_view field, bool single, const RequestLimits& limits,
                       std::vector<EmbedInput>* out) {
  if (v.is_string() && single) {
    if (v.get_ref<const std::string&>().size() > limits.max_text_chars) {
      return TextTooLong(field, v.get_ref<const std::string&>().size(), limits);
    }
    out->push_back({v.get<std::string>(), std::nullopt});
    return absl::OkStatus();
  }
  if (!v.is_array()) return WrongType(field, single ? "a string or an array of strings" : "an array of strings", v);
  if (v.empty()) return errors::Empty(absl::StrCat("field '", Sv(field), "' must not be empty"));
  if (v.size() > limits.max_documents) return TooManyInputs(field, v.size(), limits);
  out->reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string path = absl::StrCat(Sv(field), "[", i, "]");
    if (!v[i].is_string()) return WrongType(path, "a string", v[i]);
    const std::string& text = v[i].get_ref<const std::string&>();
    if (text.size() > limits.max_text_chars) return TextTooLong(path, text.size(), limits);
    out->push_back({text, std::nullopt});
  }
  return absl::OkStatus();
}

absl::Status ReadDimensions(const ObjectReader& reader, std::string_view field, std::optional<size_t>* out) {
  TIDE_RETURN_IF_ERROR(reader.Size(field, out));
  if (out->has_value() && **out < 1) {
    return errors::InvalidInput(absl::StrCat("field '", Sv(field), "' must be at least 1"));
  }
  return absl::OkStatus();
}

absl::Status ReadModel(const ObjectReader& reader, EmbedRequest* request) {
  if (reader.Find("model") == nullptr) return absl::OkStatus();
  std::string model;
  TIDE_RETURN_IF_ERROR(reader.String("model", false, 1024, &model));
  request->model = std::move(model);
  return absl::OkStatus();
}

absl::Status CheckShape(size_t inputs, std::span<const float> vectors, size_t dim) {
  if (dim == 0 || vectors.size() != inputs * dim) {
    return errors::Internal(absl::StrCat("embedding produced ", vectors.size(), " values for ", inputs,
                                         " inputs of dimension ", dim));
  }
  for (float v : vectors) {
    if (!std::isfinite(v)) return errors::Internal("embedding produced a value that is not finite");
  }
  return absl::OkStatus();
}

json FloatRow(std::span<const float> row) {
  json out = json::array();
  for (float v : row) out.push_back(FloatForJson(v));
  return out;
}

// 400/413/422 -> 400 (OpenAI and Cohere answer an invalid request with 400); the rest as tide's.
int ClientStatus(const absl::Status& status) {
  const int http = HttpStatusFor(status);
  return http == 413 || http == 422 ? 400 : http;
}

// TEI's /embed body; `all`: /embed_all's, which has no normalize or dimensions (ignored as any
// unknown field).
absl::StatusOr<EmbedRequest> ParseTeiBody(std::string_view body, const RequestLimits& limits, bool all) {
  absl::StatusOr<json> parsed = ParseJsonObject(body, limits);
  if (!parsed.ok()) return parsed.status();
  const ObjectReader reader(*parsed, "");
  EmbedRequest request;
  request.api = EmbedApi::kTei;
  const json* inputs = reader.Find("inputs");
  if (inputs == nullptr) return MissingField("inputs");
  TIDE_RETURN_IF_ERROR(ReadTexts(*inputs, "inputs", /*single=*/true, limits, &request.inputs));
  if (!all && reader.Find("normalize") != nullptr) {
    bool normalize = true;
    TIDE_RETURN_IF_ERROR(reader.Bool("normalize", &normalize));
    request.normalize = normalize;
  }
  if (reader.Find("truncate") != nullptr) {
    bool truncate = false;
    TIDE_RETURN_IF_ERROR(reader.Bool("truncate", &truncate));
    request.truncate = truncate;
  }
  TIDE_RETURN_IF_ERROR(ReadTruncationDirection(reader, &request.truncation_direction));
  if (reader.Find("prompt_name") != nullptr) {
    std::string name;
    TIDE_RETURN_IF_ERROR(reader.String("prompt_name", false, 256, &name));
    request.prompt_name = std::move(name);
  }
  if (!all) TIDE_RETURN_IF_ERROR(ReadDimensions(reader, "dimensions", &request.dimensions));
  return request;
}

}  // namespace

absl::StatusOr<EmbedRequest> ParseTeiEmbedRequest(std::string_view body, const RequestLimits& limits) {
  return ParseTeiBody(body, limits, /*all=*/false);
}

absl::StatusOr<EmbedRequest> ParseTeiEmbedAllRequest(std::string_view body, const RequestLimits& limits) {
  return ParseTeiBody(body, limits, /*all=*/true);
}

absl::StatusOr<EmbedRequest> ParseOpenAiEmbeddingsRequest(std::string_view body, const RequestLimits& limits) {
  absl::StatusOr<json> parsed = ParseJsonObject(body, limits);
  if (!parsed.ok()) return parsed.status();
  const ObjectReader reader(*parsed, "");
  EmbedRequest request;
  request.api = EmbedApi::kOpenAi;
  const json* input = reader.Find("input");
  if (input == nullptr) return MissingField("input");
  auto is_ids = [](const json& v) { return v.is_array() && !v.empty() && v[0].is_number_integer(); };
  auto read_ids = [&](const json& v, const std::string& path) -> absl::StatusOr<EmbedInput> {
    if (!v.is_array()) return WrongType(path, "an array of token ids", v);
    if (v.empty()) return errors::InvalidInput(absl::StrCat("field '", path, "' must not be an empty token array"));
    if (v.size() > limits.max_text_chars) return TextTooLong(path, v.size(), limits);
    EmbedInput in;
    in.ids.emplace();
    in.ids->reserve(v.size());
    for (size_t t = 0; t < v.size(); ++t) {
      if (!v[t].is_number_integer() || v[t].get<int64_t>() < 0) {
        return WrongType(absl::StrCat(path, "[", t, "]"), "a non-negative integer token id", v[t]);
      }
      in.ids->push_back(v[t].get<int64_t>());
    }
    return in;
  };
  if (is_ids(*input)) {
    auto in = read_ids(*input, "input");
    if (!in.ok()) return in.status();
    request.inputs.push_back(*std::move(in));
  } else if (input->is_array() && !input->empty() && (*input)[0].is_array()) {
    if (input->size() > limits.max_documents) return TooManyInputs("input", input->size(), limits);
    for (size_t i = 0; i < input->size(); ++i) {
      auto in = read_ids((*input)[i], absl::StrCat("input[", i, "]"));
      if (!in.ok()) return in.status();
      request.inputs.push_back(*std::move(in));
    }
  } else {
    TIDE_RETURN_IF_ERROR(ReadTexts(*input, "input", /*single=*/true, limits, &request.inputs));
  }
  TIDE_RETURN_IF_ERROR(ReadModel(reader, &request));
  if (reader.Find("encoding_format") != nullptr) {
    std::string format;
    TIDE_RETURN_IF_ERROR(reader.String("encoding_format", false, 64, &format));
    if (format == "base64") {
      request.base64 = true;
    } else if (format != "float") {
      return errors::InvalidInput(absl::StrCat("field 'encoding_format' must be \"float\" or \"base64\"; got \"",
                                               format.substr(0, 32), "\""));
    }
  }
  TIDE_RETURN_IF_ERROR(ReadDimensions(reader, "dimensions", &request.dimensions));
  request.truncate = true;
  return request;
}

absl::StatusOr<EmbedRequest> ParseCohereEmbedRequest(std::string_view body, const RequestLimits& limits) {
  absl::StatusOr<json> parsed = ParseJsonObject(body, limits);
  if (!parsed.ok()) return parsed.status();
  const ObjectReader reader(*parsed, "");
  EmbedRequest request;
  request.api = EmbedApi::kCohere;
  const json* texts = reader.Find("texts");
  if (texts == nullptr) return errors::Empty("field 'texts' is required and must not be empty");
  TIDE_RETURN_IF_ERROR(ReadTexts(*texts, "texts", /*single=*/false, limits, &request.inputs));
  TIDE_RETURN_IF_ERROR(ReadModel(reader, &request));
  if (reader.Find("input_type") != nullptr) {
    std::string type;
    TIDE_RETURN_IF_ERROR(reader.String("input_type", false, 64, &type));
    if (type != "search_document" && type != "search_query" && type != "classification" && type != "clustering") {
      return errors::InvalidInput(absl::StrCat("field 'input_type' must be one of search_document, search_query, "
                                               "classification, clustering; got \"", type.substr(0, 32), "\""));
    }
    request.input_type = std::move(type);
  }
  auto types = reader.Array("embedding_types", false);
  if (!types.ok()) return types.status();
  if (*types != nullptr) {
    for (size_t i = 0; i < (*types)->size(); ++i) {
      const json& t = (**types)[i];
      EmbeddingType type;
      if (!t.is_string() || !ParseEmbeddingType(t.get_ref<const std::string&>(), &type)) {
        return errors::InvalidInput(absl::StrCat("embedding_types[", i, "] must be one of float, int8, uint8, "
                                                 "binary, ubinary; got ", t.is_string() ? JsonText(t).substr(0, 34)
                                                                                           : std::string(JsonTypeName(t))));
      }
      bool seen = false;
      for (EmbeddingType e : request.embedding_types) seen = seen || e == type;
      if (!seen) request.embedding_types.push_back(type);
    }
  }
  if (request.embedding_types.empty()) request.embedding_types.push_back(EmbeddingType::kFloat);
  if (reader.Find("truncate") != nullptr) {
    std::string truncate;
    TIDE_RETURN_IF_ERROR(reader.String("truncate", false, 64, &truncate));
    if (truncate == "NONE") {
      request.truncate = false;
    } else if (truncate == "START") {
      request.truncate = true;
      request.truncation_direction = tokenizer::TruncationDirection::kLeft;
    } else if (truncate == "END") {
      request.truncate = true;
      request.truncation_direction = tokenizer::TruncationDirection::kRight;
    } else {
      return errors::InvalidInput(absl::StrCat("field 'truncate' must be NONE, START or END; got \"",
                                               truncate.substr(0, 32), "\""));
    }
  }
  TIDE_RETURN_IF_ERROR(ReadDimensions(reader, "output_dimension", &request.dimensions));
  return request;
}

std::vector<std::string> PromptNamesFor(std::string_view input_type) {
  if (input_type == "search_query") return {"query"};
  if (input_type == "search_document") return {"document", "passage"};
  return {std::string(input_type)};
}

absl::StatusOr<std::string> RenderTeiEmbedResponse(size_t inputs, std::span<const float> vectors, size_t dim) {
  TIDE_RETURN_IF_ERROR(CheckShape(inputs, vectors, dim));
  json out = json::array();
  for (size_t i = 0; i < inputs; ++i) out.push_back(FloatRow(vectors.subspan(i * dim, dim)));
  return JsonText(out);
}

absl::StatusOr<std::string> RenderTeiEmbedAllResponse(std::span<const std::vector<float>> states, size_t hidden) {
  json out = json::array();
  for (size_t i = 0; i < states.size(); ++i) {
    TIDE_RETURN_IF_ERROR(CheckShape(hidden == 0 ? 0 : states[i].size() / hidden, states[i], hidden));
    json tokens = json::array();
    const std::span<const float> row(states[i]);
    for (size_t t = 0; t < row.size() / hidden; ++t) tokens.push_back(FloatRow(row.subspan(t * hidden, hidden)));
    out.push_back(std::move(tokens));
  }
  return JsonText(out);
}

absl::StatusOr<std::string> RenderOpenAiEmbeddingsResponse(const EmbedRequest& request, std::string_view model,
                                                           std::span<const float> vectors, size_t dim,
                                                           size_t prompt_tokens) {
  const size_t n = request.inputs.size();
  TIDE_RETURN_IF_ERROR(CheckShape(n, vectors, dim));
  json data = json::array();
  for (size_t i = 0; i < n; ++i) {
    const auto row = vectors.subspan(i * dim, dim);
    data.push_back({{"object", "embedding"},
                    {"index", i},
                    {"embedding", request.base64 ? json(Base64Floats(row)) : FloatRow(row)}});
  }
  json out = {{"object", "list"},
              {"data", std::move(data)},
              {"model", std::string(model)},
              {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
  return JsonText(out);
}

absl::StatusOr<std::string> RenderCohereEmbedResponse(const EmbedRequest& request, std::string_view id,
                                                      std::span<const float> vectors, size_t dim,
                                                      size_t input_tokens) {
  const size_t n = request.inputs.size();
  TIDE_RETURN_IF_ERROR(CheckShape(n, vectors, dim));
  json embeddings = json::object();
  for (EmbeddingType type : request.embedding_types) {
    json rows = json::array();
    for (size_t i = 0; i < n; ++i) {
      const auto row = vectors.subspan(i * dim, dim);
      rows.push_back(type == EmbeddingType::kFloat ? FloatRow(row) : json(Quantize(row, type)));
    }
    embeddings[std::string(EmbeddingTypeName(type))] = std::move(rows);
  }
  json texts = json::array();
  for (const EmbedInput& in : request.inputs) texts.push_back(in.text);
  json out = {{"id", std::string(id)},
              {"embeddings", std::move(embeddings)},
              {"texts", std::move(texts)},
              {"meta", {{"api_version", {{"version", "2"}}}, {"billed_units", {{"input_tokens", input_tokens}}}}},
              {"response_type", "embeddings_by_type"}};
  return JsonText(out);
}

ApiError OpenAiError(const absl::Status& status) {
  const int http = ClientStatus(status);
  std::string_view type = "server_error";
  if (http == 400) type = "invalid_request_error";
  else if (http == 401) type = "authentication_error";
  else if (http == 403) type = "permission_error";
  else if (http == 404) type = "not_found_error";
  else if (http == 429) type = "rate_limit_exceeded";
  json body = {{"error",
                {{"message", std::string(status.message())},
                 {"type", std::string(type)},
                 {"param", nullptr},
                 {"code", std::string(ErrorTypeFor(status))}}}};
  return {http, JsonText(body)};
}

ApiError CohereError(const absl::Status& status) {
  return {ClientStatus(status), JsonText(json{{"message", std::string(status.message())}})};
}

}  // namespace tide::api
