#include "api/tokenize.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "api/json_reader.h"
#include "common/error.h"
#include "common/status_macros.h"

namespace tide::api {
namespace {

absl::StatusOr<std::string> ReadText(const nlohmann::json& value, const std::string& path,
                                     const RequestLimits& limits) {
  if (!value.is_string()) return WrongType(path, "a string", value);
  const auto& text = value.get_ref<const std::string&>();
  if (text.size() > limits.max_text_chars) return TextTooLong(path, text.size(), limits);
  return text;
}

}  // namespace

absl::StatusOr<TokenizeRequest> ParseTokenizeRequest(std::string_view body,
                                                     const RequestLimits& limits) {
  TIDE_ASSIGN_OR_RETURN(const nlohmann::json parsed, ParseJsonObject(body, limits));
  const ObjectReader reader(parsed, "");
  TokenizeRequest request;

  const nlohmann::json* inputs = reader.Find("inputs");
  if (inputs == nullptr) return MissingField("inputs");
  if (inputs->is_string()) {
    TIDE_ASSIGN_OR_RETURN(std::string text, ReadText(*inputs, "inputs", limits));
    request.inputs.push_back({std::move(text), std::nullopt});
  } else if (inputs->is_array()) {
    if (inputs->empty()) return errors::Empty("field 'inputs' must not be empty");
    if (inputs->size() > limits.max_documents) {
      return errors::InvalidInput(absl::StrCat("inputs has ", inputs->size(),
                                                        " entries; the limit is max_documents=",
                                                        limits.max_documents));
    }
    request.inputs.reserve(inputs->size());
    for (size_t i = 0; i < inputs->size(); ++i) {
      const std::string path = absl::StrCat("inputs[", i, "]");
      const nlohmann::json& element = (*inputs)[i];
      TokenizeInput input;
      if (element.is_array()) {
        if (element.size() != 2) {
          return errors::InvalidInput(absl::StrCat(
              "field '", path, "' must be a string or a pair [text, text_pair]; got an array of ",
              element.size()));
        }
        TIDE_ASSIGN_OR_RETURN(input.text, ReadText(element[0], absl::StrCat(path, "[0]"), limits));
        TIDE_ASSIGN_OR_RETURN(input.text_pair, ReadText(element[1], absl::StrCat(path, "[1]"), limits));
      } else if (element.is_string()) {
        TIDE_ASSIGN_OR_RETURN(input.text, ReadText(element, path, limits));
      } else {
        return WrongType(path, "a string or a pair [text, text_pair]", element);
      }
      request.inputs.push_back(std::move(input));
    }
  } else {
    return WrongType("inputs", "a string or an array", *inputs);
  }

  if (absl::Status s = reader.Bool("add_special_tokens", &request.add_special_tokens); !s.ok()) {
    return s;
  }
  if (absl::Status s = ReadInstruction(reader, limits.max_text_chars, &request.instruction); !s.ok()) return s;
  return request;
}

std::string RenderTokenizeResponse(std::span<const std::vector<TokenInfo>> tokens) {
  nlohmann::json out = nlohmann::json::array();
  for (const std::vector<TokenInfo>& sequence : tokens) {
    nlohmann::json list = nlohmann::json::array();
    for (const TokenInfo& token : sequence) {
      nlohmann::json item = {{"id", token.id}, {"text", token.text}, {"special", token.special}};
      if (token.start.has_value()) item["start"] = *token.start;
      if (token.stop.has_value()) item["stop"] = *token.stop;
      list.push_back(std::move(item));
    }
    out.push_back(std::move(list));
  }
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tide::api
