// tide::optimize attention fusion pass (see transformer_fusion.h for what it matches and why).
//
// Contract: rewrites `g` in place; nodes that became unread stay for the caller's dead-node pass.
// Returns the number of attention blocks fused and appends "<node>: <why>" for every Softmax it
// left alone to `skipped`. `opset` is the model's default-domain opset (Softmax and Unsqueeze
// semantics depend on it). Thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "onnx/onnx_pb.h"

namespace tide::optimize {

int FuseAttention(onnx::GraphProto* g, int opset, std::vector<std::string>* skipped);

}  // namespace tide::optimize
