#!/usr/bin/python3
"""Writes a cross-encoder reranker as a GGUF file for llama.cpp (the benchmark's llama.cpp peer).

  /usr/bin/python3 tools/export_gguf.py --preset minilm-l6 --tokenizer models/minilm-l6/tokenizer.json \\
      --type q8_0 --output /tmp/minilm-l6-q8_0.gguf
  /usr/bin/python3 tools/export_gguf.py --checkpoint DIR --type f32 --output DIR.gguf

Weights: the same PyTorch weights every benchmark peer serves: a tools/crossencoder.py preset rebuilt
with the export seed (--seed, default tools/export_model.py's, so the weights equal the exported
ONNX entry's, as the prototype peer rebuilds them), or a local HuggingFace checkpoint folder (read
as tools/export_model.py reads it). Tokenizer: the entry's tokenizer.json (--tokenizer; a
checkpoint's own by default).

The file follows llama.cpp's layout for its `bert` architecture with rank pooling, which serves
both BertForSequenceClassification and XLMRobertaForSequenceClassification rerankers:
  token_embd, position_embd, token_types, token_embd_norm; per layer blk.N.attn_q/k/v,
  attn_output, attn_output_norm, ffn_up, ffn_down, layer_output_norm; the classification head as
  cls (dense + tanh) and cls.output (the logit), which llama.cpp applies to the first token when
  pooling_type is RANK (4).
  BERT: cls = the pooler's dense layer (BERT's pooler is dense + tanh on [CLS], exactly what rank
  pooling computes), cls.output = classifier. (llama.cpp's own converter drops the pooler and
  feeds [CLS] straight into the classifier; that is not the model tide and the other peers serve.)
  XLM-R: cls = classifier.dense, cls.output = classifier.out_proj; the position table loses its
  first pad_token_id + 1 rows (llama.cpp counts positions from 0, XLM-R from pad_token_id + 1).
Tokenizer: a WordPiece tokenizer.json becomes tokenizer.ggml.model "bert" (llama.cpp's WPM: the
vocabulary in "phantom space" form: word-initial pieces get U+2581 in front, ## continuations lose
the ##, special tokens stay as they are); a Unigram one becomes "t5" (UGM: pieces with their scores,
the Precompiled normalizer's charsmap), as llama.cpp's converter writes
XLMRobertaForSequenceClassification. A vocabulary shorter than the embedding table is padded with
unused [PAD<i>] entries (the generated placeholder tokenizers have 30,522 entries for XLM-R's
250,002 rows). Special ids and add_bos/add_eos/add_sep come from the post-processor; the pair
layout is also written as tokenizer.chat_template.rerank ("[CLS]{query}[SEP]{document}[SEP]",
"<s>{query}</s></s>{document}</s>"), which llama.cpp's server and node-llama-cpp's ranking context
use to lay out a (query, document) pair, so both build exactly the tokenizer's pair.
Types: f32 (every tensor F32) or q8_0 (ggml's Q8_0 for every 2-D weight except the position and
token-type tables; norms and biases stay F32, as llama.cpp's converter does).

Not representable in llama.cpp (reported, not hidden): its BERT graph adds token type 0 to every
token, so a BERT pair's second segment (type 1 in tide and HF) gets the wrong type embedding, and
its GELU is ggml's tanh approximation, not erf. XLM-R has a single token type, so only the GELU
differs there.

Exit status: 0 written, 1 write failed, 2 bad arguments, checkpoint or an unsupported model.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import gguf_writer as gg  # noqa: E402

DEFAULT_SEED = 20240611  # tools/export_model.py's
POOLING_RANK = 4
FILE_TYPE = {"f32": 0, "q8_0": 7}  # llama.cpp's LLAMA_FTYPE_ALL_F32, LLAMA_FTYPE_MOSTLY_Q8_0
# tokenizer.ggml.token_type values
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = 1, 2, 3, 4, 5, 6
PHANTOM_SPACE = "\u2581"


class ExportError(Exception):
    """The model or tokenizer cannot be written as a llama.cpp reranker."""


# ---- tokenizer -----------------------------------------------------------------------------------

def _special_text(entry: Dict) -> Optional[str]:
    return entry.get("SpecialToken", {}).get("id")


def pair_layout(spec: Dict) -> Tuple[List[str], List[str]]:
    """(single, pair) templates of tokenizer.json's post-processor as lists of special-token texts
    and the markers "A" / "B": e.g. ["[CLS]", "A", "[SEP]"] and ["[CLS]", "A", "[SEP]", "B", "[SEP]"]."""
    post = spec.get("post_processor") or {}
    processors = post.get("processors", [post]) if post.get("type") == "Sequence" else [post]
    for p in processors:
        kind = p.get("type")
        if kind in ("BertProcessing", "RobertaProcessing"):
            cls, sep = p["cls"][0], p["sep"][0]
            if kind == "BertProcessing":
                return [cls, "A", sep], [cls, "A", sep, "B", sep]
            return [cls, "A", sep], [cls, "A", sep, sep, "B", sep]
        if kind == "TemplateProcessing":
            def convert(items):
                out = []
                for item in items:
                    if "Sequence" in item:
                        out.append(item["Sequence"]["id"])
                    elif _special_text(item) is not None:
                        out.append(_special_text(item))
                return out
            return convert(p.get("single", [])), convert(p.get("pair", []))
    raise ExportError("tokenizer.json: no post-processor (BertProcessing, RobertaProcessing or TemplateProcessing) "
                      "says how a (query, document) pair is laid out")


def _vocab_size_and_lookup(spec: Dict) -> Tuple[Dict[int, str], Dict[str, int]]:
    model = spec.get("model") or {}
    id_to_text: Dict[int, str] = {}
    if model.get("type", "WordPiece") == "Unigram" or isinstance(model.get("vocab"), list):
        for i, entry in enumerate(model.get("vocab", [])):
            id_to_text[i] = entry[0]
    else:
        for text, i in model.get("vocab", {}).items():
            id_to_text[int(i)] = text
    for t in spec.get("added_tokens", []):
        id_to_text[int(t["id"])] = t["content"]
    text_to_id = {t: i for i, t in id_to_text.items()}
    return id_to_text, text_to_id


def tokenizer_metadata(spec: Dict, n_vocab: int) -> Tuple[List[Tuple[str, int, object]], Dict[str, object]]:
    """The tokenizer.ggml.* metadata for a tokenizer.json: a list of (key, type, value) (arrays as
    (key, gg.ARRAY, (elem_type, values))) and a summary for the log."""
    model = spec.get("model") or {}
    kind = model.get("type")
    if kind is None:  # the older tokenizer.json format names no type: it follows from the fields
        kind = "Unigram" if isinstance(model.get("vocab"), list) else "BPE" if "merges" in model else \
            "WordPiece" if isinstance(model.get("vocab"), dict) else None
    if kind not in ("WordPiece", "Unigram"):
        raise ExportError(f"tokenizer.json: model type {kind!r}: llama.cpp's rerankers read WordPiece (as 'bert') "
                          "or Unigram (as 't5'); this converter writes nothing else")
    id_to_text, text_to_id = _vocab_size_and_lookup(spec)
    n_tok = max(id_to_text) + 1 if id_to_text else 0
    missing = [i for i in range(n_tok) if i not in id_to_text]
    if missing:
        raise ExportError(f"tokenizer.json: token ids are not contiguous (no token for id {missing[0]}, "
                          f"{len(missing)} gaps)")
    if n_tok > n_vocab:
        raise ExportError(f"tokenizer.json has {n_tok} tokens but the model's embedding table only {n_vocab} rows")
    added = {int(t["id"]): t for t in spec.get("added_tokens", [])}

    single, pair = pair_layout(spec)
    if pair.count("A") != 1 or pair.count("B") != 1 or pair.index("A") > pair.index("B"):
        raise ExportError(f"tokenizer.json: pair template {pair} does not read '... A ... B ...'")
    for t in pair:
        if t not in ("A", "B") and t not in text_to_id:
            raise ExportError(f"tokenizer.json: pair template token {t!r} is not in the vocabulary")
    first = pair[0] if pair[0] not in ("A", "B") else None
    last = pair[-1] if pair[-1] not in ("A", "B") else None
    between = pair[pair.index("A") + 1:pair.index("B")]
    template = "".join("{query}" if t == "A" else "{document}" if t == "B" else t for t in pair)

    def find(*names) -> Optional[int]:
        for n in names:
            if n in text_to_id:
                return text_to_id[n]
        return None

    unk_text = model.get("unk_token") if kind == "WordPiece" else None
    unk = text_to_id.get(unk_text) if unk_text else None
    if kind == "Unigram" and model.get("unk_id") is not None:
        unk = int(model["unk_id"])
    pad = (spec.get("padding") or {}).get("pad_id")
    if pad is None:
        pad = find("[PAD]", "<pad>")
    ids = {"bos": text_to_id.get(first) if first else None,
           "eos": text_to_id.get(last) if last else None,
           "seperator": text_to_id.get(between[0]) if between else None,  # llama.cpp's spelling
           "cls": text_to_id.get(first) if first else None,
           "unknown": unk, "padding": pad, "mask": find("[MASK]", "<mask>")}

    tokens: List[str] = []
    types: List[int] = []
    scores: List[float] = []
    for i in range(n_vocab):
        if i >= n_tok:  # padding rows of the embedding table no text can reach
            tokens.append(f"[PAD{i}]")
            types.append(TOKEN_UNUSED)
            scores.append(-10000.0)
            continue
        text = id_to_text[i]
        if i in added:
            ttype = TOKEN_CONTROL if added[i].get("special") else TOKEN_USER_DEFINED
        elif i == unk:
            ttype = TOKEN_UNKNOWN
        elif kind == "Unigram" and model.get("byte_fallback") and len(text) == 6 and text.startswith("<0x"):
            ttype = TOKEN_BYTE
        else:
            ttype = TOKEN_NORMAL
        if kind == "WordPiece" and ttype != TOKEN_CONTROL:
            prefix = model.get("continuing_subword_prefix", "##")
            text = text[len(prefix):] if prefix and text.startswith(prefix) else PHANTOM_SPACE + text
        tokens.append(text)
        types.append(ttype)
        scores.append(float(model["vocab"][i][1]) if kind == "Unigram" and i < len(model["vocab"]) else 0.0)
    seen: Dict[str, int] = {}
    for i, t in enumerate(tokens):
        if t in seen:
            raise ExportError(f"tokenizer: tokens {seen[t]} and {i} are both {t!r} in llama.cpp's form "
                              "(llama.cpp needs every token text to be unique)")
        seen[t] = i

    meta: List[Tuple[str, int, object]] = []
    if kind == "WordPiece":
        meta.append(("tokenizer.ggml.model", gg.STRING, "bert"))
        norm = spec.get("normalizer") or {}
        norms = norm.get("normalizers", [norm]) if norm.get("type") == "Sequence" else [norm]
        bert_norm = next((n for n in norms if n.get("type") == "BertNormalizer"), None)
        lowercase = bool(bert_norm.get("lowercase", True)) if bert_norm else False
        strip = bert_norm.get("strip_accents") if bert_norm else None
        strip = lowercase if strip is None else bool(strip)
        meta.append(("tokenizer.ggml.normalizer.lowercase", gg.BOOL, lowercase))
        meta.append(("tokenizer.ggml.normalizer.strip_accents", gg.BOOL, strip))
    else:
        meta.append(("tokenizer.ggml.model", gg.STRING, "t5"))
    meta.append(("tokenizer.ggml.pre", gg.STRING, "default"))
    meta.append(("tokenizer.ggml.tokens", gg.ARRAY, (gg.STRING, tokens)))
    meta.append(("tokenizer.ggml.token_type", gg.ARRAY, (gg.INT32, types)))
    if kind == "Unigram":
        meta.append(("tokenizer.ggml.scores", gg.ARRAY, (gg.FLOAT32, scores)))
        norm = spec.get("normalizer") or {}
        norms = norm.get("normalizers", [norm]) if norm.get("type") == "Sequence" else [norm]
        charsmap = next((n.get("precompiled_charsmap") for n in norms if n.get("type") == "Precompiled"), None)
        if charsmap:
            meta.append(("tokenizer.ggml.precompiled_charsmap", gg.ARRAY,
                         (gg.UINT8, list(base64.b64decode(charsmap)))))
        pre = spec.get("pre_tokenizer") or {}
        pres = pre.get("pretokenizers", [pre]) if pre.get("type") == "Sequence" else [pre]
        meta_pre = next((p for p in pres if p.get("type") == "Metaspace"), {})
        add_prefix = meta_pre.get("add_prefix_space", meta_pre.get("prepend_scheme", "always") != "never")
        meta.append(("tokenizer.ggml.add_space_prefix", gg.BOOL, bool(add_prefix)))
        squeezes = any(n.get("type") == "Replace" and " {2,}" in json.dumps(n.get("pattern", {})) for n in norms)
        meta.append(("tokenizer.ggml.remove_extra_whitespaces", gg.BOOL, squeezes))
    for name, value in ids.items():
        if value is not None:
            meta.append((f"tokenizer.ggml.{name}_token_id", gg.UINT32, int(value)))
    meta.append(("tokenizer.ggml.add_bos_token", gg.BOOL, first is not None))
    meta.append(("tokenizer.ggml.add_eos_token", gg.BOOL, last is not None))
    meta.append(("tokenizer.ggml.add_sep_token", gg.BOOL, len(between) > 1))
    meta.append(("tokenizer.chat_template.rerank", gg.STRING, template))
    summary = {"kind": kind, "tokens": n_tok, "padded_to": n_vocab, "pair": " ".join(pair), "template": template}
    return meta, summary


# ---- weights -------------------------------------------------------------------------------------

def load_weights(args) -> Tuple[object, Dict[str, np.ndarray], str, Optional[List[str]]]:
    """(config, HF-named float32 state dict, default name, labels) from --preset/--seed or --checkpoint."""
    import crossencoder  # noqa: E402  (torch: imported only when weights are needed)
    labels = None
    if args.checkpoint:
        cfg_path = os.path.join(args.checkpoint, "config.json")
        try:
            with open(cfg_path, encoding="utf-8") as f:
                hf = json.load(f)
        except OSError as e:
            raise crossencoder.CheckpointError(f"{cfg_path}: {e}") from e
        archs = hf.get("architectures") or []
        supported = ("BertForSequenceClassification", "XLMRobertaForSequenceClassification",
                     "RobertaForSequenceClassification")
        if archs and not any(a in supported for a in archs):
            raise ExportError(f"{cfg_path}: architecture {', '.join(archs)} is not supported (this converter writes "
                              f"{', '.join(supported)} as llama.cpp's bert reranker)")
        import export_model  # noqa: E402
        cfg, model = export_model.load_checkpoint(args.checkpoint)
        name = os.path.basename(os.path.normpath(args.checkpoint))
        if isinstance(hf.get("id2label"), dict):
            labels = [v for _, v in sorted(hf["id2label"].items(), key=lambda kv: int(kv[0]))]
    else:
        cfg = crossencoder.PRESETS[args.preset]
        model = crossencoder.build_model(cfg, seed=args.seed)
        name = args.preset
    if cfg.num_labels != 1:
        raise ExportError(f"the model has {cfg.num_labels} labels: llama.cpp's rank pooling scores one logit per pair, "
                          "so only single-label rerankers are written")
    state = {k: v.detach().to("cpu").float().numpy() for k, v in model.state_dict().items()}
    return cfg, state, name, labels


def gguf_tensors(cfg, state: Dict[str, np.ndarray]) -> List[Tuple[str, np.ndarray]]:
    """(llama.cpp name, array) in file order, from HF-named weights."""
    import crossencoder  # noqa: E402
    bert = cfg.model_type == crossencoder.BERT
    p = "bert." if bert else "roberta."
    out: List[Tuple[str, np.ndarray]] = []

    def take(hf: str) -> np.ndarray:
        if hf not in state:
            raise ExportError(f"weights: {hf} missing")
        return state.pop(hf)

    position = take(p + "embeddings.position_embeddings.weight")
    if not bert:
        position = position[cfg.pad_token_id + 1:]
    out += [("token_embd.weight", take(p + "embeddings.word_embeddings.weight")),
            ("position_embd.weight", position),
            ("token_types.weight", take(p + "embeddings.token_type_embeddings.weight")),
            ("token_embd_norm.weight", take(p + "embeddings.LayerNorm.weight")),
            ("token_embd_norm.bias", take(p + "embeddings.LayerNorm.bias"))]
    parts = [("attention.self.query", "attn_q"), ("attention.self.key", "attn_k"), ("attention.self.value", "attn_v"),
             ("attention.output.dense", "attn_output"), ("attention.output.LayerNorm", "attn_output_norm"),
             ("intermediate.dense", "ffn_up"), ("output.dense", "ffn_down"), ("output.LayerNorm", "layer_output_norm")]
    for i in range(cfg.num_hidden_layers):
        for hf, gname in parts:
            for suffix in ("weight", "bias"):
                out.append((f"blk.{i}.{gname}.{suffix}", take(f"{p}encoder.layer.{i}.{hf}.{suffix}")))
    head = (("bert.pooler.dense", "cls"), ("classifier", "cls.output")) if bert else \
        (("classifier.dense", "cls"), ("classifier.out_proj", "cls.output"))
    for hf, gname in head:
        for suffix in ("weight", "bias"):
            out.append((f"{gname}.{suffix}", take(f"{hf}.{suffix}")))
    if state:
        raise ExportError(f"weights not written: {', '.join(sorted(state))}")
    return out


def tensor_type(name: str, array: np.ndarray, wanted: str) -> int:
    """Q8_0 for a 2-D weight of a q8_0 file (not the position and token-type tables), else F32."""
    if wanted == "q8_0" and array.ndim == 2 and name.endswith(".weight") and \
            name not in ("position_embd.weight", "token_types.weight"):
        return gg.GGML_Q8_0
    return gg.GGML_F32


def build(args) -> Tuple[gg.GGUFWriter, Dict]:
    cfg, state, default_name, labels = load_weights(args)
    tokenizer_path = args.tokenizer
    if not tokenizer_path and args.checkpoint:
        tokenizer_path = os.path.join(args.checkpoint, "tokenizer.json")
    if not tokenizer_path or not os.path.isfile(tokenizer_path):
        raise ExportError(f"no tokenizer.json ({tokenizer_path or 'pass --tokenizer'}): llama.cpp needs the vocabulary")
    with open(tokenizer_path, encoding="utf-8") as f:
        spec = json.load(f)
    tok_meta, tok_summary = tokenizer_metadata(spec, cfg.vocab_size)
    w = gg.GGUFWriter()
    arch = "bert"
    w.add_string("general.architecture", arch)
    w.add_string("general.name", args.name or default_name)
    w.add_uint32("general.file_type", FILE_TYPE[args.type])
    if args.type != "f32":
        w.add_uint32("general.quantization_version", 2)
    w.add_uint32(f"{arch}.context_length", cfg.max_sequence_length)
    w.add_uint32(f"{arch}.embedding_length", cfg.hidden_size)
    w.add_uint32(f"{arch}.feed_forward_length", cfg.intermediate_size)
    w.add_uint32(f"{arch}.block_count", cfg.num_hidden_layers)
    w.add_uint32(f"{arch}.attention.head_count", cfg.num_attention_heads)
    w.add_float32(f"{arch}.attention.layer_norm_epsilon", cfg.layer_norm_eps)
    w.add_bool(f"{arch}.attention.causal", False)
    w.add_uint32(f"{arch}.pooling_type", POOLING_RANK)
    w.add_array(f"{arch}.classifier.output_labels", gg.STRING, labels or ["LABEL_0"])
    w.add_uint32("tokenizer.ggml.token_type_count", cfg.type_vocab_size)
    for key, vtype, value in tok_meta:
        if vtype == gg.ARRAY:
            w.add_array(key, value[0], value[1])
        else:
            w.add_scalar(key, vtype, value)
    counts: Dict[str, int] = {}
    for name, array in gguf_tensors(cfg, state):
        t = tensor_type(name, array, args.type)
        w.add_tensor(name, array, t)
        counts[gg.GGML_TYPE_NAMES[t]] = counts.get(gg.GGML_TYPE_NAMES[t], 0) + 1
    summary = dict(tok_summary, model_type=cfg.model_type, layers=cfg.num_hidden_layers, hidden=cfg.hidden_size,
                   context=cfg.max_sequence_length, tensors=counts)
    return w, summary


def parse_args(argv: Optional[List[str]]):
    import crossencoder  # noqa: E402
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--preset", choices=sorted(crossencoder.PRESETS), default="minilm-l6",
                     help="architecture with seeded random weights (default %(default)s)")
    src.add_argument("--checkpoint", help="local HF checkpoint folder (config.json + weights)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of a preset's weights (default: the export's)")
    p.add_argument("--tokenizer", help="tokenizer.json (the model entry's; default: the checkpoint's)")
    p.add_argument("--type", choices=sorted(FILE_TYPE), default="f32", help="f32 or q8_0 (default %(default)s)")
    p.add_argument("--output", required=True, help="the .gguf file to write")
    p.add_argument("--name", help="general.name (default: the preset or checkpoint folder)")
    p.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    import crossencoder  # noqa: E402
    try:
        writer, summary = build(args)
    except (ExportError, crossencoder.CheckpointError, gg.GGUFError) as e:
        print(f"export_gguf: {e}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as e:
        print(f"export_gguf: {e}", file=sys.stderr)
        return 2
    try:
        writer.write(args.output)
        back = gg.read(args.output)  # the file reads back whole
    except (OSError, gg.GGUFError) as e:
        print(f"export_gguf: writing {args.output} failed: {e}", file=sys.stderr)
        return 1
    if not args.quiet:
        print(f"export_gguf: wrote {args.output} ({os.path.getsize(args.output) / 2**20:.1f} MiB, {args.type}): "
              f"{summary['model_type']} {summary['layers']} x {summary['hidden']}, context {summary['context']}, "
              f"{len(back.tensors)} tensors {summary['tensors']}; {summary['kind']} vocabulary of {summary['tokens']} "
              f"tokens (padded to {summary['padded_to']}), pair {summary['template']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
