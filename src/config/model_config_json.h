// tide::config::ModelConfigJson — a model's configuration as JSON, the answer of Triton's
// `GET /v2/models/{m}[/versions/{v}]/config` (tritonclient's get_model_config, perf_analyzer).
//
// Contract:
//  - Triton's form: proto field names (snake_case), every scalar field printed (defaults too; unset messages left out), enums by
//    name, 64-bit integers as JSON numbers (Triton's own fix-up of protobuf's strings, so that
//    "dims": [-1, 384]), maps as objects keyed by the map key's text.
//  - Pure; thread-safe; never fails.
#pragma once

#include <string>

#include "model_config.pb.h"

namespace tide::config {

std::string ModelConfigJson(const ModelConfig& config);

}  // namespace tide::config
