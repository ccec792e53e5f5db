#include "api/cohere_rerank.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "api/json_reader.h"
#include "api/rerank.h"
#include "common/error.h"
#include "common/status_macros.h"

namespace tide::api {
namespace {

absl::Status PositiveSize(const ObjectReader& reader, std::string_view field,
                          std::optional<size_t>* out) {
  TIDE_RETURN_IF_ERROR(reader.Size(field, out));
  if (out->has_value() && **out == 0) {
    return errors::InvalidInput(
        absl::StrCat("field '", Sv(field), "' must be at least 1; got 0"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CohereRerankRequest> ParseCohereRerankRequest(std::string_view body,
                                                             const RequestLimits& limits) {
  absl::StatusOr<nlohmann::json> parsed = ParseJsonObject(body, limits);
  if (!parsed.ok()) return parsed.status();
  const ObjectReader reader(*parsed, "");
  CohereRerankRequest request;

  if (reader.Find("model") != nullptr) {
    std::string model;
    if (absl::Status s = reader.String("model", false, limits.max_text_chars, &model); !s.ok()) {
      return s;
    }
    request.model = std::move(model);
  }
  if (absl::Status s = reader.String("query", true, limits.max_text_chars, &request.query);
      !s.ok()) {
    return s;
  }
  if (request.query.empty()) {
    return errors::InvalidInput("field 'query' must not be empty");
  }

  absl::StatusOr<const nlohmann::json*> documents = reader.Array("documents", true);
  if (!documents.ok()) return documents.status();
  const nlohmann::json& array = **documents;
  if (array.empty()) return errors::InvalidInput("field 'documents' must not be empty");
  if (array.size() > limits.max_documents) {
    return errors::InvalidInput(absl::StrCat("documents has ", array.size(),
                                                      " entries; the limit is max_documents=",
                                                      limits.max_documents));
  }
  request.documents.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    const std::string path = absl::StrCat("documents[", i, "]");
    const nlohmann::json& doc = array[i];
    std::string text;
    if (doc.is_string()) {
      text = doc.get<std::string>();
      if (text.size() > limits.max_text_chars) return TextTooLong(path, text.size(), limits);
    } else if (doc.is_object()) {
      if (absl::Status s = ObjectReader(doc, path).String("text", true, limits.max_text_chars,
                                                          &text);
          !s.ok()) {
        return s;
      }
    } else {
      return WrongType(path, "a string or an object {\"text\": string}", doc);
    }
    request.documents.push_back(std::move(text));
  }

  TIDE_RETURN_IF_ERROR(PositiveSize(reader, "top_n", &request.top_n));
  if (absl::Status s = reader.Bool("return_documents", &request.return_documents); !s.ok()) {
    return s;
  }
  if (absl::Status s = PositiveSize(reader, "max_tokens_per_doc", &request.max_tokens_per_doc);
      !s.ok()) {
    return s;
  }
  TIDE_RETURN_IF_ERROR(ReadLongDocuments(reader, &request.long_documents));
  return request;
}

absl::StatusOr<std::string> RenderCohereRerankResponse(const CohereRerankRequest& request,
                                                       std::span<const float> scores,
                                                       const CohereRerankResponseInfo& info) {
  if (scores.size() != request.documents.size()) {
    return errors::Internal(absl::StrCat("rerank produced ", scores.size(), " scores for ",
                                            request.documents.size(), " documents"));
  }
  absl::StatusOr<std::vector<size_t>> order = RankByScore(scores);
  if (!order.ok()) return order.status();
  const size_t count = std::min(order->size(), request.top_n.value_or(order->size()));

  nlohmann::json results = nlohmann::json::array();
  for (size_t rank = 0; rank < count; ++rank) {
    const size_t i = (*order)[rank];
    nlohmann::json item = {{"index", i}, {"relevance_score", FloatForJson(scores[i])}};
    if (request.return_documents) item["document"] = {{"text", request.documents[i]}};
    results.push_back(std::move(item));
  }
  nlohmann::json out = nlohmann::json::object();
  out["id"] = info.id;
  out["model"] = info.model;
  out["results"] = std::move(results);
  out["usage"] = {{"total_tokens", info.total_tokens}};
  if (info.degraded) out["degraded"] = true;
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tide::api
