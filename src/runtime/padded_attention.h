// tide::runtime::PaddedAttention — multi-head self-attention over the real keys only.
//
// What ONNX Runtime's com.microsoft.MultiHeadAttention(q, k, v, bias, key_padding_mask) computes
// for an encoder (and, with causal and kv_heads, GroupQueryAttention's prefill for a decoder),
// with two differences in how, not in what:
//  - a padded key is skipped, not added to with a large negative number: each (row, head) packs
//    its real keys (mask != 0) and runs over those alone, so a batch padded from 200 to 320 tokens
//    spends its attention on 200 keys per row; the head keeps its own size (no extra mask column,
//    tide::optimize::MovePaddingMaskIntoKeys' way to reach ONNX Runtime's flash path);
//  - with AVX-512 (checked at run time; the build stays portable) the products run in register
//    blocks of 8 queries x 32 keys and 8 queries x one head, softmax with a degree-7 exp: FP32
//    throughout (padded_attention_test holds it within 2e-5 relative of the reference's doubles).
//
// Contract:
//  - q, k, v: [batch, seq, heads x head_size] row-major FP32 (self-attention: one seq for all);
//    bias: [3 x heads x head_size] (q, k, v parts) or null; mask: [batch, seq] int32, nonzero =
//    a real token; out: [batch, seq, heads x head_size]. scale multiplies q.k (1/sqrt(head_size)
//    for BERT). Every query row is computed, padded ones too (over the real keys), so the output
//    equals ONNX Runtime's everywhere up to exp(mask_filter_value) ~ 0. A row whose mask is all
//    zero attends to all its keys (what the additive mask amounts to then).
//  - `parallel_for(units, fn)` runs fn(u) for u in [0, units) (one unit = one (row, head)),
//    serially or on a pool; nullptr: serially. Each unit writes a disjoint part of `out`.
//  - Thread-safe for distinct `out`; scratch is per thread (thread_local, grown, reused).
//  - precision kBf16: the two products (q.k and p.v) multiply BF16 roundings of q, k, v and the
//    softmax numerators p (vdpbf16ps, 2 products per FP32 lane and instruction), accumulating in
//    FP32; max, exp, sums and the output stay FP32, and the normalizer sums the rounded p, so each
//    output is a convex combination of the rounded values. Each rounding moves a value by at most
//    2^-9 of itself (held within 1.5e-2 of the output scale of the reference by the tests). Runs FP32
//    where the CPU lacks AVX512_BF16 (PaddedAttentionBf16Supported()).
//  - queries (0 = seq - query_offset): only `queries` positions are query rows, q and out are [batch,
//    queries, heads x head_size] and k, v, mask keep [batch, seq, ...]: query row i sits at key
//    position query_offset + i and attends as it would among all seq queries. query_offset 0 with
//    fewer queries: an encoder's last layer computing its pooled first token alone; query_offset P:
//    a decoder's rows after a shared prompt prefix whose P keys and values lead k and v
//    (optimize/prompt_prefix.h), so with causal query row i sees the keys at positions <= P + i.
//  - kv_heads (grouped-query attention; 0 = heads): k and v are [batch, seq, kv_heads x head_size],
//    query head h reads key/value head h / (heads / kv_heads) (heads a multiple of kv_heads); bias,
//    when given, is [heads x d (q), kv_heads x d (k), kv_heads x d (v)].
//  - causal: query i attends the real keys at positions <= query_offset + i (a decoder's mask), and a query before
//    every real key attends the first one; the products above the diagonal are skipped, not
//    masked: a block of 8 queries stops at the keys its last query sees. Without causal every query
//    attends every real key.
//  - PaddedAttentionReference: the plain loops, the tests' oracle and the path without AVX-512.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "runtime/parallel_for.h"

namespace tide::runtime {

enum class AttentionPrecision { kFp32, kBf16 };

struct AttentionShape {
  int64_t batch = 0, seq = 0, heads = 0, head_size = 0;
  float scale = 1.0f;
  AttentionPrecision precision = AttentionPrecision::kFp32;
  int64_t kv_heads = 0;  // key/value heads (grouped-query attention); 0: heads
  bool causal = false;   // query i sees the keys at positions <= i
  // Query rows: `queries` positions of each row from query_offset on (q and out [batch, queries,
  // ...]); 0: seq - query_offset. An encoder's last layer needs its pooled token's row alone
  // (optimize/pooled_token.h); a decoder's rows follow a shared prompt prefix of query_offset keys
  // (optimize/prompt_prefix.h).
  int64_t queries = 0;
  int64_t query_offset = 0;

  int64_t KvHeads() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t Queries() const { return queries > 0 ? queries : seq - query_offset; }
};

void PaddedAttention(const AttentionShape& shape, const float* q, const float* k, const float* v, const float* bias,
                     const int32_t* mask, float* out, const ParallelFor& parallel_for = nullptr);

void PaddedAttentionReference(const AttentionShape& shape, const float* q, const float* k, const float* v,
                              const float* bias, const int32_t* mask, float* out);

// Whether PaddedAttention runs its AVX-512 path on this CPU for this head size (a multiple of 16,
// at most 128); otherwise it runs the reference loops.
bool PaddedAttentionIsVectorized(int64_t head_size);
// Whether this CPU has the AVX-512 the vectorized path needs (every head size 16, 32, ..., 128).
bool PaddedAttentionCpuSupported();
// Whether precision kBf16 multiplies in BF16 here (AVX512_BF16); otherwise it runs FP32.
bool PaddedAttentionBf16Supported();

}  // namespace tide::runtime
