"""Cross-encoder rerankers in plain PyTorch: BERT-style and XLM-RoBERTa-style sequence classifiers.

The parameter names equal those of HuggingFace transformers' BertForSequenceClassification and
XLMRobertaForSequenceClassification, so that `load_state_dict` of a real `pytorch_model.bin`
works without the transformers package (which Debian does not ship). Only inference is modelled:
no dropout, no gradient checkpointing, no caches.

Contract: `CrossEncoderConfig.from_hf_dict` reads an HF config.json dict; `build_model(config)`
returns an eval-mode `torch.nn.Module` whose forward takes int64 tensors
(input_ids, attention_mask[, token_type_ids]) of shape [batch, sequence] and returns logits of
shape [batch, num_labels] in float32. `load_hf_state_dict` loads a checkpoint strictly and raises
`CheckpointError` listing missing and unexpected keys.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Optional

import torch
from torch import nn

BERT = "bert"
XLM_ROBERTA = "xlm-roberta"

# Buffers that some HF versions store in checkpoints but that carry no learned weights.
_IGNORABLE_CHECKPOINT_SUFFIXES = ("embeddings.position_ids", "embeddings.token_type_ids")


class CheckpointError(Exception):
    """A checkpoint folder or state dict that does not fit the model."""


@dataclasses.dataclass
class CrossEncoderConfig:
    model_type: str = BERT  # bert | xlm-roberta (roberta is read as xlm-roberta: same layout)
    vocab_size: int = 30522
    hidden_size: int = 384
    num_hidden_layers: int = 6
    num_attention_heads: int = 12
    intermediate_size: int = 1536
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    num_labels: int = 1
    pad_token_id: int = 0

    @property
    def uses_token_type_ids(self) -> bool:
        """Whether the exported graph takes token_type_ids (BERT does, XLM-R does not)."""
        return self.model_type == BERT

    @property
    def max_sequence_length(self) -> int:
        """Longest input the position table allows (XLM-R reserves padding_idx + 1 rows)."""
        if self.model_type == BERT:
            return self.max_position_embeddings
        return self.max_position_embeddings - self.pad_token_id - 1

    def validate(self) -> None:
        if self.model_type not in (BERT, XLM_ROBERTA):
            raise CheckpointError(f"unsupported model_type {self.model_type!r} (want bert, xlm-roberta or roberta)")
        if self.hidden_size % self.num_attention_heads != 0:
            raise CheckpointError(
                f"hidden_size {self.hidden_size} is not a multiple of num_attention_heads {self.num_attention_heads}")
        if self.num_labels < 1:
            raise CheckpointError(f"num_labels must be >= 1, got {self.num_labels}")

    @classmethod
    def from_hf_dict(cls, d: Dict) -> "CrossEncoderConfig":
        model_type = d.get("model_type", BERT)
        if model_type == "roberta":
            model_type = XLM_ROBERTA
        defaults = cls() if model_type == BERT else xlmr_defaults()
        num_labels = d.get("num_labels")
        if num_labels is None and isinstance(d.get("id2label"), dict):
            num_labels = len(d["id2label"])
        cfg = cls(
            model_type=model_type,
            vocab_size=int(d.get("vocab_size", defaults.vocab_size)),
            hidden_size=int(d.get("hidden_size", defaults.hidden_size)),
            num_hidden_layers=int(d.get("num_hidden_layers", defaults.num_hidden_layers)),
            num_attention_heads=int(d.get("num_attention_heads", defaults.num_attention_heads)),
            intermediate_size=int(d.get("intermediate_size", defaults.intermediate_size)),
            max_position_embeddings=int(d.get("max_position_embeddings", defaults.max_position_embeddings)),
            type_vocab_size=int(d.get("type_vocab_size", defaults.type_vocab_size)),
            layer_norm_eps=float(d.get("layer_norm_eps", defaults.layer_norm_eps)),
            num_labels=int(num_labels if num_labels is not None else 2),  # HF's default is 2 labels
            pad_token_id=int(d.get("pad_token_id", defaults.pad_token_id)),
        )
        for key, expected in (("hidden_act", "gelu"), ("position_embedding_type", "absolute")):
            if d.get(key, expected) != expected:
                raise CheckpointError(f"config.json {key}={d[key]!r} is not supported (only {expected!r})")
        cfg.validate()
        return cfg

    def to_hf_dict(self) -> Dict:
        """The config.json an HF checkpoint of this model would carry."""
        arch = "BertForSequenceClassification" if self.model_type == BERT else "XLMRobertaForSequenceClassification"
        return {
            "architectures": [arch],
            "model_type": self.model_type,
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "intermediate_size": self.intermediate_size,
            "hidden_act": "gelu",
            "max_position_embeddings": self.max_position_embeddings,
            "type_vocab_size": self.type_vocab_size,
            "layer_norm_eps": self.layer_norm_eps,
            "pad_token_id": self.pad_token_id,
            "id2label": {str(i): f"LABEL_{i}" for i in range(self.num_labels)},
            "label2id": {f"LABEL_{i}": i for i in range(self.num_labels)},
        }


def xlmr_defaults() -> CrossEncoderConfig:
    return CrossEncoderConfig(model_type=XLM_ROBERTA, vocab_size=250002, hidden_size=768, num_hidden_layers=12,
                              num_attention_heads=12, intermediate_size=3072, max_position_embeddings=514,
                              type_vocab_size=1, layer_norm_eps=1e-5, num_labels=1, pad_token_id=1)


PRESETS: Dict[str, CrossEncoderConfig] = {
    # The default demo model: the shape of cross-encoder/ms-marco-MiniLM-L-6-v2.
    "minilm-l6": CrossEncoderConfig(model_type=BERT, vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                                    num_attention_heads=12, intermediate_size=1536, max_position_embeddings=512,
                                    type_vocab_size=2, layer_norm_eps=1e-12, num_labels=1, pad_token_id=0),
    "bge-reranker-base": xlmr_defaults(),
    "bge-reranker-large": dataclasses.replace(xlmr_defaults(), hidden_size=1024, num_hidden_layers=24,
                                              num_attention_heads=16, intermediate_size=4096),
    # Small shapes for tests.
    "tiny-bert": CrossEncoderConfig(model_type=BERT, vocab_size=2048, hidden_size=64, num_hidden_layers=2,
                                    num_attention_heads=4, intermediate_size=128, max_position_embeddings=128,
                                    type_vocab_size=2, layer_norm_eps=1e-12, num_labels=1, pad_token_id=0),
    "tiny-xlmr": dataclasses.replace(xlmr_defaults(), vocab_size=2048, hidden_size=64, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=128, max_position_embeddings=130),
}


# ---- modules (named like HF so state dicts match) ------------------------------------------------

class Embeddings(nn.Module):
    def __init__(self, cfg: CrossEncoderConfig):
        super().__init__()
        pad = cfg.pad_token_id
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size, padding_idx=pad)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, cfg.hidden_size,
                                                padding_idx=pad if cfg.model_type == XLM_ROBERTA else None)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.model_type = cfg.model_type
        self.padding_idx = pad

    def forward(self, input_ids: torch.Tensor, token_type_ids: Optional[torch.Tensor]) -> torch.Tensor:
        if self.model_type == XLM_ROBERTA:
            # HF create_position_ids_from_input_ids: real tokens count from padding_idx + 1, pads sit at padding_idx.
            mask = input_ids.ne(self.padding_idx).to(torch.int64)
            position_ids = torch.cumsum(mask, dim=1) * mask + self.padding_idx
        else:
            seq = input_ids.shape[1]
            position_ids = torch.arange(seq, dtype=torch.int64, device=input_ids.device).unsqueeze(0)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids) + \
            self.position_embeddings(position_ids)
        return self.LayerNorm(x)


class SelfAttention(nn.Module):
    def __init__(self, cfg: CrossEncoderConfig):
        super().__init__()
        self.num_heads = cfg.num_attention_heads
        self.head_size = cfg.hidden_size // cfg.num_attention_heads
        self.query = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.key = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.value = nn.Linear(cfg.hidden_size, cfg.hidden_size)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        return x.view(b, s, self.num_heads, self.head_size).permute(0, 2, 1, 3)

    def forward(self, hidden: torch.Tensor, additive_mask: torch.Tensor) -> torch.Tensor:
        q, k, v = self._split(self.query(hidden)), self._split(self.key(hidden)), self._split(self.value(hidden))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_size) + additive_mask
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3)
        b, s = ctx.shape[0], ctx.shape[1]
        return ctx.reshape(b, s, self.num_heads * self.head_size)


class DenseLayerNorm(nn.Module):
    """HF's BertSelfOutput / BertOutput: dense, then LayerNorm of (dense + residual)."""

    def __init__(self, in_size: int, cfg: CrossEncoderConfig):
        super().__init__()
        self.dense = nn.Linear(in_size, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(x) + residual)


class Attention(nn.Module):
    def __init__(self, cfg: CrossEncoderConfig):
        super().__init__()
        self.self = SelfAttention(cfg)
        self.output = DenseLayerNorm(cfg.hidden_size, cfg)

    def forward(self, hidden: torch.Tensor, additive_mask: torch.Tensor) -> torch.Tensor:
        return self.output(self.self(hidden, additive_mask), hidden)


class Intermediate(nn.Module):
    def __init__(self, cfg: CrossEncoderConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.intermediate_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.gelu(self.dense(x))  # exact (erf) GELU, as HF's "gelu"


class Layer(nn.Module):
    def __init__(self, cfg: CrossEncoderConfig):
        super().__init__()
        self.attention = Attention(cfg)
        self.intermediate = Intermediate(cfg)
        self.output = DenseLayerNorm(cfg.intermediate_size, cfg)

    def forward(self, hidden: torch.Tensor, additive_mask: torch.Tensor) -> torch.Tensor:
        attn = self.attention(hidden, additive_mask)
        return self.output(self.intermediate(attn), attn)


class Encoder(nn.Module):
    def __init__(self, cfg: CrossEncoderConfig):
        super().__init__()
        self.layer = nn.ModuleList([Layer(cfg) for _ in range(cfg.num_hidden_layers)])

    def forward(self, hidden: torch.Tensor, additive_mask: torch.Tensor) -> torch.Tensor:
        for layer in self.layer:
            hidden = layer(hidden, additive_mask)
        return hidden


class Pooler(nn.Module):
    def __init__(self, cfg: CrossEncoderConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden[:, 0]))


class Backbone(nn.Module):
    """HF's BertModel / XLMRobertaModel (the pooler only for BERT)."""

    def __init__(self, cfg: CrossEncoderConfig):
        super().__init__()
        self.embeddings = Embeddings(cfg)
        self.encoder = Encoder(cfg)
        if cfg.model_type == BERT:
            self.pooler = Pooler(cfg)

    def forward(self, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
        hidden = self.embeddings(input_ids, token_type_ids)
        # [batch, 1, 1, seq]: 0 where attended, the most negative float32 where padded, so a padded
        # key gets zero attention weight and cannot change any other position's output.
        keep = attention_mask.to(torch.float32)[:, None, None, :]
        additive_mask = (1.0 - keep) * torch.finfo(torch.float32).min
        return self.encoder(hidden, additive_mask)


class ClassificationHead(nn.Module):
    """HF's RobertaClassificationHead: dense + tanh + out_proj on the <s> token."""

    def __init__(self, cfg: CrossEncoderConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.out_proj = nn.Linear(cfg.hidden_size, cfg.num_labels)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.out_proj(torch.tanh(self.dense(hidden[:, 0])))


class BertForSequenceClassification(nn.Module):
    def __init__(self, cfg: CrossEncoderConfig):
        super().__init__()
        self.config = cfg
        self.bert = Backbone(cfg)
        self.classifier = nn.Linear(cfg.hidden_size, cfg.num_labels)

    def forward(self, input_ids, attention_mask, token_type_ids):
        hidden = self.bert(input_ids, attention_mask, token_type_ids)
        return self.classifier(self.bert.pooler(hidden))


class XLMRobertaForSequenceClassification(nn.Module):
    def __init__(self, cfg: CrossEncoderConfig):
        super().__init__()
        self.config = cfg
        self.roberta = Backbone(cfg)
        self.classifier = ClassificationHead(cfg)

    def forward(self, input_ids, attention_mask):
        return self.classifier(self.roberta(input_ids, attention_mask))


def build_model(cfg: CrossEncoderConfig, seed: Optional[int] = None) -> nn.Module:
    """A model with seeded random weights, in eval mode.

    HF's initialiser (normal(0, 0.02), LayerNorm 1/0), except the layer that produces the logits,
    which gets normal(0, 1): with 0.02 every score of an untrained model would sit within a few
    thousandths of the others, too close for a demo or for a meaningful 1e-4 comparison.
    """
    cfg.validate()
    if seed is not None:
        torch.manual_seed(seed)
    model = BertForSequenceClassification(cfg) if cfg.model_type == BERT else XLMRobertaForSequenceClassification(cfg)
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=0.02)
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
    head = model.classifier if cfg.model_type == BERT else model.classifier.out_proj
    nn.init.normal_(head.weight, std=1.0)
    return model.eval()


def load_hf_state_dict(model: nn.Module, state_dict: Dict[str, torch.Tensor]) -> None:
    """Loads HF-named weights strictly; raises CheckpointError naming missing/unexpected keys."""
    cleaned = {}
    for k, v in state_dict.items():
        if k.endswith(_IGNORABLE_CHECKPOINT_SUFFIXES):
            continue
        # Checkpoints converted from the original TensorFlow BERT name LayerNorm's parameters
        # gamma/beta; HF's loader renames them, and so do we.
        if ".LayerNorm." in k and k.endswith((".gamma", ".beta")):
            k = k.rsplit(".", 1)[0] + (".weight" if k.endswith(".gamma") else ".bias")
        cleaned[k] = v
    load_strictly(model, cleaned)


def load_strictly(model: nn.Module, cleaned: Dict[str, torch.Tensor]) -> None:
    """Loads `cleaned` (checkpoint names already mapped to the model's) into `model` as float32 and
    puts it in eval mode; CheckpointError lists every missing, unexpected and mis-shaped tensor."""
    expected = model.state_dict()
    missing: List[str] = sorted(set(expected) - set(cleaned))
    unexpected: List[str] = sorted(set(cleaned) - set(expected))
    mismatched = sorted(f"{k}: checkpoint {tuple(cleaned[k].shape)} vs model {tuple(expected[k].shape)}"
                        for k in set(expected) & set(cleaned) if cleaned[k].shape != expected[k].shape)
    if missing or unexpected or mismatched:
        def show(keys: List[str]) -> str:
            return ", ".join(keys[:20]) + (f" ... ({len(keys)} in all)" if len(keys) > 20 else "") if keys else "none"
        raise CheckpointError("checkpoint does not fit the model: missing keys: " + show(missing) +
                              "; unexpected keys: " + show(unexpected) + "; shape mismatches: " + show(mismatched))
    model.load_state_dict({k: v.to(torch.float32) for k, v in cleaned.items()}, strict=True)
    model.eval()
