// tide::optimize::PruneLastLayer — an encoder's last layer computed for its pooled token alone.
//
// A cross-encoder's head reads one position of the last hidden state, Gather(h, 0, axis 1): the
// first token ([CLS], <s>). After the last attention's keys and values, every operator of a layer
// works position by position (the query projection, the output projection, biases, GELU, the
// residual adds and layer norms), so of the last layer's queries, attention rows and feed-forward
// only position 0 reaches the score. On MiniLM-L6 (6 layers) that is ~14% of the weight products
// of a pair; on a 12-layer base model ~7%.
//
// The rewrite: walking back from each such Gather, a node is narrowed to the first position when
// it is row-wise (below) and every read of its outputs is a narrowed node's row-wise input or the
// Gather's data. Where a narrowed node reads a value that is also needed whole (the previous
// layer's output, read by the keys and values), a Gather(value, [0], axis 1) takes its first
// position ([batch, 1, hidden]). The attention keeps its whole keys, values and padding mask and computes its first
// query alone (ai.tide.PaddedAttention with q [B, 1, H]: runtime/padded_attention.h `queries`).
//
// Row-wise operators: MatMul and com.microsoft DynamicQuantizeMatMul with a constant weight;
// Add/Sub/Mul/Div whose constant inputs vary along the last axis only; Erf, Tanh, Relu, Sigmoid,
// Gelu, Cast; LayerNormalization over the last axis; com.microsoft BiasGelu, Gelu, FastGelu,
// SkipLayerNormalization; ai.tide BiasGelu, LayerNorm, SkipLayerNorm; and ai.tide.PaddedAttention
// through its query only.
//
// Contract:
//  - Rewrites only when the narrowed nodes include an ai.tide.PaddedAttention (so the walk stays in
//    the last layer's [batch, seq, hidden] values); otherwise the model is unchanged and `skipped`
//    says why ("pooled token: ...").
//  - Results: the same numbers for position 0 (every narrowed operator computes each position from
//    that position alone) except a dynamically quantized MatMul, whose scale now comes from the
//    pooled token's row alone instead of the whole batch; the load's probe check compares the
//    result with the original model as for every fusion.
//  - Narrowed nodes' value_info entries are dropped (their sequence axis is now 1). Returns how many
//    nodes were narrowed. Free function on a caller-owned model; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "onnx/onnx_pb.h"

namespace tide::optimize {

int PruneLastLayer(onnx::ModelProto* model, std::vector<std::string>* skipped);

}  // namespace tide::optimize
