// tide::runtime tide's own ONNX Runtime operators (custom op domain "ai.tide", version 1).
//
//  - ai.tide.PaddedAttention(q, k, v, bias, key_padding_mask) -> output, attributes num_heads
//    (int), scale (float) and optionally precision ("fp32", the default, or "bf16": the products on
//    BF16 roundings, padded_attention.h): com.microsoft.MultiHeadAttention's inputs and result for an encoder's
//    self-attention (q, k, v [B, S, N x d] float, bias [3 x N x d] float, mask [B, S] int32),
//    computed over each row's real keys (padded_attention.h). q may hold the first positions alone
//    (q and output [B, Sq <= S, N x d]: those queries, as among all S; optimize/pooled_token.h
//    writes that for an encoder's last layer). tide::optimize::UseTideAttention
//    writes it at load time (attention_kernel "tide"); `tide optimize` never does, so an optimized
//    file still opens in any ONNX Runtime.
//  - ai.tide.CausalAttention(q, k, v, seqlens_k) -> output, attributes num_heads, kv_num_heads
//    (int), scale (float), optionally precision (as above): com.microsoft.GroupQueryAttention's
//    prefill without past, rotary or window for a decoder (q [B, S, N x d], k and v [B, S, Nkv x d]
//    float, seqlens_k [B] int32 = row b's real length - 1, right padding): causal grouped-query
//    attention over positions 0..seqlens_k[b], the products above the diagonal skipped
//    (padded_attention.h with causal and kv_heads). k and v may be longer than q ([B, S >= Sq,
//    Nkv x d]: a shared prompt prefix's keys lead, optimize/prompt_prefix.h): query row i is then
//    position S - Sq + i, and seqlens_k counts the prefix. tide::optimize::UseTideCausalAttention writes it
//    at load time (attention_kernel "tide").
//  - ai.tide.BiasGelu(x [..., N], bias [N]) -> GELU(x + bias), the erf form (bias_gelu.h): what
//    Add + Gelu (or com.microsoft.BiasGelu) computes, in one AVX-512 pass.
//  - ai.tide.LayerNorm(x [..., N], gamma [N], beta [N]) and ai.tide.SkipLayerNorm(x, skip (x's
//    shape), gamma, beta, bias [N]), attribute epsilon (float): ONNX LayerNormalization over the
//    last axis and com.microsoft.SkipLayerNormalization's first output (layer_norm.h).
//  tide::optimize::UseTideElementwise writes these three at load time (elementwise_kernel "tide").
//
// Contract:
//  - RegisterTideOps adds the domain to a session's options; every session tide opens gets it
//    (runtime::OrtBackend and the load's probe sessions), so a model that uses the op opens
//    anywhere in tide. The domain and its operators are created once and live for the process.
//  - Shape or type mismatches at run time -> an ONNX Runtime error naming the input
//    (ORT_INVALID_ARGUMENT), never a crash. Intra-op threads: one (row, head) per task for attention,
//    blocks of rows for the others.
#pragma once

struct OrtSessionOptions;

namespace tide::runtime {

inline constexpr char kTideOpDomain[] = "ai.tide";
inline constexpr char kPaddedAttentionOp[] = "PaddedAttention";
inline constexpr char kCausalAttentionOp[] = "CausalAttention";
inline constexpr char kBiasGeluOp[] = "BiasGelu";
inline constexpr char kLayerNormOp[] = "LayerNorm";
inline constexpr char kSkipLayerNormOp[] = "SkipLayerNorm";
inline constexpr char kPaddedAttentionBf16[] = "bf16";  // PaddedAttention's attribute precision

// Throws Ort::Exception when ONNX Runtime refuses the domain.
void RegisterTideOps(OrtSessionOptions* options);

}  // namespace tide::runtime
