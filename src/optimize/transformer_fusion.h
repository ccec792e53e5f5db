// tide::optimize — transformer graph fusion for ONNX Runtime's CPU provider.
//
// ONNX Runtime's online optimizer does not recognise the attention block of PyTorch's BERT
// exports (torch >= 1.13, opset 14+), so a session still runs ~20 small operators per layer
// between the weight GEMMs. FuseTransformer rewrites a model offline (`tide optimize`) or at load
// time (graph_fusion = auto) into ONNX Runtime contrib operators:
//
//  - Attention: from the Q/K/V projection outputs to the [B, S, H] Reshape after the context
//    MatMul (Reshape/Transpose x4, QK^T MatMul, scale, mask Add, Softmax, PV MatMul) becomes one
//    com.microsoft.MultiHeadAttention(query, key, value, bias[3H], key_padding_mask int32[B, S])
//    with num_heads and scale taken from the graph. The projections stay where they are (MatMul in
//    FP32; DynamicQuantizeMatMul or MatMulInteger after `tide quantize --int8`), so fusion composes
//    with quantization; constant bias Adds of the projections fold into `bias`. (com.microsoft.Attention
//    with one packed [H, 3H] QKV GEMM was tried for FP32: no faster than this on MiniLM-L6, 1 thread.) Only the additive padding mask
//    (1 - mask) * c of a rank-2 graph input (c <= -1000) is recognised; attention_mask is cast to
//    int32 once for all layers.
//  - SkipLayerNormalization: LayerNormalization(Add(Add(P, bias), residual)) or
//    LayerNormalization(Add(P, residual)), where P is a weight projection whose width equals the
//    LayerNorm's gamma, becomes com.microsoft.SkipLayerNormalization(P, residual, gamma, beta, bias).
//
// Contract:
//  - Matching is conservative: operator types, domains, permutations, reshape targets, constant
//    shapes and single readers of every intermediate are checked; a subgraph that differs in any
//    way is left as it is and described in FusionReport::skipped ("<node>: <why>").
//  - Nodes and initializers no longer read after the rewrite are removed.
//  - Errors: INVALID_ARGUMENT for a model without a graph, FAILED_PRECONDITION when the model
//    already contains fused contrib operators. A model where nothing matched is not an error (the
//    report says 0 fused and the model is unchanged).
//  - Free function on a caller-owned model; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"

namespace tide::optimize {

struct FusionOptions {
  bool attention = true;        // MultiHeadAttention
  bool skip_layer_norm = true;  // SkipLayerNormalization
  bool padding_mask_in_keys = true;  // fused attention's mask as an extra key column (padding_mask_in_keys.h)
  // Attention on tide's own kernel, ai.tide.PaddedAttention (tide_attention.h), instead of the
  // mask column, and a decoder's GroupQueryAttention on ai.tide.CausalAttention; only sessions
  // with runtime::RegisterTideOps open the result (the load's, never `tide optimize`'s output).
  bool tide_attention = false;
  // With tide_attention: the kernel multiplies q.k and p.v in BF16 (attribute precision "bf16",
  // runtime::AttentionPrecision::kBf16; FP32 where the CPU lacks AVX512_BF16): an encoder's
  // attention, and a decoder's causal attention.
  bool tide_attention_bf16 = false;
  bool tide_causal_attention_bf16 = false;
  // Feed-forward bias + GELU and the layer norms on tide's own kernels, ai.tide.BiasGelu /
  // LayerNorm / SkipLayerNorm (tide_elementwise.h); as for tide_attention, only tide's sessions
  // open the result.
  bool tide_elementwise = false;
  // With tide_attention: the last layer computes its pooled first token alone when the head reads
  // Gather(hidden, 0, axis 1) (pooled_token.h); run after every other rewrite.
  bool prune_last_layer = false;
  // With tide_attention: a decoder whose attention all moved to ai.tide.CausalAttention takes a
  // shared prompt prefix's keys and values as inputs (prompt_prefix.h).
  bool prompt_prefix = false;
};

struct FusionReport {
  int attention_fused = 0;
  int skip_layer_norm_fused = 0;
  int tide_attention = 0;  // of attention_fused, how many run on ai.tide.PaddedAttention
  // A decoder's GroupQueryAttention nodes moved to ai.tide.CausalAttention (tide_attention.h).
  int tide_causal_attention = 0;
  bool tide_attention_bf16 = false;  // those multiply in BF16
  bool tide_causal_attention_bf16 = false;  // the causal ones multiply in BF16
  int tide_bias_gelu = 0;   // Add + GELU rewritten into ai.tide.BiasGelu
  int tide_layer_norm = 0;  // (Skip)LayerNormalization rewritten into ai.tide.(Skip)LayerNorm
  int pruned_last_layer = 0;  // nodes of the last layer narrowed to the pooled token (pooled_token.h)
  int prompt_prefix_layers = 0;  // attention nodes given shared prompt prefix inputs (prompt_prefix.h)
  std::vector<std::string> skipped;  // "<node name>: <why it was left alone>"
  int nodes_before = 0;
  int nodes_after = 0;
  // > 0 when anything was rewritten (attention, skip-layernorm, or anything moved to a tide kernel).
  int fused() const {
    return attention_fused + skip_layer_norm_fused + tide_causal_attention + tide_bias_gelu + tide_layer_norm +
           pruned_last_layer + prompt_prefix_layers;
  }
  // "6 attention, 13 skip-layernorm; 623 -> 152 nodes" ("6 attention (tide kernel), ..." with
  // tide_attention, "6 attention (tide kernel, BF16 products), ..." with tide_attention_bf16;
  // "..., 12 skip-layernorm, 6 bias-gelu + 13 layernorm on tide kernels; ..." with tide_elementwise;
  // "..., last layer on the pooled token (9 nodes); ..." with prune_last_layer;
  // "0 attention, 0 skip-layernorm, 28 causal attention (tide kernel); ..." for a decoder, "...,
  // shared prompt prefix inputs (28 layers); ..." with prompt_prefix)
  std::string Summary() const;
};

absl::StatusOr<FusionReport> FuseTransformer(const FusionOptions& options, onnx::ModelProto* model);

}  // namespace tide::optimize
