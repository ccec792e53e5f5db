// tide::runtime::MakeOrtOptions — the ONNX Runtime session settings a model's `parameters` ask for.
//
// Contract: pure function, thread-safe; the parameters are already validated by
// TideParameters::FromConfig, so it cannot fail.
#pragma once

#include <filesystem>

#include "config/tide_parameters.h"
#include "runtime/ort_backend.h"

namespace tide::runtime {

OrtOptions MakeOrtOptions(const config::TideParameters& params, const std::filesystem::path& model_file);

}  // namespace tide::runtime
