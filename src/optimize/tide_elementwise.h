// tide::optimize::UseTideElementwise — hands a transformer's feed-forward GELU and its layer norms
// to tide's own kernels (runtime/tide_ops.h).
//
//  - GELU with its bias: Add(P, bias) -> x * 0.5 * (1 + erf(x / sqrt 2)) as the PyTorch exporter
//    writes it (Div or Mul by 1/sqrt 2, Erf, Add 1, then Mul by x and by 0.5 in either order), or
//    an ONNX Gelu (opset 20, approximate "none") / com.microsoft.Gelu after that Add, becomes
//    ai.tide.BiasGelu(P, bias). bias must be a constant float [N].
//  - com.microsoft.SkipLayerNormalization (transformer_fusion's) whose only read output is the
//    first becomes ai.tide.SkipLayerNorm(input, skip, gamma, beta, bias); ONNX LayerNormalization
//    over the last axis (axis -1) with only Y read becomes ai.tide.LayerNorm(X, gamma, beta).
//    gamma must be a constant float [N]; an absent beta or bias becomes a zero initializer.
//
// Contract:
//  - Anything else stays as it is; a near miss (a GELU without a constant bias, a layer norm whose
//    other outputs are read or whose gamma is not constant) is named in `skipped` ("<node>: <why>").
//  - Nodes left unread stay for the caller's dead-node pass. Adds the "ai.tide" opset import
//    (version 1) when anything was rewritten. Only sessions with runtime::RegisterTideOps open
//    the result (the load's, never `tide optimize`'s output).
//  - Free function on a caller-owned model; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "onnx/onnx_pb.h"

namespace tide::optimize {

// = runtime::kBiasGeluOp / kLayerNormOp / kSkipLayerNormOp (fusion_check.cc asserts they agree).
inline constexpr char kTideBiasGelu[] = "BiasGelu";
inline constexpr char kTideLayerNorm[] = "LayerNorm";
inline constexpr char kTideSkipLayerNorm[] = "SkipLayerNorm";

struct TideElementwiseCount {
  int bias_gelu = 0;
  int layer_norm = 0;  // LayerNorm and SkipLayerNorm
};

TideElementwiseCount UseTideElementwise(onnx::ModelProto* model, std::vector<std::string>* skipped);

}  // namespace tide::optimize
