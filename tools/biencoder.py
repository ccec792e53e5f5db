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

Decoder bi-encoders (Qwen3-Embedding style, the section at the end): `DecoderEmbedderConfig` is an
EmbedderConfig whose backbone is a decoder.DecoderConfig; `DecoderBiEncoder` is tools/decoder.py's
DecoderModel (HF's Qwen3Model / Qwen2Model: causal attention, position ids from the mask) with its
final RMSNorm, pooled (last_token for Qwen3-Embedding: the hidden state at the last position whose
attention_mask is 1, so right and left padding agree); forward takes int64 (input_ids,
attention_mask) and returns the pooled float32 [batch, hidden], not normalized. `build_embedder`
builds either kind; `load_embedder_state_dict` loads either; `eos_tokenizer` gives the
tokenizer.json that appends <|endoftext|> to every input, as Qwen3-Embedding's does.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, List, Optional

import torch
from torch import nn

import crossencoder
import decoder

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
        if isinstance(self.model, DecoderBiEncoder):
            return self.model.pooled_and_states(input_ids, attention_mask)
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


# ---- decoder bi-encoders (Qwen3-Embedding) ---------------------------------------------------------

# The longest input a decoder embedder is served with: min(max_position_embeddings, this), as for
# decoder rerankers (tools/export_model.py's DECODER_MAX_SEQUENCE_LENGTH; see its comment).
DECODER_MAX_SEQUENCE_LENGTH = 8192

# Qwen3-Embedding's config_sentence_transformers.json: the query prompt (an instruction, then the
# query); documents get no prompt.
QWEN3_EMBEDDING_QUERY_PROMPT = ("Instruct: Given a web search query, retrieve relevant passages that answer the "
                                "query\nQuery:")

# The token Qwen3-Embedding's tokenizer appends to every input, and its id in the Qwen3 vocabulary.
QWEN3_EOS = "<|endoftext|>"
QWEN3_EOS_ID = 151643

# Decoder bare-model architectures (a sentence-transformers Transformer module saves these) -> the
# CausalLM whose `model` they are.
_DECODER_BASE_ARCHITECTURES = {"Qwen3Model": "Qwen3ForCausalLM", "Qwen2Model": "Qwen2ForCausalLM"}


@dataclasses.dataclass
class DecoderEmbedderConfig(EmbedderConfig):
    """An EmbedderConfig over a decoder backbone (decoder.DecoderConfig)."""

    backbone: decoder.DecoderConfig
    pooling: str = LAST_TOKEN

    @property
    def model_type(self) -> str:
        return self.backbone.family

    @property
    def uses_token_type_ids(self) -> bool:
        return False

    @property
    def max_sequence_length(self) -> int:
        limit = min(self.backbone.max_position_embeddings, DECODER_MAX_SEQUENCE_LENGTH)
        return min(limit, self.max_seq_length) if self.max_seq_length else limit

    @property
    def pad_token_id(self) -> int:
        if self.backbone.pad_token_id is not None:
            return self.backbone.pad_token_id
        return QWEN3_EOS_ID if self.backbone.vocab_size > QWEN3_EOS_ID else 0


def _qwen3_embedding(backbone: decoder.DecoderConfig, **kw) -> DecoderEmbedderConfig:
    return DecoderEmbedderConfig(backbone, pooling=LAST_TOKEN, normalize=True,
                                 prompts={"query": QWEN3_EMBEDDING_QUERY_PROMPT}, **kw)


DECODER_PRESETS: Dict[str, DecoderEmbedderConfig] = {
    # Qwen/Qwen3-Embedding-0.6B: Qwen3-0.6B's shape (1024 x 28, vocabulary 151669), last token, normalized.
    "qwen3-embedding-0.6b": _qwen3_embedding(
        dataclasses.replace(decoder.PRESETS["qwen3-reranker-0.6b"], vocab_size=151669, max_position_embeddings=32768,
                            pad_token_id=QWEN3_EOS_ID), matryoshka_dimensions=[32, 64, 128, 256, 512, 768]),
    # Test size: 2 layers over the real Qwen3 vocabulary (the real tokenizer's ids are valid inputs).
    "qwen3-embed-tiny": _qwen3_embedding(dataclasses.replace(decoder.PRESETS["qwen3-tiny"], pad_token_id=QWEN3_EOS_ID),
                                         matryoshka_dimensions=[16, 32]),
}
PRESETS.update(DECODER_PRESETS)


class DecoderBiEncoder(nn.Module):
    """decoder.DecoderModel (parameters `model.*`, HF's Qwen3Model under a `model.` prefix) + final
    norm + pooling."""

    def __init__(self, cfg: DecoderEmbedderConfig, backbone: Optional[decoder.DecoderModel] = None):
        super().__init__()
        self.config = cfg
        self.model = backbone if backbone is not None else decoder.DecoderModel(cfg.backbone)

    def forward(self, input_ids, attention_mask):
        hidden = self.model(input_ids, attention_mask)  # before the final norm, which is per token
        if self.config.pooling == MEAN:
            pooled = pool(self.model.norm(hidden), attention_mask, MEAN)
        else:
            pooled = self.model.norm(pool(hidden, attention_mask, self.config.pooling))
        # A constant width, so that the ONNX output's dimension is fixed (the decoder's reshapes
        # leave it symbolic, and tide reads the model's dimension from it).
        return pooled.reshape(-1, self.config.hidden_size)

    def pooled_and_states(self, input_ids, attention_mask):
        """(pooled [batch, hidden], token states [batch, seq, hidden]): the states as Qwen3Model's
        last_hidden_state, after the final norm (WithTokenEmbeddings, TEI's /embed_all)."""
        states = self.model.norm(self.model(input_ids, attention_mask))
        pooled = pool(states, attention_mask, self.config.pooling)  # the norm is per token
        return pooled.reshape(-1, self.config.hidden_size), states.reshape(states.shape[0], -1, self.config.hidden_size)


def build_decoder_model(cfg: DecoderEmbedderConfig, seed: Optional[int] = None) -> DecoderBiEncoder:
    """Seeded random weights (decoder.build_causal_lm's initialiser), eval mode."""
    cfg.validate()
    lm = decoder.build_causal_lm(dataclasses.replace(cfg.backbone, tie_word_embeddings=True), seed=seed)
    return DecoderBiEncoder(cfg, lm.model).eval()


def build_embedder(cfg: EmbedderConfig, seed: Optional[int] = None) -> nn.Module:
    """build_model or build_decoder_model, as the backbone is."""
    return build_decoder_model(cfg, seed) if isinstance(cfg, DecoderEmbedderConfig) else build_model(cfg, seed)


def load_decoder_state_dict(model: DecoderBiEncoder, state_dict: Dict[str, torch.Tensor]) -> None:
    """Loads a Qwen3Model / Qwen2Model state dict (`embed_tokens.*`, `layers.*`, `norm.*`, as
    sentence-transformers saves it) or a CausalLM one (the same under `model.`) strictly; a language
    model head (`lm_head.weight`) and rotary buffers are dropped."""
    cleaned = {}
    for k, v in state_dict.items():
        if k == "lm_head.weight" or k.endswith(decoder._IGNORABLE_SUFFIXES):
            continue
        cleaned["model." + (k[len("model."):] if k.startswith("model.") else k)] = v
    crossencoder.load_strictly(model, cleaned)


def load_embedder_state_dict(model: nn.Module, state_dict: Dict[str, torch.Tensor]) -> None:
    if isinstance(model, DecoderBiEncoder):
        load_decoder_state_dict(model, state_dict)
    else:
        load_hf_state_dict(model, state_dict)


def decoder_backbone_from_hf(hf: Dict) -> decoder.DecoderConfig:
    """The decoder backbone of an HF config.json dict naming Qwen3Model / Qwen2Model (or a CausalLM,
    as Qwen3-Embedding's config.json does); CheckpointError for any other architecture."""
    archs = [a for a in (hf.get("architectures") or []) if isinstance(a, str)]
    mapped = [_DECODER_BASE_ARCHITECTURES.get(a, a) for a in archs]
    if not any(a in decoder.ARCHITECTURES for a in mapped) and hf.get("model_type") in (decoder.QWEN3, decoder.QWEN2):
        mapped = ["Qwen3ForCausalLM" if hf["model_type"] == decoder.QWEN3 else "Qwen2ForCausalLM"]
    known = [a for a in mapped if a in decoder.ARCHITECTURES and a.endswith("ForCausalLM")]
    if not known:
        raise crossencoder.CheckpointError(
            f"config.json architectures {archs!r} is not a decoder tide embeds with: supported are "
            f"{', '.join(sorted(_DECODER_BASE_ARCHITECTURES))}, Qwen3ForCausalLM, Qwen2ForCausalLM")
    return decoder.DecoderConfig.from_hf_dict(dict(hf, architectures=known[:1]))


def decoder_embedder_config(directory: Optional[str], backbone: decoder.DecoderConfig,
                            pooling: Optional[str] = None) -> DecoderEmbedderConfig:
    """The decoder embedder of a sentence-transformers folder (`directory` with modules.json), or of
    a plain folder with `pooling` (directory None), normalized."""
    if directory is not None:
        read = read_sentence_transformers_folder(directory, backbone)  # reads the modules of any backbone
        cfg = DecoderEmbedderConfig(**{f.name: getattr(read, f.name) for f in dataclasses.fields(EmbedderConfig)})
    else:
        cfg = DecoderEmbedderConfig(backbone, pooling=pooling or LAST_TOKEN, normalize=True)
    cfg.validate()
    return cfg


def appends_token(tokenizer: Dict, token: str) -> bool:
    """Whether a tokenizer.json dict's post_processor (or one inside a Sequence) is a
    TemplateProcessing whose single-input template ends with the special token `token`."""
    def walk(p) -> bool:
        if not isinstance(p, dict):
            return False
        if p.get("type") == "Sequence":
            return any(walk(c) for c in p.get("processors") or [])
        if p.get("type") != "TemplateProcessing":
            return False
        single = p.get("single") or []
        last = single[-1] if single and isinstance(single[-1], dict) else {}
        return (last.get("SpecialToken") or {}).get("id") == token
    return walk(tokenizer.get("post_processor"))


def eos_tokenizer(tokenizer: Dict, token: str = QWEN3_EOS):
    """(tokenizer.json dict, changed): `tokenizer` as it is when its post-processor already appends
    `token` (Qwen3-Embedding's own tokenizer.json), else a copy whose post-processor does: Qwen3's
    base tokenizer (Qwen3-Reranker's, Qwen3-0.6B's) has only a ByteLevel post-processor, which
    changes no ids, and Qwen3-Embedding's vectors are the hidden state AT the appended token."""
    if appends_token(tokenizer, token):
        return tokenizer, False
    ids = [int(a["id"]) for a in tokenizer.get("added_tokens") or [] if isinstance(a, dict) and a.get("content") == token]
    if not ids:
        raise crossencoder.CheckpointError(f"the tokenizer has no special token {token!r} to append to each input")
    template = {
        "type": "TemplateProcessing",
        "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": token, "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": token, "type_id": 0}},
                 {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": token, "type_id": 1}}],
        "special_tokens": {token: {"id": token, "ids": ids[:1], "tokens": [token]}},
    }
    out = dict(tokenizer)
    out["post_processor"] = template
    return out, True
