// tide::optimize SkipLayerNormalization fusion pass (see transformer_fusion.h).
//
// Contract: rewrites `g` in place; nodes that became unread stay for the caller's dead-node pass.
// Returns the number of LayerNormalizations fused and appends "<node>: <why>" for every
// LayerNormalization over an Add that it left alone to `skipped`. Thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "onnx/onnx_pb.h"

namespace tide::optimize {

int FuseSkipLayerNorm(onnx::GraphProto* g, std::vector<std::string>* skipped);

}  // namespace tide::optimize
