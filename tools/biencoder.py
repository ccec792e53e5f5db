"""Bi-encoders (embedding models) in plain PyTorch: a BERT or XLM-RoBERTa backbone and a pooling.

The backbone is crossencoder.Backbone (HF's BertModel / XLMRobertaModel, the same parameter names),
so a sentence-transformers folder's weights (`model.safetensors` of its Transformer module, named
like HF's BertModel: `embeddings.*`, `encoder.*`, `pooler.*`) load without the transformers package.
The pooler is never used by sentence-transformers' Pooling module and is dropped on load.

Contract: `EmbedderConfig` is a backbone CrossEncoderConfig plus the pooling (`cls` | `mean` |
`last_token`, sentence-transformers' definitions), whether the served vectors are normalized, the
longest input (sentence_bert_config.json's max_seq_length) and the prompts per input type.
`build_model(config)` returns an eval-mode module whose forward takes int64 (input_ids,
attention_mask[, token_type_ids]) [batch, sequence] and returns the pooled float32 embedding
[batch, hidden] (NOT normalized: the server normalizes after an optional Matryoshka cut, as
sentence-transformers does with truncate_dim). `WithTokenEmbeddings(model)` is the exported graph:
it also returns the backbone's last hidden state, `token_embeddings` [batch, sequence, hidden] (raw:
neither pooled nor normalized, what TEI's /embed_all answers; padding positions are whatever the
backbone computes there and are never served). `read_sentence_transformers_folder(dir)` reads
modules.json, 1_Pooling/config.json, 2_Normalize, sentence_bert_config.json and
config_sentence_transformers.json, and raises crossencoder.CheckpointError for a module tide
cannot serve (Dense, max / weighted-mean pooling), naming it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, List, Optional

import torch
from torch import nn

import crossencoder

CLS = "cls"
MEAN = "mean"
LAST_TOKEN = "last_token"
POOLINGS = (CLS, MEAN, LAST_TOKEN)

MODULES_FILE = "modules.json"


@dataclasses.dataclass
class EmbedderConfig:
    backbone: crossencoder.CrossEncoderConfig
    pooling: str = MEAN
    normalize: bool = True
    max_seq_length: Optional[int] = None  # unset: the backbone's position table (capped at 512)
    prompts: Dict[str, str] = dataclasses.field(default_factory=dict)
    default_prompt_name: Optional[str] = None
    matryoshka_dimensions: List[int] = dataclasses.field(default_factory=list)

    # The attributes export_model.py reads of any config.
    @property
    def model_type(self) -> str:
        return self.backbone.model_type

    @property
    def uses_token_type_ids(self) -> bool:
        return self.backbone.uses_token_type_ids

    @property
    def hidden_size(self) -> int:
        return self.backbone.hidden_size

    @property
    def num_hidden_layers(self) -> int:
        return self.backbone.num_hidden_layers

    @property
    def vocab_size(self) -> int:
        return self.backbone.vocab_size

    @property
    def max_sequence_length(self) -> int:
        limit = self.backbone.max_sequence_length
        return min(limit, self.max_seq_length) if self.max_seq_length else limit

    @property
    def pad_token_id(self) -> int:
        return self.backbone.pad_token_id

    def validate(self) -> None:
        self.backbone.validate()
        if self.pooling not in POOLINGS:
            raise crossencoder.CheckpointError(f"pooling {self.pooling!r}: tide pools with one of {', '.join(POOLINGS)}")
        for d in self.matryoshka_dimensions:
            if not 1 <= d <= self.hidden_size:
                raise crossencoder.CheckpointError(
                    f"matryoshka dimension {d} is outside 1..{self.hidden_size} (the model's dimension)")
        if self.default_prompt_name is not None and self.default_prompt_name not in self.prompts:
            raise crossencoder.CheckpointError(
                f"default_prompt_name {self.default_prompt_name!r} is not one of the prompts {sorted(self.prompts)}")


def _bert(hidden: int, layers: int, heads: int, intermediate: int, vocab: int = 30522,
          positions: int = 512) -> crossencoder.CrossEncoderConfig:
    return crossencoder.CrossEncoderConfig(model_type=crossencoder.BERT, vocab_size=vocab, hidden_size=hidden,
                                           num_hidden_layers=layers, num_attention_heads=heads,
                                           intermediate_size=intermediate, max_position_embeddings=positions,
                                           type_vocab_size=2, layer_norm_eps=1e-12, num_labels=1, pad_token_id=0)


PRESETS: Dict[str, EmbedderConfig] = {
    # The shape and pooling of sentence-transformers/all-MiniLM-L6-v2 (mean, normalized, 256 tokens).
    "all-minilm-l6-v2": EmbedderConfig(_bert(384, 6, 12, 1536), pooling=MEAN, normalize=True, max_seq_length=256),
    # The shape and pooling of BAAI/bge-base-en-v1.5 (CLS, normalized, 512 tokens, a query prompt).
    "bge-base-en-v1.5": EmbedderConfig(
        _bert(768, 12, 12, 3072), pooling=CLS, normalize=True, max_seq_length=512,
        prompts={"query": "Represent this sentence for searching relevant passages: "}),
    # Small shapes for tests: BERT with mean pooling, XLM-R with CLS pooling, BERT with last-token.
    "tiny-bert-embed": EmbedderConfig(_bert(64, 2, 4, 128, vocab=2048, positions=128), pooling=MEAN,
                                      normalize=True, prompts={"query": "query: ", "passage": "passage: "},
                                      matryoshka_dimensions=[16, 32]),
    "tiny-xlmr-embed": EmbedderConfig(crossencoder.PRESETS["tiny-xlmr"], pooling=CLS, normalize=True),
    "tiny-bert-embed-last": EmbedderConfig(_bert(64, 2, 4, 128, vocab=2048, positions=128), pooling=LAST_TOKEN,
                                           normalize=False),
}


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """sentence-transformers' Pooling of token embeddings [batch, seq, hidden] -> [batch, hidden]."""
    if pooling == CLS:
        return hidden[:, 0]
    mask = attention_mask.to(hidden.dtype)
    if pooling == MEAN:
        summed = torch.sum(hidden * mask.unsqueeze(-1), dim=1)
        count = torch.clamp(mask.sum(dim=1, keepdim=True), min=1e-9)
        return summed / count
    if pooling == LAST_TOKEN:
        # The last position whose mask is 1 (right or left padding alike); a row without any: 0.
        positions = torch.arange(hidden.shape[1], dtype=torch.int64, device=hidden.device).unsqueeze(0)
        last = torch.argmax(attention_mask.to(torch.int64) * positions, dim=1)
        index = last.view(-1, 1, 1).expand(-1, 1, hidden.shape[2])
        return torch.gather(hidden, 1, index).squeeze(1)
    raise crossencoder.CheckpointError(f"unknown pooling {pooling!r}")


class BiEncoder(nn.Module):
    """Backbone + pooling; the backbone's parameters are named as HF's BertModel / XLMRobertaModel."""

    def __init__(self, cfg: EmbedderConfig):
        super().__init__()
        self.config = cfg
        self.backbone = crossencoder.Backbone(cfg.backbone)
        if hasattr(self.backbone, "pooler"):
            del self.backbone.pooler  # sentence-transformers never uses BertModel's pooler

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        hidden = self.backbone(input_ids, attention_mask, token_type_ids)
        return pool(hidden, attention_mask, self.config.pooling)


TOKEN_EMBEDDINGS = "token_embeddings"


class WithTokenEmbeddings(nn.Module):
    """A BiEncoder whose forward returns (pooled [batch, hidden], token states [batch, seq, hidden])."""

    def __init__(self, model: BiEncoder):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        hidden = self.model.backbone(input_ids, attention_mask, token_type_ids)
        return pool(hidden, attention_mask, self.model.config.pooling), hidden


def build_model(cfg: EmbedderConfig, seed: Optional[int] = None) -> BiEncoder:
    """Seeded random weights (HF's initialiser: normal(0, 0.02), LayerNorm 1/0), eval mode."""
    cfg.validate()
    if seed is not None:
        torch.manual_seed(seed)
    model = BiEncoder(cfg)
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
    return model.eval()


_BACKBONE_PREFIXES = ("bert.", "roberta.", "model.")


def load_hf_state_dict(model: BiEncoder, state_dict: Dict[str, torch.Tensor]) -> None:
    """Loads a BertModel / XLMRobertaModel state dict (optionally prefixed bert. / roberta.) strictly;
    the pooler's weights and ignorable buffers are dropped. CheckpointError names what does not fit."""
    cleaned = {}
    for k, v in state_dict.items():
        for prefix in _BACKBONE_PREFIXES:
            if k.startswith(prefix):
                k = k[len(prefix):]
                break
        if k.startswith("pooler.") or k.endswith(crossencoder._IGNORABLE_CHECKPOINT_SUFFIXES):
            continue
        if ".LayerNorm." in k and k.endswith((".gamma", ".beta")):
            k = k.rsplit(".", 1)[0] + (".weight" if k.endswith(".gamma") else ".bias")
        cleaned["backbone." + k] = v
    crossencoder.load_strictly(model, cleaned)


def _read_json(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise crossencoder.CheckpointError(f"cannot read {path}: {e}") from e


def is_sentence_transformers_folder(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, MODULES_FILE))


_POOLING_MODES = {"pooling_mode_cls_token": CLS, "pooling_mode_mean_tokens": MEAN, "pooling_mode_lasttoken": LAST_TOKEN}
_UNSUPPORTED_POOLING_MODES = ("pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                              "pooling_mode_weightedmean_tokens")


def pooling_from_config(d: Dict, path: str) -> str:
    """The one pooling a 1_Pooling/config.json turns on (tide refuses combinations and the others)."""
    if not isinstance(d, dict):
        raise crossencoder.CheckpointError(f"{path}: not a JSON object")
    if "pooling_mode" in d:  # the short form some configs use
        mode = {"cls": CLS, "mean": MEAN, "lasttoken": LAST_TOKEN, "last_token": LAST_TOKEN}.get(str(d["pooling_mode"]))
        if mode is None:
            raise crossencoder.CheckpointError(f"{path}: pooling_mode {d['pooling_mode']!r} is not served "
                                               f"(tide pools with {', '.join(POOLINGS)})")
        return mode
    on = [mode for key, mode in _POOLING_MODES.items() if d.get(key)]
    bad = [key for key in _UNSUPPORTED_POOLING_MODES if d.get(key)]
    if bad:
        raise crossencoder.CheckpointError(f"{path}: {', '.join(bad)} is not served (tide pools with "
                                           f"{', '.join(POOLINGS)})")
    if len(on) != 1:
        raise crossencoder.CheckpointError(f"{path}: expected exactly one pooling mode on, found "
                                           f"{', '.join(on) if on else 'none'}")
    return on[0]


def read_sentence_transformers_folder(directory: str, backbone: crossencoder.CrossEncoderConfig) -> EmbedderConfig:
    """The embedder a sentence-transformers folder describes (modules.json: Transformer, Pooling,
    optionally Normalize, in that order)."""
    modules_path = os.path.join(directory, MODULES_FILE)
    modules = _read_json(modules_path)
    if not isinstance(modules, list) or not modules:
        raise crossencoder.CheckpointError(f"{modules_path}: expected a non-empty list of modules")
    kinds = []
    pooling = None
    for m in modules:
        if not isinstance(m, dict) or not isinstance(m.get("type"), str):
            raise crossencoder.CheckpointError(f"{modules_path}: every module needs a \"type\"")
        kind = m["type"].rsplit(".", 1)[-1]
        kinds.append(kind)
        if kind == "Transformer":
            if m.get("path", "") not in ("", "."):
                raise crossencoder.CheckpointError(f"{modules_path}: a Transformer module in {m['path']!r} is not "
                                                   "served (tide reads the folder's own config.json and weights)")
        elif kind == "Pooling":
            pooling_path = os.path.join(directory, m.get("path", "1_Pooling"), "config.json")
            pooling = pooling_from_config(_read_json(pooling_path), pooling_path)
        elif kind != "Normalize":
            raise crossencoder.CheckpointError(f"{modules_path}: module {m['type']} is not served (tide serves "
                                               "Transformer, Pooling and Normalize)")
    if kinds[0] != "Transformer" or "Pooling" not in kinds:
        raise crossencoder.CheckpointError(f"{modules_path}: expected a Transformer then a Pooling module, got "
                                           f"{', '.join(kinds)}")
    cfg = EmbedderConfig(backbone=backbone, pooling=pooling, normalize="Normalize" in kinds)
    sbert = os.path.join(directory, "sentence_bert_config.json")
    if os.path.isfile(sbert):
        d = _read_json(sbert)
        if isinstance(d, dict) and isinstance(d.get("max_seq_length"), int) and d["max_seq_length"] > 1:
            cfg.max_seq_length = d["max_seq_length"]
    st = os.path.join(directory, "config_sentence_transformers.json")
    if os.path.isfile(st):
        d = _read_json(st)
        if isinstance(d, dict):
            prompts = d.get("prompts") or {}
            if not isinstance(prompts, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                        for k, v in prompts.items()):
                raise crossencoder.CheckpointError(f"{st}: prompts must map names to strings")
            cfg.prompts = {k: v for k, v in prompts.items() if v}
            name = d.get("default_prompt_name")
            cfg.default_prompt_name = name if name in cfg.prompts else None
    cfg.validate()
    return cfg


def write_sentence_transformers_folder(directory: str, cfg: EmbedderConfig) -> None:
    """modules.json and the module configs of `cfg` (the files a sentence-transformers save writes;
    tests build folders with it)."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if cfg.normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
        os.makedirs(os.path.join(directory, "2_Normalize"), exist_ok=True)
    os.makedirs(os.path.join(directory, "1_Pooling"), exist_ok=True)
    with open(os.path.join(directory, MODULES_FILE), "w", encoding="utf-8") as f:
        json.dump(modules, f)
    pooling = {"word_embedding_dimension": cfg.hidden_size, "pooling_mode_cls_token": cfg.pooling == CLS,
               "pooling_mode_mean_tokens": cfg.pooling == MEAN, "pooling_mode_max_tokens": False,
               "pooling_mode_mean_sqrt_len_tokens": False, "pooling_mode_weightedmean_tokens": False,
               "pooling_mode_lasttoken": cfg.pooling == LAST_TOKEN, "include_prompt": True}
    with open(os.path.join(directory, "1_Pooling", "config.json"), "w", encoding="utf-8") as f:
        json.dump(pooling, f)
    if cfg.max_seq_length:
        with open(os.path.join(directory, "sentence_bert_config.json"), "w", encoding="utf-8") as f:
            json.dump({"max_seq_length": cfg.max_seq_length, "do_lower_case": False}, f)
    with open(os.path.join(directory, "config_sentence_transformers.json"), "w", encoding="utf-8") as f:
        json.dump({"prompts": cfg.prompts, "default_prompt_name": cfg.default_prompt_name}, f)


def embed_parameters(cfg: EmbedderConfig) -> List:
    """[(parameter, value)] of tide's config.pbtxt for this embedder (see src/config/tide_parameters.h)."""
    params = [("task", "embed"), ("pooling", cfg.pooling), ("normalize", "true" if cfg.normalize else "false")]
    if cfg.matryoshka_dimensions:
        params.append(("matryoshka_dimensions", ",".join(str(d) for d in sorted(cfg.matryoshka_dimensions))))
    if cfg.prompts:
        params.append(("prompts", json.dumps(cfg.prompts, ensure_ascii=False, sort_keys=True)))
    if cfg.default_prompt_name:
        params.append(("default_prompt_name", cfg.default_prompt_name))
    return params
