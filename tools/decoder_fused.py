"""The fused export form of a decoder reranker (tools/decoder.py): ONNX Runtime contrib operators
written by the exporter instead of the ~20 small operators per layer PyTorch's tracer emits.

  RMSNorm                          -> SimplifiedLayerNormalization (ONNX domain, ORT's CPU kernel)
  residual Add + RMSNorm           -> com.microsoft.SkipSimplifiedLayerNormalization (normed output
                                      and the residual sum, its 4th output)
  rotate-half RoPE of q and k      -> com.microsoft.RotaryEmbedding (position_ids = the graph's
                                      cumsum(attention_mask) - 1, cos/sin caches of
                                      max_sequence_length rows)
  causal grouped-query attention   -> com.microsoft.GroupQueryAttention (num_heads / kv_num_heads,
                                      seqlens_k = real length - 1 per row, total_sequence_length =
                                      the padded length, no past, no rotary inside)

Why at export and not in src/optimize: the exporter writes the model itself and knows each block's
structure, so nothing is pattern-matched against what one torch version's tracer happens to emit;
every decoder tide serves comes from tools/export_model.py (`tide serve --model DIR` exports too).

Contract:
  - `FusedDecoderReranker(reranker, max_positions)` shares the reranker's parameters; its forward
    in PyTorch computes exactly the unfused model's arithmetic (each fused operator's `forward` is
    the reference code), so the export's PyTorch reference is unchanged; only the traced graph
    differs.
  - GroupQueryAttention's CPU kernel takes the keys of row b as positions 0..seqlens_k[b], so the
    fused graph is correct for RIGHT-padded batches (what tide's batcher sends and what
    `tide verify-model` checks); a left-padded batch needs the unfused graph.
  - Positions must stay below `max_positions` (the entry's max_sequence_length): the rotary caches
    have that many rows.
  - `finish_fused_graph(model_proto, num_labels)` rewrites what torch cannot express (empty optional inputs
    and outputs, the output's width) in place; `fused_op_counts(model_proto)` counts the fused operators by type.
"""

from __future__ import annotations

from typing import Dict

import torch
from torch import nn

import decoder

GQA = "GroupQueryAttention"
ROTARY = "RotaryEmbedding"
SKIP_NORM = "SkipSimplifiedLayerNormalization"
NORM = "SimplifiedLayerNormalization"
FUSED_OPS = (NORM, SKIP_NORM, ROTARY, GQA)
_PLACEHOLDER_DOMAIN = "tide.export"


def _rms_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


class _RmsNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps: float):  # noqa: D401 (torch API)
        return _rms_reference(x, weight, eps)

    @staticmethod
    def symbolic(g, x, weight, eps: float):
        # ORT registers it in the ONNX domain, which torch's exporter checks against ONNX's own
        # schemas: written in a placeholder domain and moved by finish_fused_graph.
        return g.op(f"{_PLACEHOLDER_DOMAIN}::{NORM}", x, weight, axis_i=-1, epsilon_f=eps, stash_type_i=1)


class _SkipRmsNorm(torch.autograd.Function):
    """(rms_norm(x + skip), x + skip)."""

    @staticmethod
    def forward(ctx, x, skip, weight, eps: float):
        total = skip + x
        return _rms_reference(total, weight, eps), total

    @staticmethod
    def symbolic(g, x, skip, weight, eps: float):
        out = g.op(f"com.microsoft::{SKIP_NORM}", x, skip, weight, epsilon_f=eps, outputs=4)
        return out[0], out[3]


class _Rotary(torch.autograd.Function):
    """Rotate-half RoPE of x [b, s, heads * head_dim] at positions [b, s]."""

    @staticmethod
    def forward(ctx, x, positions, cos_cache, sin_cache, num_heads: int):
        b, s, width = x.shape
        head_dim = width // num_heads
        xh = x.view(b, s, num_heads, head_dim)
        cos = torch.cat((cos_cache[positions], cos_cache[positions]), dim=-1)[:, :, None]
        sin = torch.cat((sin_cache[positions], sin_cache[positions]), dim=-1)[:, :, None]
        return (xh * cos + decoder.rotate_half(xh) * sin).reshape(b, s, width)

    @staticmethod
    def symbolic(g, x, positions, cos_cache, sin_cache, num_heads: int):
        return g.op(f"com.microsoft::{ROTARY}", x, positions, cos_cache, sin_cache, interleaved_i=0,
                    num_heads_i=num_heads)


class _GroupQueryAttention(torch.autograd.Function):
    """Causal GQA of q [b, s, heads * d], k and v [b, s, kv_heads * d]; additive_mask [b, 1, s, s]
    is the reference's mask (the operator derives the same from seqlens_k for right padding)."""

    @staticmethod
    def forward(ctx, q, k, v, seqlens_k, total_length, additive_mask, heads: int, kv_heads: int, scale: float):
        b, s, _ = q.shape
        d = q.shape[-1] // heads
        groups = heads // kv_heads
        qh = q.view(b, s, heads, d).transpose(1, 2).reshape(b, kv_heads, groups, s, d)
        kh = k.view(b, s, kv_heads, d).transpose(1, 2)
        vh = v.view(b, s, kv_heads, d).transpose(1, 2)
        scores = torch.matmul(qh, kh[:, :, None].transpose(-1, -2)) * scale
        probs = torch.softmax(scores + additive_mask[:, :, None], dim=-1)
        ctx_ = torch.matmul(probs, vh[:, :, None])
        return ctx_.reshape(b, heads, s, d).transpose(1, 2).reshape(b, s, heads * d)

    @staticmethod
    def symbolic(g, q, k, v, seqlens_k, total_length, additive_mask, heads: int, kv_heads: int, scale: float):
        # past_key / past_value (inputs 3 and 4) are absent: finish_fused_graph inserts the empty names.
        out = g.op(f"com.microsoft::{GQA}", q, k, v, seqlens_k, total_length, num_heads_i=heads,
                   kv_num_heads_i=kv_heads, scale_f=scale, outputs=3)
        return out[0]


class FusedDecoderReranker(nn.Module):
    def __init__(self, reranker: decoder.DecoderReranker, max_positions: int):
        super().__init__()
        self.inner = reranker
        self.config = reranker.config
        m = reranker.model
        positions = torch.arange(max_positions, dtype=torch.int64).to(torch.float32)
        freqs = positions[:, None] * m.inv_freq[None, :]  # the same products DecoderModel computes
        self.register_buffer("cos_cache", freqs.cos(), persistent=False)
        self.register_buffer("sin_cache", freqs.sin(), persistent=False)

    def _attention(self, attn: decoder.Attention, x, positions, seqlens_k, total, additive_mask):
        b, s, _ = x.shape
        q, k, v = attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)
        if attn.qk_norm:
            q = _RmsNorm.apply(q.view(b, s, attn.heads, attn.head_dim), attn.q_norm.weight, attn.q_norm.eps)
            k = _RmsNorm.apply(k.view(b, s, attn.kv_heads, attn.head_dim), attn.k_norm.weight, attn.k_norm.eps)
            q, k = q.reshape(b, s, attn.heads * attn.head_dim), k.reshape(b, s, attn.kv_heads * attn.head_dim)
        q = _Rotary.apply(q, positions, self.cos_cache, self.sin_cache, attn.heads)
        k = _Rotary.apply(k, positions, self.cos_cache, self.sin_cache, attn.kv_heads)
        ctx = _GroupQueryAttention.apply(q, k, v, seqlens_k, total, additive_mask, attn.heads, attn.kv_heads,
                                         attn.head_dim ** -0.5)
        return attn.o_proj(ctx)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        m = self.inner.model
        mask = attention_mask.to(torch.int64)
        positions = (torch.cumsum(mask, dim=1) - 1).clamp(min=0)
        lengths = mask.sum(dim=1)
        seqlens_k = (lengths - 1).clamp(min=0).to(torch.int32)
        total = torch._shape_as_tensor(input_ids)[1].to(torch.int32)
        seq = input_ids.shape[1]
        index = torch.arange(seq, dtype=torch.int64, device=input_ids.device)
        causal = index[None, :] <= index[:, None]
        allowed = causal[None, :, :] & mask.bool()[:, None, :]
        zero = torch.zeros((), dtype=torch.float32)
        additive_mask = torch.where(allowed, zero, torch.tensor(torch.finfo(torch.float32).min))[:, None]

        x = m.embed_tokens(input_ids)
        layers = list(m.layers)
        normed = _RmsNorm.apply(x, layers[0].input_layernorm.weight, layers[0].input_layernorm.eps)
        for i, layer in enumerate(layers):
            a = self._attention(layer.self_attn, normed, positions, seqlens_k, total, additive_mask)
            post = layer.post_attention_layernorm
            normed, x = _SkipRmsNorm.apply(a, x, post.weight, post.eps)
            mlp = layer.mlp(normed)
            if i + 1 < len(layers):
                nxt = layers[i + 1].input_layernorm
                normed, x = _SkipRmsNorm.apply(mlp, x, nxt.weight, nxt.eps)
            else:
                x = x + mlp
        pooled = decoder.gather_rows(x, decoder.last_token_index(attention_mask))
        pooled = _RmsNorm.apply(pooled, m.norm.weight, m.norm.eps)
        return self.inner.score(pooled)


def finish_fused_graph(model, num_labels: int) -> None:
    """In place on an onnx.ModelProto: SimplifiedLayerNormalization moves to the ONNX domain (where
    ORT's kernel is), GroupQueryAttention gets empty past_key / past_value inputs,
    SkipSimplifiedLayerNormalization empty mean / inv_std_var outputs (unread), and the output
    `logits` its static width num_labels (torch's shape inference stops at the contrib operators)."""
    for out in model.graph.output:
        dims = out.type.tensor_type.shape.dim
        if len(dims) == 2:
            dims[1].Clear()
            dims[1].dim_value = num_labels
    for node in model.graph.node:
        if node.domain == _PLACEHOLDER_DOMAIN:
            node.domain = ""
        if node.domain != "com.microsoft":
            continue
        if node.op_type == GQA and len(node.input) == 5:
            rest = list(node.input)
            del node.input[:]
            node.input.extend(rest[:3] + ["", ""] + rest[3:])
        elif node.op_type == SKIP_NORM and len(node.output) == 4:
            node.output[1] = ""
            node.output[2] = ""
    kept = [o for o in model.opset_import if o.domain != _PLACEHOLDER_DOMAIN]
    del model.opset_import[:]
    model.opset_import.extend(kept)


def fused_op_counts(model) -> Dict[str, int]:
    counts = {op: 0 for op in FUSED_OPS}
    for node in model.graph.node:
        if node.op_type in counts:
            counts[node.op_type] += 1
    return counts
