// tide::api JSON reading helpers shared by the request parsers in src/api (internal to tide_api;
// the serving layer calls the Parse*/Render* functions instead).
//
// Contract:
//  - Never throw: nlohmann exceptions are caught here and turned into absl::Status.
//  - Error codes: JSON syntax (including invalid UTF-8 inside strings, which nlohmann rejects)
//    -> kInvalidArgument; a body nested deeper than max_json_depth or with more strings or
//    arrays/objects than MaxJsonStrings(limits), a non-object body, a field of
//    the wrong type, a missing required field, a text over max_text_chars -> kFailedPrecondition.
//    Messages name the field by its path (e.g. "inputs[2].shape") and the expected type.
//  - A field that is absent or JSON null reads as "not given" (the default applies).
//  - Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "api/request_limits.h"
#include "domain/truncation_direction.h"

namespace tide::api {

// Scans `body` once and fails if arrays/objects nest deeper than `max_depth` (the top-level
// value's brackets are depth 1). Brackets inside strings, including after escaped quotes, do not
// count. Does not otherwise validate JSON.
absl::Status CheckJsonDepth(std::string_view body, size_t max_depth);

// The depth pre-scan plus a count of strings (keys included) and of arrays/objects, each bounded
// by MaxJsonStrings(limits): kFailedPrecondition naming the limit before anything is allocated.
// A DOM costs ~100 bytes per string, so this keeps an 8 MiB body of millions of one-byte strings
// from costing hundreds of MB before a row limit could refuse it.
absl::Status CheckJsonCost(std::string_view body, const RequestLimits& limits);
// limits.max_json_strings, or 4 x max_documents + 1024 when it is 0.
size_t MaxJsonStrings(const RequestLimits& limits);

// Cost pre-scan (CheckJsonCost), then parse. The result is a JSON object (anything else is kFailedPrecondition).
absl::StatusOr<nlohmann::json> ParseJsonObject(std::string_view body, const RequestLimits& limits);

// "array", "string", "number", "boolean", "object", "null" — for error messages.
std::string_view JsonTypeName(const nlohmann::json& value);

// Typed access to the fields of one JSON object; `path` prefixes field names in messages
// ("" at the top level, "inputs[0]" for an element).
class ObjectReader {
 public:
  ObjectReader(const nlohmann::json& object, std::string path)
      : object_(object), path_(std::move(path)) {}

  // The field, or nullptr when absent or null.
  const nlohmann::json* Find(std::string_view field) const;
  // Path of a field for messages: "texts" or "inputs[0].shape".
  std::string Path(std::string_view field) const;

  // Each leaves *out unchanged when the field is absent or null (unless required).
  absl::Status Bool(std::string_view field, bool* out) const;
  absl::Status String(std::string_view field, bool required, size_t max_bytes,
                      std::string* out) const;
  // A non-negative integer (JSON integer, not a float).
  absl::Status Size(std::string_view field, std::optional<size_t>* out) const;
  // The field must be an array / object when present; returns nullptr when absent or null.
  absl::StatusOr<const nlohmann::json*> Array(std::string_view field, bool required) const;
  absl::StatusOr<const nlohmann::json*> Object(std::string_view field, bool required) const;

 private:
  const nlohmann::json& object_;
  std::string path_;
};

// TEI's "truncation_direction": "Right"/"right" or "Left"/"left"; absent or null leaves *out
// unchanged; anything else is kFailedPrecondition.
absl::Status ReadTruncationDirection(const ObjectReader& reader,
                                     std::optional<tokenizer::TruncationDirection>* out);

// The optional "instruction" field of a rerank, predict or tokenize body (a decoder-only
// reranker's prompt; serving decides whether the model takes one): a string of at most
// `max_bytes`; absent or null leaves *out unset; another type is kFailedPrecondition.
absl::Status ReadInstruction(const ObjectReader& reader, size_t max_bytes, std::optional<std::string>* out);

// The double whose shortest decimal form is the shortest decimal form of `value` as a float, so
// nlohmann renders 0.1f as 0.1 (not 0.10000000149011612) and the text still parses back to the
// same float.
double FloatForJson(float value);

// Debian's absl::string_view is its own type, not std::string_view; this bridges the two for
// absl::StrCat.
inline absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Shared message helpers.
absl::Status WrongType(std::string_view path, std::string_view expected,
                       const nlohmann::json& got);
absl::Status MissingField(std::string_view path);
absl::Status TextTooLong(std::string_view path, size_t bytes, const RequestLimits& limits);

}  // namespace tide::api
