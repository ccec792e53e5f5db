// tide::optimize::AddPromptPrefixInputs — a decoder reranker's graph that takes the keys and values
// of a prompt prefix every row shares, so that the rows carry only their tokens after it.
//
// Why: a decoder reranker's prompt opens with the same text for every pair (Qwen3-Reranker's system
// message, the user turn's opening and the default instruction: about 60 of a short pair's ~126
// tokens). Attention is causal, so the keys and values of those first P positions depend on those P
// tokens alone: computed once (runtime::OrtBackend::ComputePromptPrefix) they serve every row that
// starts with the same tokens, and each layer's weight products run over the rest of the row only.
//
// What it writes (after UseTideCausalAttention):
//  - per ai.tide.CausalAttention node n (graph order) the graph inputs kPromptPrefixKeyInput + n and
//    kPromptPrefixValueInput + n (domain/model_signature.h), float [1, "prompt_prefix_length",
//    width], width = kv_num_heads x head size (the value projection's width); the node reads
//    Concat(Expand(prefix, [batch, 1, 1]), own, axis 1) for its keys and values, so its queries
//    follow the prefix (runtime/tide_ops.h: keys longer than the queries lead them);
//  - the node's own keys and values (post-rotary) renamed kPromptPrefixKeyOutput + n /
//    kPromptPrefixValueOutput + n and made graph outputs [batch, sequence, width] (the prefix's are
//    read from a run over the prefix's tokens with an empty prefix);
//  - the rotary position ids (every com.microsoft.RotaryEmbedding's, one value: the exporter's
//    cumsum(attention_mask) - 1) and seqlens_k (every CausalAttention's, one int32 value) plus the
//    prefix length (the first key input's dimension 1).
//  With an empty prefix ([1, 0, width]) the graph computes exactly what it did before; with the
//  prefix of P tokens and a row's tokens after them, what the whole row gives (tested against it).
//
// Contract:
//  - Rewrites nothing and returns 0, with the reason in `skipped`, unless the graph has at least
//    one ai.tide.CausalAttention and no other attention operator (GroupQueryAttention,
//    MultiHeadAttention, Attention, PaddedAttention), an int64 rank-2 graph input attention_mask,
//    one position ids value computed in the graph for every RotaryEmbedding, one seqlens_k for
//    every CausalAttention, and a known width for each one's keys, read by that node alone.
//    Returns the number of attention nodes given prefix inputs.
//  - Free function on a caller-owned model; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "onnx/onnx_pb.h"

namespace tide::optimize {

int AddPromptPrefixInputs(onnx::ModelProto* model, std::vector<std::string>* skipped);

}  // namespace tide::optimize
