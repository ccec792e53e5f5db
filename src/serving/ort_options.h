// tide::serving::MakeOrtOptions — the ONNX Runtime session settings a model's `parameters` ask for:
// where config (TideParameters) meets the runtime (OrtOptions), so that neither depends on the other.
//
// Contract: thread-safe; the parameters are already validated by TideParameters::FromConfig, so
// it cannot fail. `instances` is the model's instance count (instance_group): with thread_layout
// adaptive and intra_op_threads > 0, a lone batch may run on instances x intra_op_threads threads
// (OrtOptions::alone_intra_op_threads, on one session the instances share: alone_session). Unless share_weights is "false", the result carries a fresh SharedWeights:
// every backend created from it (the model version's instances) shares one copy of the weights.
#pragma once

#include <filesystem>

#include "config/tide_parameters.h"
#include "runtime/ort_backend.h"

namespace tide::serving {

runtime::OrtOptions MakeOrtOptions(const config::TideParameters& params, const std::filesystem::path& model_file,
                          int instances = 1);

}  // namespace tide::serving
