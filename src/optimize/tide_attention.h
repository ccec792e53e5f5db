// tide::optimize::UseTideAttention — hands each fused attention block to tide's own kernel.
//
// Rewrites com.microsoft.MultiHeadAttention(q, k, v, bias, key_padding_mask) into
// ai.tide.PaddedAttention with the same inputs (runtime/tide_ops.h: the same result, computed over
// each row's real keys, head size unchanged). Runs instead of MovePaddingMaskIntoKeys for the nodes
// it takes (FusionOptions::tide_attention; the load sets it when the CPU runs the kernel
// vectorized: runtime::PaddedAttentionCpuSupported).
//
// Contract:
//  - Takes nodes with exactly (q, k, v, constant float bias [3 x num_heads x head_size],
//    key_padding_mask) -> one output, num_heads > 0, head_size a multiple of 16 and at most 128,
//    not unidirectional, whose mask is a rank-2 int32 graph input or an int32 Cast of one
//    (FuseAttention's). Anything else stays as it is, named in `skipped` ("<node>: <why>").
//  - `scale` is written explicitly (1/sqrt(head_size) when the node had none); mask_filter_value
//    is dropped (padded keys are skipped, not filled); precision "bf16" is written when asked.
//    Adds the "ai.tide" opset import (version 1) when anything was rewritten. Returns the number
//    of nodes rewritten.
//  - Free function on a caller-owned model; thread-compatible.
//
// UseTideCausalAttention does the same for a decoder: com.microsoft.GroupQueryAttention (the
// exporter's, tools/decoder_fused.py) becomes ai.tide.CausalAttention(q, k, v, seqlens_k)
// (tide_ops.h: causal grouped-query attention over positions 0..seqlens_k[b], the masked half
// skipped). It takes nodes with separate q, k, v, no past key / value, no rotary caches, position
// ids or attention bias, present outputs unread, no window, softcap or smooth softmax, and a head
// size (the value projection's width / kv_num_heads, read from its constant weight through a bias
// Add or INT8 dequantization) of 16, 32, ..., 128; the rest stays, named in `skipped`. The
// padding is GroupQueryAttention's own rule (right padding), unchanged.
#pragma once

#include <string>
#include <vector>

#include "onnx/onnx_pb.h"

namespace tide::optimize {

// = runtime::kTideOpDomain / kPaddedAttentionOp (tide_ops.h; this library does not link the
// runtime: fusion_check.cc, which sees both, asserts they agree).
inline constexpr char kTideDomain[] = "ai.tide";
inline constexpr char kTidePaddedAttention[] = "PaddedAttention";
inline constexpr char kTideCausalAttention[] = "CausalAttention";
inline constexpr char kTidePrecisionBf16[] = "bf16";  // PaddedAttention's attribute precision

// bf16: the rewritten nodes carry precision "bf16" (the kernel's BF16 products; else no attribute:
// FP32).
int UseTideAttention(onnx::ModelProto* model, bool bf16, std::vector<std::string>* skipped);
int UseTideCausalAttention(onnx::ModelProto* model, bool bf16, std::vector<std::string>* skipped);

}  // namespace tide::optimize
