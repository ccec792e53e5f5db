#include "api/rerank.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "api/json_reader.h"
#include "common/error.h"
#include "common/status_macros.h"

namespace tide::api {

absl::StatusOr<RerankRequest> ParseRerankRequest(std::string_view body,
                                                 const RequestLimits& limits) {
  TIDE_ASSIGN_OR_RETURN(const nlohmann::json parsed, ParseJsonObject(body, limits));
  const ObjectReader reader(parsed, "");
  RerankRequest request;

  TIDE_RETURN_IF_ERROR(reader.String("query", /*required=*/true, limits.max_text_chars, &request.query));
  if (request.query.empty()) {
    return errors::InvalidInput("field 'query' must not be empty");
  }

  TIDE_ASSIGN_OR_RETURN(const nlohmann::json* const texts, reader.Array("texts", /*required=*/true));
  const nlohmann::json& array = *texts;
  if (array.empty()) return errors::Empty("field 'texts' must not be empty");
  if (array.size() > limits.max_documents) {
    return errors::InvalidInput(absl::StrCat("texts has ", array.size(),
                                                      " entries; the limit is max_documents=",
                                                      limits.max_documents));
  }
  request.texts.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    const std::string path = absl::StrCat("texts[", i, "]");
    if (!array[i].is_string()) return WrongType(path, "a string", array[i]);
    const auto& text = array[i].get_ref<const std::string&>();
    if (text.size() > limits.max_text_chars) return TextTooLong(path, text.size(), limits);
    request.texts.push_back(text);
  }

  TIDE_RETURN_IF_ERROR(reader.Bool("raw_scores", &request.raw_scores));
  TIDE_RETURN_IF_ERROR(reader.Bool("return_text", &request.return_text));
  TIDE_RETURN_IF_ERROR(reader.Bool("truncate", &request.truncate));

  TIDE_RETURN_IF_ERROR(ReadTruncationDirection(reader, &request.truncation_direction));
  TIDE_RETURN_IF_ERROR(ReadLongDocuments(reader, &request.long_documents));
  TIDE_RETURN_IF_ERROR(ReadInstruction(reader, limits.max_text_chars, &request.instruction));
  return request;
}

absl::Status ReadLongDocuments(const ObjectReader& reader, std::optional<LongDocuments>* out) {
  const nlohmann::json* field = reader.Find("long_documents");
  if (field == nullptr) return absl::OkStatus();
  constexpr char kExpected[] = "\"truncate\", \"chunk_max\" or \"chunk_mean\"";
  if (!field->is_string()) return WrongType("long_documents", kExpected, *field);
  const std::string value = field->get<std::string>();
  *out = ParseLongDocuments(value);
  if (!out->has_value()) {
    return errors::InvalidInput(
        absl::StrCat("field 'long_documents' must be ", kExpected, "; got \"", value.substr(0, 32), "\""));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<size_t>> RankByScore(std::span<const float> scores) {
  for (size_t i = 0; i < scores.size(); ++i) {
    if (!std::isfinite(scores[i])) {
      return errors::Internal(
          absl::StrCat("score for document ", i, " is not a finite number (", scores[i], ")"));
    }
  }
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  return order;
}

absl::StatusOr<std::string> RenderRerankResponse(const RerankRequest& request,
                                                 std::span<const float> scores, bool degraded) {
  if (scores.size() != request.texts.size()) {
    return errors::Internal(absl::StrCat("rerank produced ", scores.size(), " scores for ",
                                            request.texts.size(), " texts"));
  }
  TIDE_ASSIGN_OR_RETURN(const std::vector<size_t> order, RankByScore(scores));
  nlohmann::json out = nlohmann::json::array();
  for (const size_t i : order) {
    nlohmann::json item = {{"index", i}, {"score", FloatForJson(scores[i])}};
    if (request.return_text) item["text"] = request.texts[i];
    if (degraded) item["degraded"] = true;
    out.push_back(std::move(item));
  }
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tide::api
