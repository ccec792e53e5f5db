#include "api/cohere_rerank.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
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
                                                             const RequestLimits& limits,
                                                             CohereApiVersion api_version) {
  absl::StatusOr<nlohmann::json> parsed = ParseJsonObject(body, limits);
  if (!parsed.ok()) return parsed.status();
  const ObjectReader reader(*parsed, "");
  CohereRerankRequest request;
  request.api_version = api_version;

  if (reader.Find("model") != nullptr) {
    std::string model;
    TIDE_RETURN_IF_ERROR(reader.String("model", false, limits.max_text_chars, &model));
    request.model = std::move(model);
  }
  TIDE_RETURN_IF_ERROR(reader.String("query", true, limits.max_text_chars, &request.query));
  if (request.query.empty()) {
    return errors::InvalidInput("field 'query' must not be empty");
  }

  absl::StatusOr<const nlohmann::json*> rank_fields = reader.Array("rank_fields", false);
  if (!rank_fields.ok()) return rank_fields.status();
  if (*rank_fields != nullptr) {
    for (size_t i = 0; i < (*rank_fields)->size(); ++i) {
      const nlohmann::json& field = (**rank_fields)[i];
      const std::string path = absl::StrCat("rank_fields[", i, "]");
      if (!field.is_string()) return WrongType(path, "a string", field);
      if (field.get_ref<const std::string&>().empty()) {
        return errors::InvalidInput(absl::StrCat("field '", path, "' must not be empty"));
      }
      request.rank_fields.push_back(field.get<std::string>());
    }
  }

  absl::StatusOr<const nlohmann::json*> documents = reader.Array("documents", true);
  if (!documents.ok()) return documents.status();
  const nlohmann::json& array = **documents;
  if (array.empty()) return errors::Empty("field 'documents' must not be empty");
  if (array.size() > limits.max_documents) {
    return errors::InvalidInput(absl::StrCat("documents has ", array.size(),
                                                      " entries; the limit is max_documents=",
                                                      limits.max_documents));
  }
  request.documents.reserve(array.size());
  request.document_objects.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    const std::string path = absl::StrCat("documents[", i, "]");
    const nlohmann::json& doc = array[i];
    std::string text;
    std::string object;
    if (doc.is_string()) {
      text = doc.get<std::string>();
      if (text.size() > limits.max_text_chars) return TextTooLong(path, text.size(), limits);
    } else if (doc.is_object()) {
      if (request.rank_fields.empty()) {
        TIDE_RETURN_IF_ERROR(ObjectReader(doc, path).String("text", true, limits.max_text_chars, &text));
      } else {
        // Cohere's structured documents: the chosen fields, in the order given, one line each.
        bool any = false;
        for (const std::string& field : request.rank_fields) {
          auto it = doc.find(field);
          if (it == doc.end() || it->is_null()) continue;
          if (any) text += '\n';
          any = true;
          absl::StrAppend(&text, field, ": ",
                          it->is_string() ? it->get_ref<const std::string&>()
                                          : it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
          if (text.size() > limits.max_text_chars) return TextTooLong(path, text.size(), limits);
        }
        if (!any) {
          return errors::InvalidInput(
              absl::StrCat("field '", path, "' has none of the rank_fields"));
        }
      }
      object = doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } else {
      return WrongType(path, "a string or an object", doc);
    }
    request.documents.push_back(std::move(text));
    request.document_objects.push_back(std::move(object));
  }

  TIDE_RETURN_IF_ERROR(PositiveSize(reader, "top_n", &request.top_n));
  // Jina's default is to return the documents; Cohere's is not to.
  request.return_documents =
      request.model.has_value() && absl::AsciiStrToLower(request.model->substr(0, 4)) == "jina";
  TIDE_RETURN_IF_ERROR(reader.Bool("return_documents", &request.return_documents));
  TIDE_RETURN_IF_ERROR(PositiveSize(reader, "max_tokens_per_doc", &request.max_tokens_per_doc));
  TIDE_RETURN_IF_ERROR(ReadLongDocuments(reader, &request.long_documents));
  TIDE_RETURN_IF_ERROR(ReadInstruction(reader, limits.max_text_chars, &request.instruction));
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
    if (request.return_documents) {
      const std::string& object = i < request.document_objects.size() ? request.document_objects[i] : "";
      if (object.empty()) {
        item["document"] = {{"text", request.documents[i]}};
      } else {
        item["document"] = nlohmann::json::parse(object, nullptr, /*allow_exceptions=*/false);
      }
    }
    results.push_back(std::move(item));
  }
  nlohmann::json out = nlohmann::json::object();
  out["id"] = info.id;
  out["model"] = info.model;
  out["results"] = std::move(results);
  out["usage"] = {{"total_tokens", info.total_tokens}};
  out["meta"] = {{"api_version", {{"version", request.api_version == CohereApiVersion::kV2 ? "2" : "1"}}},
                 {"billed_units", {{"search_units", (request.documents.size() + 99) / 100}}}};
  if (info.degraded) out["degraded"] = true;
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tide::api
