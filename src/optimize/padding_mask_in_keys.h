// tide::optimize::MovePaddingMaskIntoKeys — lets ONNX Runtime run fused attention on its flash
// (tiled, online-softmax) CPU path while padded keys stay masked.
//
// ONNX Runtime's CPU MultiHeadAttention takes its flash path only without key_padding_mask; with
// one it materialises the [B, N, S, S] scores, a [B, S, S] mask and the probabilities (80 MB for
// 16 x 320 tokens x 12 heads) and runs ~3x slower (bench/results/int8-profile-*.txt). This pass
// moves the padding mask into the dot product instead: every head gets one extra dimension,
// 1 in the query and m = (1 - mask) * mask_filter_value / scale in the key, so
//   scale * (q'.k') = scale * (q.k) + (1 - mask) * mask_filter_value,
// which is what the key_padding_mask added (exactly, for unmasked keys: the extra term is 0).
// Per layer: q' = Reshape(Pad(Reshape(q, [0,0,N,d]), last axis +1 with 1.0), [0,0,N(d+1)]),
// k' = Reshape(Concat(Reshape(k, [0,0,N,d]), m[B,S,N,1]), [0,0,N(d+1)]), the bias gets a 0 per
// head for q and k, `scale` is written explicitly (d changed), the mask input is dropped. m is
// computed once per (mask input, filter / scale) from the rank-2 graph input.
//
// Contract:
//  - Rewrites every com.microsoft.MultiHeadAttention with inputs (q, k, v, constant float bias
//    [3D], key_padding_mask), 3-D q/k/v of hidden D = N x d, no other inputs, one output, not
//    unidirectional, whose mask is a rank-2 graph input or a Cast of one (what FuseAttention
//    writes). Anything else is left alone and named in `skipped` ("<node>: <why>").
//  - Needs default-domain opset >= 11 (Pad with its pads as an input); below, nothing changes.
//  - Returns the number of nodes rewritten. Dead nodes (the int32 Cast of the mask) are left for
//    the caller's RemoveDeadNodes. Thread-compatible; free function on a caller-owned graph.
#pragma once

#include <string>
#include <vector>

#include "onnx/onnx_pb.h"

namespace tide::optimize {

int MovePaddingMaskIntoKeys(onnx::GraphProto* g, int opset, std::vector<std::string>* skipped);

}  // namespace tide::optimize
