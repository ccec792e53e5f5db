#include "api/json_reader.h"

#include <charconv>
#include <cstdint>
#include <cmath>
#include <exception>

#include "absl/strings/str_cat.h"
#include "common/error.h"
#include "common/status_macros.h"

namespace tide::api {

namespace {

std::string LimitName(const RequestLimits& limits) {
  if (limits.max_json_strings > 0) return absl::StrCat("max_json_strings=", limits.max_json_strings);
  return absl::StrCat("4 x max_documents + 1024 (max_documents=", limits.max_documents, ")");
}

// One pass over `body` outside strings: nesting depth, strings (keys included) and arrays/objects.
// Stops at the first bound passed; SIZE_MAX disables a count.
absl::Status ScanJson(std::string_view body, size_t max_depth, size_t max_strings,
                      size_t max_containers, const RequestLimits* limits) {
  size_t depth = 0;
  size_t strings = 0;
  size_t containers = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : body) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        if (++strings > max_strings) {
          return errors::InvalidInput(absl::StrCat(
              "request JSON has more than ", max_strings, " strings (keys and values); the limit is ",
              LimitName(*limits)));
        }
        break;
      case '[':
      case '{':
        if (++depth > max_depth) {
          return errors::InvalidInput(absl::StrCat(
              "request JSON nests arrays/objects deeper than the limit max_json_depth=",
              max_depth));
        }
        if (++containers > max_containers) {
          return errors::InvalidInput(absl::StrCat(
              "request JSON has more than ", max_containers, " arrays/objects; the limit is ",
              LimitName(*limits)));
        }
        break;
      case ']':
      case '}':
        // Unbalanced closers are a syntax error the parser reports; only guard the counter.
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckJsonDepth(std::string_view body, size_t max_depth) {
  return ScanJson(body, max_depth, SIZE_MAX, SIZE_MAX, nullptr);
}

size_t MaxJsonStrings(const RequestLimits& limits) {
  if (limits.max_json_strings > 0) return limits.max_json_strings;
  return limits.max_documents > (SIZE_MAX - 1024) / 4 ? SIZE_MAX : 4 * limits.max_documents + 1024;
}

absl::Status CheckJsonCost(std::string_view body, const RequestLimits& limits) {
  const size_t bound = MaxJsonStrings(limits);
  return ScanJson(body, limits.max_json_depth, bound, bound, &limits);
}

absl::StatusOr<nlohmann::json> ParseJsonObject(std::string_view body,
                                               const RequestLimits& limits) {
  TIDE_RETURN_IF_ERROR(CheckJsonCost(body, limits));
  nlohmann::json parsed;
  try {
    parsed = nlohmann::json::parse(body.begin(), body.end());
  } catch (const nlohmann::json::exception& e) {
    return errors::MalformedRequest(absl::StrCat("request body is not valid JSON: ", e.what()));
  } catch (const std::exception& e) {
    return errors::MalformedRequest(absl::StrCat("request body could not be parsed: ", e.what()));
  }
  if (!parsed.is_object()) {
    return errors::InvalidInput(
        absl::StrCat("request body must be a JSON object; got ", Sv(JsonTypeName(parsed))));
  }
  return parsed;
}

std::string_view JsonTypeName(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::object:
      return "object";
    case nlohmann::json::value_t::array:
      return "array";
    case nlohmann::json::value_t::string:
      return "string";
    case nlohmann::json::value_t::boolean:
      return "boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return "integer";
    case nlohmann::json::value_t::number_float:
      return "number";
    default:
      return "binary";
  }
}

double FloatForJson(float value) {
  if (!std::isfinite(value)) return static_cast<double>(value);
  char buffer[64];
  const auto written = std::to_chars(buffer, buffer + sizeof(buffer), value);
  double result = static_cast<double>(value);
  if (written.ec == std::errc()) std::from_chars(buffer, written.ptr, result);
  return result;
}

absl::Status WrongType(std::string_view path, std::string_view expected,
                       const nlohmann::json& got) {
  return errors::InvalidInput(
      absl::StrCat("field '", Sv(path), "' must be ", Sv(expected), "; got ", Sv(JsonTypeName(got))));
}

absl::Status MissingField(std::string_view path) {
  return errors::InvalidInput(absl::StrCat("missing required field '", Sv(path), "'"));
}

absl::Status TextTooLong(std::string_view path, size_t bytes, const RequestLimits& limits) {
  return errors::InvalidInput(absl::StrCat("'", Sv(path), "' has ", bytes,
                                                    " bytes; the limit is max_text_chars=",
                                                    limits.max_text_chars));
}

const nlohmann::json* ObjectReader::Find(std::string_view field) const {
  auto it = object_.find(field);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string ObjectReader::Path(std::string_view field) const {
  return path_.empty() ? std::string(field) : absl::StrCat(path_, ".", Sv(field));
}

absl::Status ObjectReader::Bool(std::string_view field, bool* out) const {
  const nlohmann::json* value = Find(field);
  if (value == nullptr) return absl::OkStatus();
  if (!value->is_boolean()) return WrongType(Path(field), "a boolean", *value);
  *out = value->get<bool>();
  return absl::OkStatus();
}

absl::Status ReadInstruction(const ObjectReader& reader, size_t max_bytes, std::optional<std::string>* out) {
  if (reader.Find("instruction") == nullptr) return absl::OkStatus();
  std::string value;
  if (absl::Status s = reader.String("instruction", /*required=*/false, max_bytes, &value); !s.ok()) return s;
  *out = std::move(value);
  return absl::OkStatus();
}

absl::Status ObjectReader::String(std::string_view field, bool required, size_t max_bytes,
                                  std::string* out) const {
  const nlohmann::json* value = Find(field);
  if (value == nullptr) {
    return required ? MissingField(Path(field)) : absl::OkStatus();
  }
  if (!value->is_string()) return WrongType(Path(field), "a string", *value);
  const auto& s = value->get_ref<const std::string&>();
  if (s.size() > max_bytes) {
    return errors::InvalidInput(absl::StrCat("'", Path(field), "' has ", s.size(),
                                                      " bytes; the limit is max_text_chars=",
                                                      max_bytes));
  }
  *out = s;
  return absl::OkStatus();
}

absl::Status ObjectReader::Size(std::string_view field, std::optional<size_t>* out) const {
  const nlohmann::json* value = Find(field);
  if (value == nullptr) return absl::OkStatus();
  if (value->is_number_unsigned()) {
    *out = static_cast<size_t>(value->get<uint64_t>());
    return absl::OkStatus();
  }
  if (value->is_number_integer()) {
    const int64_t v = value->get<int64_t>();
    if (v >= 0) {
      *out = static_cast<size_t>(v);
      return absl::OkStatus();
    }
  }
  return WrongType(Path(field), "a non-negative integer", *value);
}

absl::StatusOr<const nlohmann::json*> ObjectReader::Array(std::string_view field,
                                                          bool required) const {
  const nlohmann::json* value = Find(field);
  if (value == nullptr) {
    if (required) return MissingField(Path(field));
    return nullptr;
  }
  if (!value->is_array()) return WrongType(Path(field), "an array", *value);
  return value;
}

absl::StatusOr<const nlohmann::json*> ObjectReader::Object(std::string_view field,
                                                           bool required) const {
  const nlohmann::json* value = Find(field);
  if (value == nullptr) {
    if (required) return MissingField(Path(field));
    return nullptr;
  }
  if (!value->is_object()) return WrongType(Path(field), "an object", *value);
  return value;
}

absl::Status ReadTruncationDirection(const ObjectReader& reader,
                                     std::optional<tokenizer::TruncationDirection>* out) {
  const nlohmann::json* direction = reader.Find("truncation_direction");
  if (direction == nullptr) return absl::OkStatus();
  const bool is_string = direction->is_string();
  const std::string value = is_string ? direction->get<std::string>() : "";
  if (value == "Right" || value == "right") {
    *out = tokenizer::TruncationDirection::kRight;
  } else if (value == "Left" || value == "left") {
    *out = tokenizer::TruncationDirection::kLeft;
  } else if (!is_string) {
    return WrongType(reader.Path("truncation_direction"), "the string \"Right\" or \"Left\"", *direction);
  } else {
    return errors::InvalidInput(absl::StrCat("field '", reader.Path("truncation_direction"),
                                             "' must be \"Right\" or \"Left\"; got \"", value.substr(0, 32), "\""));
  }
  return absl::OkStatus();
}

}  // namespace tide::api
