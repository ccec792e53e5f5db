#include "api/tei_predict.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "api/json_reader.h"
#include "common/error.h"
#include "common/status_macros.h"

namespace tide::api {
namespace {

bool IsPair(const nlohmann::json& v) {
  return v.is_array() && v.size() == 2 && v[0].is_string() && v[1].is_string();
}

absl::Status CheckText(const std::string& text, std::string_view path, const RequestLimits& limits) {
  if (text.size() > limits.max_text_chars) return TextTooLong(path, text.size(), limits);
  return absl::OkStatus();
}

absl::StatusOr<PredictInput> ReadInput(const nlohmann::json& v, const std::string& path, const RequestLimits& limits) {
  PredictInput in;
  if (v.is_string()) {
    in.text = v.get<std::string>();
  } else if (IsPair(v)) {
    in.text = v[0].get<std::string>();
    in.text_pair = v[1].get<std::string>();
    TIDE_RETURN_IF_ERROR(CheckText(*in.text_pair, path, limits));
  } else {
    return WrongType(path, "a string or a pair [string, string]", v);
  }
  TIDE_RETURN_IF_ERROR(CheckText(in.text, path, limits));
  return in;
}

}  // namespace

absl::StatusOr<PredictRequest> ParsePredictRequest(std::string_view body, const RequestLimits& limits) {
  absl::StatusOr<nlohmann::json> parsed = ParseJsonObject(body, limits);
  if (!parsed.ok()) return parsed.status();
  const ObjectReader reader(*parsed, "");
  PredictRequest request;
  const nlohmann::json* inputs = reader.Find("inputs");
  if (inputs == nullptr) return MissingField("inputs");
  if (inputs->is_string() || IsPair(*inputs)) {
    absl::StatusOr<PredictInput> in = ReadInput(*inputs, "inputs", limits);
    if (!in.ok()) return in.status();
    request.inputs.push_back(*std::move(in));
  } else if (inputs->is_array()) {
    if (inputs->empty()) return errors::Empty("field 'inputs' must not be empty");
    if (inputs->size() > limits.max_documents) {
      return errors::InvalidInput(
          absl::StrCat("inputs has ", inputs->size(), " entries; the limit is max_documents=", limits.max_documents));
    }
    request.batch = true;
    request.inputs.reserve(inputs->size());
    for (size_t i = 0; i < inputs->size(); ++i) {
      absl::StatusOr<PredictInput> in = ReadInput((*inputs)[i], absl::StrCat("inputs[", i, "]"), limits);
      if (!in.ok()) return in.status();
      request.inputs.push_back(*std::move(in));
    }
  } else {
    return WrongType("inputs", "a string, a pair [string, string] or an array of them", *inputs);
  }
  if (reader.Find("truncate") != nullptr) {
    bool truncate = false;
    TIDE_RETURN_IF_ERROR(reader.Bool("truncate", &truncate));
    request.truncate = truncate;
  }
  TIDE_RETURN_IF_ERROR(ReadTruncationDirection(reader, &request.truncation_direction));
  TIDE_RETURN_IF_ERROR(ReadInstruction(reader, limits.max_text_chars, &request.instruction));
  TIDE_RETURN_IF_ERROR(reader.Bool("raw_scores", &request.raw_scores));
  return request;
}

absl::StatusOr<std::vector<std::vector<LabelScore>>> PredictScores(size_t inputs, bool raw_scores,
                                                                   std::span<const float> logits,
                                                                   std::span<const std::string> labels) {
  const size_t n = labels.size();
  if (n == 0 || logits.size() != inputs * n) {
    return errors::Internal(absl::StrCat("predict produced ", logits.size(), " logits for ", inputs, " inputs of ", n,
                                         " labels"));
  }
  std::vector<std::vector<LabelScore>> out;
  out.reserve(inputs);
  std::vector<float> scores(n);
  std::vector<size_t> order(n);
  for (size_t row = 0; row < inputs; ++row) {
    const float* l = logits.data() + row * n;
    if (raw_scores) {
      std::copy(l, l + n, scores.begin());
    } else if (n == 1) {
      scores[0] = 1.0f / (1.0f + std::exp(-l[0]));
    } else {
      const float max = *std::max_element(l, l + n);
      float sum = 0;
      for (size_t j = 0; j < n; ++j) sum += (scores[j] = std::exp(l[j] - max));
      for (float& s : scores) s /= sum;
    }
    for (float s : scores) {
      if (!std::isfinite(s)) return errors::Internal("predict produced a score that is not finite");
    }
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
    std::vector<LabelScore>& items = out.emplace_back();
    items.reserve(n);
    for (size_t j : order) items.push_back({labels[j], scores[j]});
  }
  return out;
}

absl::StatusOr<std::string> RenderPredictResponse(const PredictRequest& request, std::span<const float> logits,
                                                  std::span<const std::string> labels) {
  auto scored = PredictScores(request.inputs.size(), request.raw_scores, logits, labels);
  if (!scored.ok()) return scored.status();
  nlohmann::json out = nlohmann::json::array();
  for (const std::vector<LabelScore>& row : *scored) {
    nlohmann::json items = nlohmann::json::array();
    for (const LabelScore& s : row) items.push_back({{"score", FloatForJson(s.score)}, {"label", s.label}});
    if (!request.batch) return items.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    out.push_back(std::move(items));
  }
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tide::api
