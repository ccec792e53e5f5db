#include "api/tei_decode.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "api/json_reader.h"
#include "common/error.h"
#include "common/status_macros.h"

namespace tide::api {
namespace {

absl::Status ReadIds(const nlohmann::json& list, const std::string& path, size_t* total, const RequestLimits& limits,
                     std::vector<int64_t>* out) {
  if (list.empty()) return errors::Empty(absl::StrCat("field '", path, "' must not be empty"));
  *total += list.size();
  if (*total > limits.max_batch_tensor_elements) {
    return errors::InvalidInput(absl::StrCat("ids has more than ", limits.max_batch_tensor_elements,
                                             " elements; the limit is max_batch_tensor_elements"));
  }
  out->reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& v = list[i];
    if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0)) {
      return WrongType(absl::StrCat(path, "[", i, "]"), "a non-negative integer", v);
    }
    out->push_back(v.get<int64_t>());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DecodeRequest> ParseDecodeRequest(std::string_view body, const RequestLimits& limits) {
  absl::StatusOr<nlohmann::json> parsed = ParseJsonObject(body, limits);
  if (!parsed.ok()) return parsed.status();
  const ObjectReader reader(*parsed, "");
  DecodeRequest request;
  absl::StatusOr<const nlohmann::json*> ids = reader.Array("ids", true);
  if (!ids.ok()) return ids.status();
  const nlohmann::json& array = **ids;
  if (array.empty()) return errors::Empty("field 'ids' must not be empty");
  size_t total = 0;
  if (array[0].is_array()) {
    if (array.size() > limits.max_documents) {
      return errors::InvalidInput(
          absl::StrCat("ids has ", array.size(), " entries; the limit is max_documents=", limits.max_documents));
    }
    for (size_t i = 0; i < array.size(); ++i) {
      const std::string path = absl::StrCat("ids[", i, "]");
      if (!array[i].is_array()) return WrongType(path, "an array of integers", array[i]);
      request.ids.emplace_back();
      TIDE_RETURN_IF_ERROR(ReadIds(array[i], path, &total, limits, &request.ids.back()));
    }
  } else {
    request.ids.emplace_back();
    TIDE_RETURN_IF_ERROR(ReadIds(array, "ids", &total, limits, &request.ids.back()));
  }
  TIDE_RETURN_IF_ERROR(reader.Bool("skip_special_tokens", &request.skip_special_tokens));
  return request;
}

std::string RenderDecodeResponse(std::span<const std::string> texts) {
  nlohmann::json out = nlohmann::json::array();
  for (const std::string& t : texts) out.push_back(t);
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tide::api
