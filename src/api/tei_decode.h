// tide::api TEI decode wire format — `POST /decode`.
//
// Request:  {"ids": [int, ...] | [[int, ...], ...], "skip_special_tokens": true}
// Response: ["text", ...] — one string per id list (a single list gives a list of one), as TEI.
//
// Contract:
//  - Pure functions, thread-safe, never throw.
//  - Parse errors: JSON syntax -> kInvalidArgument (400); an empty ids list (or batch) -> kEmpty
//    (400, TEI's Empty); wrong types, a negative id, more than max_documents lists, more than
//    max_batch_tensor_elements ids in all -> kFailedPrecondition (422).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "api/request_limits.h"

namespace tide::api {

struct DecodeRequest {
  std::vector<std::vector<int64_t>> ids;  // never empty after a successful parse
  bool skip_special_tokens = true;
};

absl::StatusOr<DecodeRequest> ParseDecodeRequest(std::string_view body, const RequestLimits& limits = {});

std::string RenderDecodeResponse(std::span<const std::string> texts);

}  // namespace tide::api
