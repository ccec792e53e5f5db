// tide::serving::ParseRolloutJson — a gray release as JSON: the body of PUT /v2/models/{m}/rollout
// and the value of a config.pbtxt `rollout` parameter (the same text both ways).
//
//   {"candidate": "2", "mode": "canary"|"shadow"|"none", "percent": 10, "sticky_header": "x-user-id",
//    "stable": "1", "window": 1000, "guard": {"min_requests": 200, "max_error_rate": 0.01,
//    "max_p99_ratio": 1.5, "min_spearman": 0.9, "min_top1": 0.8, "min_ndcg10": 0,
//    "min_cosine": 0.95}}
//
// Contract:
//  - `candidate` is required (a version number, as a string or an integer); `mode` defaults to
//    canary, `percent` to 10 (canary) or 100 (shadow); `stable` unset: the version that answers
//    now (ServiceCore::StartRollout decides); guard fields default as RolloutGuard's. The header
//    name is lower-cased. An unknown field, a value of the wrong type or out of range is
//    kInvalidInput naming it; text that is not JSON is kMalformedRequest. `window` and
//    `guard.min_requests` are within 1..kMaxRolloutWindow (100,000). The text is pre-scanned
//    first (api/admin_input.h: size, depth, strings; kInvalidInput over a limit).
//  - RolloutSpecToJson is the inverse: the spec as that JSON, `stable` included (the rollout
//    routes' GET answer and the rollout state file write it; ParseRolloutJson reads it back).
//  - Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "serving/rollout.h"

namespace tide::serving {

struct RolloutDeclaration {
  std::optional<int64_t> stable;
  RolloutSpec spec;  // spec.stable is 0 unless `stable` was given
};

absl::StatusOr<RolloutDeclaration> ParseRolloutJson(std::string_view text);
nlohmann::json RolloutSpecToJson(const RolloutSpec& spec);

}  // namespace tide::serving
