// tide::api admin input bounds — the pre-scan every admin JSON text gets before it is parsed: the
// repository API's bodies (index, load, unload) and the load's parameters.config (HTTP and gRPC),
// and the rollout API's PUT body (also a config.pbtxt `rollout` parameter).
//
// Contract:
//  - CheckAdminBody(body): a body over kAdminInputLimits.max_bytes is kPayloadTooLarge (HTTP 413);
//    CheckAdminJsonText(text, what): a text inside a request (parameters.config) over it is
//    kInvalidInput (HTTP 422, gRPC INVALID_ARGUMENT), as a limit exceeded by a field is.
//  - Both then run the inference bodies' byte pre-scan (CheckJsonCost, json_reader.h) with the
//    admin limits: nesting deeper than max_json_depth, or more than max_json_strings strings or
//    arrays/objects, is kInvalidInput naming the limit. Nothing is parsed or allocated before.
//  - Messages start with `what` ("the request body", "parameters.config").
//  - Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"

namespace tide::api {

struct AdminInputLimits {
  // Largest admin body and parameters.config text in bytes. A model configuration is a few KiB.
  size_t max_bytes = size_t{1} << 20;
  // Deepest nesting (the top-level object is depth 1). A model configuration needs 6
  // (model_warmup[].inputs{}.x{}.dims[]), a rollout 2.
  size_t max_json_depth = 16;
  // Most strings (keys included), and most arrays/objects, in one text.
  size_t max_json_strings = 16384;
};

inline constexpr AdminInputLimits kAdminInputLimits{};

absl::Status CheckAdminBody(std::string_view body, std::string_view what = "the request body");
absl::Status CheckAdminJsonText(std::string_view text, std::string_view what);

}  // namespace tide::api
