"""Decoder-only LLM rerankers in plain PyTorch: Qwen3 and Qwen2 (one prefill pass, no KV cache).

The parameter names equal those of HuggingFace transformers' Qwen3ForCausalLM / Qwen2ForCausalLM and
Qwen3ForSequenceClassification / Qwen2ForSequenceClassification, so that an HF state dict loads
strictly without the transformers package (which Debian does not ship), as tools/crossencoder.py
does for BERT and XLM-R. Only inference is modelled: no dropout, no cache, no generation.

The exported graph is always a `DecoderReranker` (HF's *ForSequenceClassification layout: `model` +
`score`, a [num_labels, hidden] linear without bias) that scores the hidden state of the LAST REAL
token of each row:
  - position ids are cumsum(attention_mask) - 1, clamped at 0, so right or left padding gives the
    real tokens the positions 0..n-1 they would have alone;
  - attention is causal and never sees a padded key;
  - the pooled row is the hidden state at the last position whose attention_mask is 1.
So a row scores the same in any batch as alone. A CausalLM reranker (Qwen3-Reranker,
mxbai-rerank-v2) is turned into that layout by `yes_no_reranker`: its score is
logit(yes) - logit(no) = (lm_head[yes] - lm_head[no]) . h, one row of weights, and
sigmoid(that) = softmax([logit(no), logit(yes)])[1], the model card's score; the graph never
computes the vocabulary.

Contract: `DecoderConfig.from_hf_dict` reads an HF config.json dict (CheckpointError for an
unsupported architecture or setting); `build_causal_lm` / `build_reranker` return eval-mode modules
with seeded random weights; `load_hf_state_dict` loads strictly and raises CheckpointError naming
missing, unexpected and mis-shaped keys; the reranker's forward takes int64 input_ids and
attention_mask [batch, sequence] and returns float32 logits [batch, num_labels].
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional

import torch
from torch import nn

from crossencoder import CheckpointError, load_strictly

QWEN3 = "qwen3"
QWEN2 = "qwen2"

CAUSAL_LM = "causal-lm"          # *ForCausalLM: needs --task rerank (the yes/no head)
SEQUENCE_CLASSIFICATION = "seq-cls"  # *ForSequenceClassification: the `score` head as it is

ARCHITECTURES = {
    "Qwen3ForCausalLM": (QWEN3, CAUSAL_LM),
    "Qwen2ForCausalLM": (QWEN2, CAUSAL_LM),
    "Qwen3ForSequenceClassification": (QWEN3, SEQUENCE_CLASSIFICATION),
    "Qwen2ForSequenceClassification": (QWEN2, SEQUENCE_CLASSIFICATION),
}

# Buffers some checkpoints store that carry no learned weights.
_IGNORABLE_SUFFIXES = ("rotary_emb.inv_freq",)


def is_decoder_config(d: Dict) -> bool:
    """Whether an HF config.json dict names a decoder architecture (supported or not): a
    *ForCausalLM / *ForSequenceClassification of a decoder family, or a qwen model_type."""
    archs = d.get("architectures") or []
    if any(isinstance(a, str) and a.endswith("ForCausalLM") for a in archs):
        return True
    if any(a in ARCHITECTURES for a in archs):
        return True
    return d.get("model_type") in (QWEN2, QWEN3)


@dataclasses.dataclass
class DecoderConfig:
    family: str = QWEN3
    kind: str = CAUSAL_LM
    vocab_size: int = 151936
    hidden_size: int = 1024
    num_hidden_layers: int = 28
    num_attention_heads: int = 16
    num_key_value_heads: int = 8
    head_dim: int = 128
    intermediate_size: int = 3072
    max_position_embeddings: int = 40960
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1000000.0
    tie_word_embeddings: bool = True
    attention_bias: bool = False  # Qwen3: q/k/v/o biases when true; Qwen2 always has q/k/v biases
    num_labels: int = 1           # the score head's rows (seq-cls); the yes/no head has 1
    pad_token_id: Optional[int] = None

    @property
    def architecture(self) -> str:
        family = "Qwen3" if self.family == QWEN3 else "Qwen2"
        return family + ("ForCausalLM" if self.kind == CAUSAL_LM else "ForSequenceClassification")

    @property
    def qkv_bias(self) -> bool:
        return self.family == QWEN2 or self.attention_bias

    @property
    def o_bias(self) -> bool:
        return self.family == QWEN3 and self.attention_bias

    def validate(self) -> None:
        if self.family not in (QWEN3, QWEN2):
            raise CheckpointError(f"unsupported decoder family {self.family!r}")
        for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                    "head_dim", "intermediate_size", "max_position_embeddings"):
            if getattr(self, key) < 1:
                raise CheckpointError(f"config.json {key}={getattr(self, key)} must be >= 1")
        if self.num_attention_heads % self.num_key_value_heads != 0:
            raise CheckpointError(f"num_attention_heads {self.num_attention_heads} is not a multiple of "
                                  f"num_key_value_heads {self.num_key_value_heads}")
        if self.head_dim % 2 != 0:
            raise CheckpointError(f"head_dim {self.head_dim} must be even (rotary embeddings)")
        if self.num_labels < 1:
            raise CheckpointError(f"num_labels must be >= 1, got {self.num_labels}")

    @classmethod
    def from_hf_dict(cls, d: Dict) -> "DecoderConfig":
        archs = d.get("architectures") or []
        known = [a for a in archs if a in ARCHITECTURES]
        if not known:
            raise CheckpointError(
                f"config.json architectures {archs!r} (model_type {d.get('model_type')!r}) is not a supported "
                f"decoder: supported are {', '.join(sorted(ARCHITECTURES))}")
        family, kind = ARCHITECTURES[known[0]]
        if d.get("hidden_act", "silu") != "silu":
            raise CheckpointError(f"config.json hidden_act={d['hidden_act']!r} is not supported (only 'silu')")
        scaling = d.get("rope_scaling")
        if scaling not in (None, {}) and not (isinstance(scaling, dict) and
                                               scaling.get("rope_type", scaling.get("type")) == "default"):
            raise CheckpointError(f"config.json rope_scaling={scaling!r} is not supported (only none)")
        if d.get("use_sliding_window"):
            raise CheckpointError("config.json use_sliding_window=true is not supported (full attention only)")
        hidden = int(d.get("hidden_size", 1024))
        heads = int(d.get("num_attention_heads", 16))
        head_dim = d.get("head_dim") if family == QWEN3 else None
        if head_dim is None:
            if hidden % heads != 0:
                raise CheckpointError(f"hidden_size {hidden} is not a multiple of num_attention_heads {heads}")
            head_dim = hidden // heads
        num_labels = 1
        if kind == SEQUENCE_CLASSIFICATION:
            num_labels = d.get("num_labels")
            if num_labels is None and isinstance(d.get("id2label"), dict):
                num_labels = len(d["id2label"])
            num_labels = int(num_labels if num_labels is not None else 2)  # HF's default, as crossencoder
        pad = d.get("pad_token_id")
        cfg = cls(family=family, kind=kind,
                  vocab_size=int(d.get("vocab_size", 151936)),
                  hidden_size=hidden,
                  num_hidden_layers=int(d.get("num_hidden_layers", 28)),
                  num_attention_heads=heads,
                  num_key_value_heads=int(d.get("num_key_value_heads", heads)),
                  head_dim=int(head_dim),
                  intermediate_size=int(d.get("intermediate_size", 3072)),
                  max_position_embeddings=int(d.get("max_position_embeddings", 32768)),
                  rms_norm_eps=float(d.get("rms_norm_eps", 1e-6)),
                  rope_theta=float(d.get("rope_theta", 1000000.0 if family == QWEN3 else 10000.0)),
                  tie_word_embeddings=bool(d.get("tie_word_embeddings", False)),
                  attention_bias=bool(d.get("attention_bias", False)),
                  num_labels=num_labels,
                  pad_token_id=int(pad) if isinstance(pad, int) else None)
        cfg.validate()
        return cfg

    def to_hf_dict(self) -> Dict:
        """The config.json an HF checkpoint of this model would carry."""
        d = {
            "architectures": [self.architecture],
            "model_type": self.family,
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "intermediate_size": self.intermediate_size,
            "hidden_act": "silu",
            "max_position_embeddings": self.max_position_embeddings,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": None,
            "tie_word_embeddings": self.tie_word_embeddings,
            "use_sliding_window": False,
        }
        if self.family == QWEN3:
            d["head_dim"] = self.head_dim
            d["attention_bias"] = self.attention_bias
        if self.kind == SEQUENCE_CLASSIFICATION:
            d["num_labels"] = self.num_labels
        if self.pad_token_id is not None:
            d["pad_token_id"] = self.pad_token_id
        return d


# Real shapes (seeded random weights) and small shapes for tests. The small ones keep the real
# vocabulary so that the real Qwen3 tokenizer's ids are valid inputs.
PRESETS: Dict[str, DecoderConfig] = {
    # Qwen/Qwen3-Reranker-0.6B (Qwen3ForCausalLM, yes/no head).
    "qwen3-reranker-0.6b": DecoderConfig(),
    # mixedbread-ai/mxbai-rerank-base-v2: Qwen2.5-0.5B shape (Qwen2ForCausalLM, tokens "1"/"0").
    "mxbai-rerank-base-v2": DecoderConfig(family=QWEN2, hidden_size=896, num_hidden_layers=24,
                                          num_attention_heads=14, num_key_value_heads=2, head_dim=64,
                                          intermediate_size=4864, max_position_embeddings=32768),
    "qwen3-tiny": DecoderConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                head_dim=32, intermediate_size=128),
    "qwen2-tiny": DecoderConfig(family=QWEN2, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                num_key_value_heads=2, head_dim=16, intermediate_size=128,
                                max_position_embeddings=32768),
}

# The yes/no tokens each preset's family uses (--rerank-tokens overrides them for a folder).
PRESET_RERANK_TOKENS = {"qwen3-reranker-0.6b": ("yes", "no"), "mxbai-rerank-base-v2": ("1", "0"),
                        "qwen3-tiny": ("yes", "no"), "qwen2-tiny": ("1", "0")}


# ---- modules (named like HF so state dicts match) ------------------------------------------------

class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    """Grouped-query causal self-attention with rotary embeddings (and Qwen3's per-head q/k RMSNorm)."""

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden_size, self.heads * self.head_dim, bias=cfg.qkv_bias)
        self.k_proj = nn.Linear(cfg.hidden_size, self.kv_heads * self.head_dim, bias=cfg.qkv_bias)
        self.v_proj = nn.Linear(cfg.hidden_size, self.kv_heads * self.head_dim, bias=cfg.qkv_bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, cfg.hidden_size, bias=cfg.o_bias)
        if cfg.family == QWEN3:
            self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
            self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        self.qk_norm = cfg.family == QWEN3

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, additive_mask: torch.Tensor):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)  # [b, heads, s, d]
        cos, sin = cos[:, None], sin[:, None]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # Grouped query attention without copying K/V: the query heads of one KV head form a group axis.
        groups = self.heads // self.kv_heads
        q = q.reshape(b, self.kv_heads, groups, s, self.head_dim)
        scores = torch.matmul(q, k[:, :, None].transpose(-1, -2)) * (self.head_dim ** -0.5)
        probs = torch.softmax(scores + additive_mask[:, :, None], dim=-1)
        ctx = torch.matmul(probs, v[:, :, None])  # [b, kv, groups, s, d]
        ctx = ctx.reshape(b, self.heads, s, self.head_dim).transpose(1, 2).reshape(b, s, self.heads * self.head_dim)
        return self.o_proj(ctx)


class MLP(nn.Module):
    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.self_attn = Attention(cfg)
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x, cos, sin, additive_mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, additive_mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class DecoderModel(nn.Module):
    """HF's Qwen3Model / Qwen2Model. forward returns the hidden states BEFORE the final norm
    (`norm` is per token, so callers apply it to the rows they keep)."""

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList([DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers)])
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.int64).float() / cfg.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        mask = attention_mask.to(torch.int64)
        positions = (torch.cumsum(mask, dim=1) - 1).clamp(min=0)
        freqs = positions.to(torch.float32)[..., None] * self.inv_freq[None, None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        seq = input_ids.shape[1]
        index = torch.arange(seq, dtype=torch.int64, device=input_ids.device)
        causal = index[None, :] <= index[:, None]                       # [s, s]: key <= query
        allowed = causal[None, :, :] & mask.bool()[:, None, :]           # [b, s, s]
        # 0 where a query may see a key, the most negative float32 elsewhere: a padded key gets zero
        # weight, so padding cannot change a real token's output.
        zero = torch.zeros((), dtype=torch.float32)
        additive_mask = torch.where(allowed, zero, torch.tensor(torch.finfo(torch.float32).min))[:, None]
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x, cos, sin, additive_mask)
        return x


def last_token_index(attention_mask: torch.Tensor) -> torch.Tensor:
    """[batch]: the last position whose attention_mask is 1 (0 for an all-padding row)."""
    index = torch.arange(attention_mask.shape[1], dtype=torch.int64, device=attention_mask.device)
    return (index[None, :] * attention_mask.to(torch.int64)).max(dim=1).values


def gather_rows(hidden: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """hidden [b, s, h], index [b] -> [b, h]."""
    return hidden.gather(1, index[:, None, None].expand(-1, 1, hidden.shape[-1])).squeeze(1)


class DecoderForCausalLM(nn.Module):
    """HF's Qwen3ForCausalLM / Qwen2ForCausalLM: loads a CausalLM checkpoint. `lm_head` exists only
    when the embeddings are not tied (a tied checkpoint's head IS embed_tokens)."""

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.config = cfg
        self.model = DecoderModel(cfg)
        if not cfg.tie_word_embeddings:
            self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    def head_weight(self) -> torch.Tensor:
        return self.model.embed_tokens.weight if self.config.tie_word_embeddings else self.lm_head.weight

    def forward(self, input_ids, attention_mask):
        """Full-vocabulary logits at each row's last real token [b, vocab] (tests only)."""
        hidden = self.model(input_ids, attention_mask)
        pooled = self.model.norm(gather_rows(hidden, last_token_index(attention_mask)))
        return pooled @ self.head_weight().t()


class DecoderReranker(nn.Module):
    """HF's Qwen3ForSequenceClassification / Qwen2ForSequenceClassification, scoring the last real
    token of each row: the exported graph."""

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.config = cfg
        self.model = DecoderModel(cfg)
        self.score = nn.Linear(cfg.hidden_size, cfg.num_labels, bias=False)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.model(input_ids, attention_mask)
        pooled = self.model.norm(gather_rows(hidden, last_token_index(attention_mask)))
        return self.score(pooled)


def yes_no_reranker(lm: DecoderForCausalLM, yes_id: int, no_id: int) -> DecoderReranker:
    """The reranker whose one logit is logit(yes) - logit(no) of `lm` at the last real token."""
    cfg = lm.config
    for name, token_id in (("yes", yes_id), ("no", no_id)):
        if not 0 <= token_id < cfg.vocab_size:
            raise CheckpointError(f"the {name} token id {token_id} is outside the vocabulary (0..{cfg.vocab_size - 1})")
    if yes_id == no_id:
        raise CheckpointError(f"the yes and no tokens are the same token ({yes_id})")
    out = DecoderReranker(dataclasses.replace(cfg, kind=SEQUENCE_CLASSIFICATION, num_labels=1))
    out.model = lm.model
    head = lm.head_weight().detach()
    with torch.no_grad():
        out.score.weight.copy_((head[yes_id] - head[no_id])[None, :])
    return out.eval()


def _init_weights(model: nn.Module, seed: Optional[int]) -> None:
    """Seeded random weights that make every part matter: linear layers with unit gain
    (normal(0, 1/sqrt(fan_in)), so attention and MLP outputs are not negligible next to the
    residual stream), small random biases, embeddings normal(0, 0.02) (a tied head then gives
    yes-no logits of order 1), RMSNorm weights 1 + normal(0, 0.1) (so a swapped norm shows)."""
    if seed is not None:
        torch.manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=module.in_features ** -0.5)
                if module.bias is not None:
                    nn.init.normal_(module.bias, std=0.02)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, std=0.02)
            elif isinstance(module, RMSNorm):
                module.weight.copy_(1.0 + 0.1 * torch.randn(module.weight.shape))


def build_causal_lm(cfg: DecoderConfig, seed: Optional[int] = None) -> DecoderForCausalLM:
    cfg = dataclasses.replace(cfg, kind=CAUSAL_LM)
    cfg.validate()
    model = DecoderForCausalLM(cfg)
    _init_weights(model, seed)
    if not cfg.tie_word_embeddings:  # an untied head of the same scale as a tied one
        with torch.no_grad():
            nn.init.normal_(model.lm_head.weight, std=0.02)
    return model.eval()


def build_reranker(cfg: DecoderConfig, seed: Optional[int] = None) -> DecoderReranker:
    cfg = dataclasses.replace(cfg, kind=SEQUENCE_CLASSIFICATION)
    cfg.validate()
    model = DecoderReranker(cfg)
    _init_weights(model, seed)
    return model.eval()


def build_model(cfg: DecoderConfig, seed: Optional[int] = None) -> nn.Module:
    """The module a checkpoint of cfg.kind loads into."""
    return build_causal_lm(cfg, seed) if cfg.kind == CAUSAL_LM else build_reranker(cfg, seed)


def load_hf_state_dict(model: nn.Module, state_dict: Dict[str, torch.Tensor]) -> None:
    """Loads HF-named weights strictly; raises CheckpointError naming missing/unexpected keys. A
    tied CausalLM checkpoint may also carry lm_head.weight (a copy of embed_tokens): it is ignored,
    as HF's tying does."""
    cfg = model.config
    cleaned = {}
    for k, v in state_dict.items():
        if k.endswith(_IGNORABLE_SUFFIXES):
            continue
        if k == "lm_head.weight" and cfg.kind == CAUSAL_LM and cfg.tie_word_embeddings:
            continue
        cleaned[k] = v
    load_strictly(model, cleaned)


# ---- tokens ----------------------------------------------------------------------------------------

def _byte_level_alphabet() -> Dict[int, str]:
    """GPT-2's byte -> printable character map used by byte-level BPE vocabularies."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    mapping, extra = {}, 0
    for b in range(256):
        if b in printable:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def token_id(tokenizer: Dict, text: str, where: str) -> int:
    """The id of `text` as ONE token of a tokenizer.json dict: an added token with that content,
    else the vocabulary entry (byte-level BPE vocabularies spell bytes with GPT-2's alphabet, so
    " yes" is "Ġyes"). CheckpointError naming the token when it is not one token."""
    for added in tokenizer.get("added_tokens") or []:
        if isinstance(added, dict) and added.get("content") == text:
            return int(added["id"])
    model = tokenizer.get("model") or {}
    vocab = model.get("vocab")
    if not isinstance(vocab, dict):
        raise CheckpointError(f"{where}: model.vocab is not a token -> id object; cannot look up {text!r}")
    byte_level = "ByteLevel" in repr(tokenizer.get("pre_tokenizer")) or "ByteLevel" in repr(tokenizer.get("decoder"))
    spelled = "".join(_byte_level_alphabet()[b] for b in text.encode("utf-8")) if byte_level else text
    if not text or spelled not in vocab:
        raise CheckpointError(f"{where}: the rerank token {text!r} is not one token of the vocabulary "
                              f"(pass --rerank-tokens YES,NO with two single tokens)")
    return int(vocab[spelled])
