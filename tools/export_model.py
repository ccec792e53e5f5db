#!/usr/bin/python3
"""Exports a cross-encoder or decoder-only LLM reranker to ONNX as a tide model repository entry.

  /usr/bin/python3 tools/export_model.py --preset minilm-l6 --repository models
  /usr/bin/python3 tools/export_model.py --checkpoint DIR --name my-reranker --repository models
  /usr/bin/python3 tools/export_model.py --checkpoint Qwen3-Reranker-0.6B --task rerank --repository models

Writes <repository>/<name>/config.pbtxt, <name>/1/model.onnx and <name>/tokenizer.json. Weights are
seeded random for a preset (real architecture and cost, meaningless scores) or loaded from a local
HuggingFace checkpoint folder (config.json + model.safetensors, sharded model-*.safetensors with
model.safetensors.index.json, or pytorch_model.bin; safetensors is preferred when both exist, as
transformers does, and is parsed by tools/safetensors_file.py). The ONNX graph (opset 17, dynamic
batch and sequence axes, int64 inputs input_ids, attention_mask[, token_type_ids], float32 output
logits [batch, num_labels]) is checked with ONNX Runtime through `tide verify-model` against PyTorch
logits on random padded batches; the entry is only put in place when that check passes, so a failed
export leaves the repository as it was. Exit status: 0 ok, 1 export or verification failed,
2 bad arguments or checkpoint.

Embedding models (bi-encoders, tools/biencoder.py): a sentence-transformers folder (modules.json:
Transformer, Pooling, optionally Normalize) is exported as an embedder: the graph pools in itself
(cls | mean | last_token as 1_Pooling/config.json says) and outputs sentence_embedding float32
[batch, hidden], not normalized (tide normalizes after an optional Matryoshka cut), and the
backbone's last hidden state token_embeddings float32 [batch, sequence, hidden] (TEI's /embed_all;
verify-model checks it too, at the real positions); config.pbtxt
gets task embed, pooling, normalize and the prompts of config_sentence_transformers.json. A plain
BERT / XLM-R folder becomes one with --task embed --pooling MODE. Presets all-minilm-l6-v2,
bge-base-en-v1.5 and tiny-bert-embed, tiny-xlmr-embed, tiny-bert-embed-last (seeded random weights).
Decoder bi-encoders (Qwen3-Embedding: config.json Qwen3Model or Qwen3ForCausalLM in a
sentence-transformers folder, or --task embed --pooling MODE) are exported the same way over
tools/decoder.py's model (plain graph, no fused operators); their entry's tokenizer.json appends
<|endoftext|> to every input, as Qwen3-Embedding's tokenizer does (biencoder.eos_tokenizer). Presets
qwen3-embedding-0.6b and qwen3-embed-tiny need --tokenizer with the real Qwen3 tokenizer.json.

Decoder-only rerankers (tools/decoder.py): a folder whose config.json names Qwen3ForCausalLM or
Qwen2ForCausalLM needs --task rerank (the score is logit(YES) - logit(NO) at the last real token;
the tokens are --rerank-tokens, default yes,no for Qwen3 and 1,0 for Qwen2 (mxbai-rerank-v2), looked
up in the folder's tokenizer.json); Qwen3ForSequenceClassification / Qwen2ForSequenceClassification
folders keep their 1-logit `score` head. Their entry's config.pbtxt also carries the model family's
prompt (parameters prompt_template and, where the family has one, default_instruction). Presets
qwen3-reranker-0.6b, mxbai-rerank-base-v2, qwen3-tiny and qwen2-tiny (seeded random weights) need
--tokenizer with the real Qwen3 tokenizer.json. Any other decoder architecture is refused (exit 2).
A decoder's graph is written with ONNX Runtime's fused operators (tools/decoder_fused.py; --no-fusion
for the plain graph); when the fused graph fails verification, the plain graph is exported and
verified instead (the log says why). A decoder's --int8 entry is quantized per row
(tools/decoder_int8.py), so that a pair scores the same in any batch.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import biencoder  # noqa: E402
import crossencoder  # noqa: E402
import decoder  # noqa: E402
import decoder_fused  # noqa: E402
import decoder_int8  # noqa: E402
import make_wordpiece_tokenizer  # noqa: E402
import safetensors_file  # noqa: E402

OPSET = 17
DEFAULT_SEED = 20240611
DEFAULT_ATOL = 1e-4
# protobuf caps a single ONNX file at 2 GiB; bigger models keep their weights in model.onnx.data.
_EXTERNAL_DATA_BYTES = 1800 * 1024 * 1024


class ExportError(Exception):
    pass


@dataclasses.dataclass
class EntryOptions:
    max_batch_size: int = 64  # config.pbtxt max_batch_size
    max_queue_delay_microseconds: int = 2000  # dynamic_batching delay
    # 2 sessions x 1 intra-op thread: bench/batching measured the same useful work per CPU second as
    # 1 x 2 (and +4% on the raw engine) without the two threads waiting on each other per operator.
    instance_count: int = 2  # instance_group count (KIND_CPU)
    intra_op_threads: int = 1  # ONNX Runtime threads per instance


def output_name(cfg) -> str:
    """The graph's output: an embedder's pooled vectors, else a reranker's logits."""
    return "sentence_embedding" if isinstance(cfg, biencoder.EmbedderConfig) else "logits"


def embed_config_pbtxt(name: str, cfg: biencoder.EmbedderConfig, opts: EntryOptions) -> str:
    """config.pbtxt of an embedder: output sentence_embedding [hidden], task embed, pooling, normalize."""
    inputs = ",\n".join(
        f'  {{\n    name: "{n}"\n    data_type: TYPE_INT64\n    dims: [ -1 ]\n  }}' for n in input_names(cfg))
    is_decoder = isinstance(cfg, biencoder.DecoderEmbedderConfig)
    # A decoder's longest input is already capped (biencoder.DECODER_MAX_SEQUENCE_LENGTH); an encoder's at 512.
    max_length = cfg.max_sequence_length if is_decoder else min(512, cfg.max_sequence_length)
    params = biencoder.embed_parameters(cfg) + [
        ("tokenizer", "tokenizer.json"), ("max_sequence_length", str(max_length)),
        ("intra_op_threads", str(opts.intra_op_threads))]
    return (f'name: "{name}"\n'
            f'backend: "onnxruntime"\n'
            f'max_batch_size: {opts.max_batch_size}\n'
            f'input [\n{inputs}\n]\n'
            f'output [\n  {{\n    name: "{output_name(cfg)}"\n    data_type: TYPE_FP32\n'
            f'    dims: [ {cfg.hidden_size} ]\n  }}\n]\n'
            f'dynamic_batching {{\n  max_queue_delay_microseconds: {opts.max_queue_delay_microseconds}\n}}\n'
            f'instance_group [\n  {{\n    count: {opts.instance_count}\n    kind: KIND_CPU\n  }}\n]\n'
            + (decoder_warmup_text(input_names(cfg)) if is_decoder else "") + parameters_text(params))


def input_names(cfg) -> List[str]:
    names = ["input_ids", "attention_mask"]
    if getattr(cfg, "uses_token_type_ids", False):
        names.append("token_type_ids")
    return names


def config_pbtxt(name: str, cfg: crossencoder.CrossEncoderConfig, opts: EntryOptions) -> str:
    """The entry's config.pbtxt in Triton's text format, with tide's parameters."""
    inputs = ",\n".join(
        f'  {{\n    name: "{n}"\n    data_type: TYPE_INT64\n    dims: [ -1 ]\n  }}' for n in input_names(cfg))
    # One label: a reranker's relevance logit (sigmoid). More: a classifier; tide's rerank score is
    # then the softmax probability of the last label (e.g. id2label's "relevant" / "POSITIVE").
    task = [("task", "rerank")] if cfg.num_labels == 1 else [("task", "classify"), ("score_activation", "softmax")]
    params = task + [("tokenizer", "tokenizer.json"),
              ("max_sequence_length", str(min(512, cfg.max_sequence_length))),
              ("intra_op_threads", str(opts.intra_op_threads))]
    param_text = "".join(f'parameters {{\n  key: "{k}"\n  value {{ string_value: "{v}" }}\n}}\n' for k, v in params)
    return (f'name: "{name}"\n'
            f'backend: "onnxruntime"\n'
            f'max_batch_size: {opts.max_batch_size}\n'
            f'input [\n{inputs}\n]\n'
            f'output [\n  {{\n    name: "logits"\n    data_type: TYPE_FP32\n    dims: [ {cfg.num_labels} ]\n  }}\n]\n'
            f'dynamic_batching {{\n  max_queue_delay_microseconds: {opts.max_queue_delay_microseconds}\n}}\n'
            f'instance_group [\n  {{\n    count: {opts.instance_count}\n    kind: KIND_CPU\n  }}\n]\n'
            + param_text)


# ---- decoder entries ------------------------------------------------------------------------------

# A decoder's longest served input: min(max_position_embeddings, 8192). Qwen3-Reranker and
# mxbai-rerank-v2 publish 32k+ position tables, but both reference implementations score with
# max_length 8192, and one 8192-token prefill of a 0.6B model already costs seconds of CPU time
# (attention is quadratic in the length); a longer document is better served as windows (tide's
# long-document handling) than as one longer prompt.
DECODER_MAX_SEQUENCE_LENGTH = 8192

# The prompt of each decoder family (tide model parameter prompt_template: slots {instruction},
# {query}, {document}; special tokens as text). Qwen3: exactly Qwen3-Reranker's model card format.
QWEN3_RERANKER_TEMPLATE = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n"
    "<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n")
QWEN3_RERANKER_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"
# Qwen2: mixedbread's mxbai-rerank-v2 (mxbai_rerank/mxbai_rerank_v2.py in mixedbread-ai/mxbai-rerank):
# chat prefix, "query: ..." sep "document: ..." sep task prompt, chat suffix; the answer tokens are
# "1" / "0". Its instruction line ("instruction: ...\n" before the query) appears only when the
# caller gives one, which one template with an {instruction} slot cannot express: the template
# leaves it out and the entry has no default_instruction.
MXBAI_RERANK_V2_TEMPLATE = (
    "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
    "<|im_start|>user\nquery: {query}\ndocument: {document}\nYou are a search relevance expert who evaluates "
    "how well documents match search queries. For each query-document pair, carefully analyze the semantic "
    "relationship between them, then provide your binary relevance judgment (0 for not relevant, 1 for "
    "relevant).\nRelevance:<|im_end|>\n<|im_start|>assistant\n")
DEFAULT_RERANK_TOKENS = {decoder.QWEN3: ("yes", "no"), decoder.QWEN2: ("1", "0")}


def decoder_prompt(cfg: decoder.DecoderConfig) -> List:
    """[(parameter, value)] of the family's prompt."""
    if cfg.family == decoder.QWEN3:
        return [("prompt_template", QWEN3_RERANKER_TEMPLATE), ("default_instruction", QWEN3_RERANKER_INSTRUCTION)]
    return [("prompt_template", MXBAI_RERANK_V2_TEMPLATE)]


def pbtxt_string(value: str) -> str:
    """A protobuf text-format string literal (quotes included): backslash, quote and control
    characters escaped; other characters as UTF-8."""
    out = []
    for ch in value:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7f:
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def parameters_text(params: List) -> str:
    return "".join(f'parameters {{\n  key: "{k}"\n  value {{ string_value: {pbtxt_string(v)} }}\n}}\n'
                   for k, v in params)


def decoder_config_pbtxt(name: str, cfg: decoder.DecoderConfig, opts: EntryOptions) -> str:
    """config.pbtxt of a decoder reranker: rerank with sigmoid of the one logit, and the prompt."""
    inputs = ",\n".join(
        f'  {{\n    name: "{n}"\n    data_type: TYPE_INT64\n    dims: [ -1 ]\n  }}' for n in input_names(cfg))
    params = [("task", "rerank"), ("score_activation", "sigmoid"), ("tokenizer", "tokenizer.json"),
              ("max_sequence_length", str(min(DECODER_MAX_SEQUENCE_LENGTH, cfg.max_position_embeddings))),
              ("intra_op_threads", str(opts.intra_op_threads))] + decoder_prompt(cfg)
    return (f'name: "{name}"\n'
            f'backend: "onnxruntime"\n'
            f'max_batch_size: {opts.max_batch_size}\n'
            f'input [\n{inputs}\n]\n'
            f'output [\n  {{\n    name: "logits"\n    data_type: TYPE_FP32\n    dims: [ 1 ]\n  }}\n]\n'
            f'dynamic_batching {{\n  max_queue_delay_microseconds: {opts.max_queue_delay_microseconds}\n}}\n'
            f'instance_group [\n  {{\n    count: {opts.instance_count}\n    kind: KIND_CPU\n  }}\n]\n'
            + decoder_warmup_text(input_names(cfg)) + parameters_text(params))


# The shapes a decoder entry warms up with (batch rows, tokens). Without model_warmup, tide warms up
# every shape a batch can take, up to max_sequence_length (8192) and max_batch_tokens: for
# qwen3-reranker-0.6b that is ~65 TFLOP per instance, half an hour of a 2-core machine before the
# server is ready. These two shapes touch every operator and the allocator at a prefill's usual
# scale; a longer shape's first batch pays its own allocation.
DECODER_WARMUP_SHAPES = ((1, 64), (4, 256))


def decoder_warmup_text(names: List[str]) -> str:
    entries = []
    for rows, tokens in DECODER_WARMUP_SHAPES:
        inputs = "".join(f'    inputs {{\n      key: "{n}"\n      value {{ data_type: TYPE_INT64 dims: [ {tokens} ] '
                         f'zero_data: true }}\n    }}\n' for n in names)
        entries.append(f'  {{\n    name: "prefill_{rows}x{tokens}"\n    batch_size: {rows}\n{inputs}  }}')
    return "model_warmup [\n" + ",\n".join(entries) + "\n]\n"


def read_tokenizer(path: str) -> Dict:
    try:
        with open(path, encoding="utf-8") as f:
            tok = json.load(f)
    except (OSError, ValueError) as e:
        raise crossencoder.CheckpointError(f"cannot read {path}: {e}") from e
    if not isinstance(tok, dict):
        raise crossencoder.CheckpointError(f"{path}: not a tokenizer.json object")
    return tok


def rerank_token_ids(cfg: decoder.DecoderConfig, tokens: Optional[str], tokenizer_path: Optional[str]):
    """(yes text, no text, yes id, no id) for a CausalLM reranker."""
    if tokens is None:
        yes, no = DEFAULT_RERANK_TOKENS[cfg.family]
    else:
        parts = tokens.split(",")
        if len(parts) != 2 or not all(parts):
            raise crossencoder.CheckpointError(f"--rerank-tokens {tokens!r}: want two tokens YES,NO (e.g. yes,no)")
        yes, no = parts
    if not tokenizer_path:
        raise crossencoder.CheckpointError("a CausalLM reranker needs a tokenizer.json to look up its rerank tokens "
                                           f"{yes!r}, {no!r}: put one in the folder or pass --tokenizer")
    tok = read_tokenizer(tokenizer_path)
    return yes, no, decoder.token_id(tok, yes, tokenizer_path), decoder.token_id(tok, no, tokenizer_path)


def decoder_reranker(lm_or_reranker, cfg: decoder.DecoderConfig, args, tokenizer_path: Optional[str]):
    """The exported module: a seq-cls model as it is, a CausalLM turned into its yes/no head."""
    if cfg.kind == decoder.SEQUENCE_CLASSIFICATION:
        if args.rerank_tokens:
            raise crossencoder.CheckpointError(f"--rerank-tokens is for a CausalLM folder; {cfg.architecture} "
                                               "scores with its own `score` head")
        return lm_or_reranker
    if args.task != "rerank":
        raise crossencoder.CheckpointError(
            f"{cfg.architecture} is a causal language model, not a reranker by itself: pass --task rerank to score "
            f"each prompt by its next-token logits of the rerank tokens (--rerank-tokens YES,NO, default "
            f"{','.join(DEFAULT_RERANK_TOKENS[cfg.family])})")
    yes, no, yes_id, no_id = rerank_token_ids(cfg, args.rerank_tokens, tokenizer_path)
    log(args, f"rerank head: logit({yes!r} = {yes_id}) - logit({no!r} = {no_id})")
    return decoder.yes_no_reranker(lm_or_reranker, yes_id, no_id)


# ---- checkpoints -----------------------------------------------------------------------------------

def checkpoint_weights(directory: str) -> str:
    """The weights file an HF folder would be loaded from (safetensors first, as transformers does)."""
    for name in (safetensors_file.SINGLE_FILE, safetensors_file.INDEX_FILE, "pytorch_model.bin"):
        if os.path.isfile(os.path.join(directory, name)):
            return os.path.join(directory, name)
    raise crossencoder.CheckpointError(
        f"{directory}: no weights found (looked for {safetensors_file.SINGLE_FILE}, "
        f"{safetensors_file.INDEX_FILE} with its shards, and pytorch_model.bin)")


def load_plain_tensors(weights: str):
    """The state dict of a pickled PyTorch checkpoint (pytorch_model.bin), unpickled with
    torch.load(weights_only=True): only tensors, storages and plain containers are rebuilt. A file
    that names anything else (a function to call, a class to build) is refused before any of it
    runs: a checkpoint folder downloaded from elsewhere is untrusted data, and a full unpickling
    would run whatever code the file names."""
    try:
        return torch.load(weights, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        detail = str(e).split("WeightsUnpickler error:")[-1].strip()
        raise crossencoder.CheckpointError(
            f"{weights}: refused: only plain tensors are accepted from a PyTorch checkpoint, and this file "
            f"needs code to load (or is not a PyTorch checkpoint): {detail}. Nothing in it was run. "
            f"Use model.safetensors instead (safetensors holds only tensors), converted where the "
            f"file's origin is trusted") from e
    except Exception as e:  # torch raises many types for a corrupt file
        raise crossencoder.CheckpointError(f"cannot read {weights}: {e}") from e


def load_checkpoint(directory: str, task: Optional[str] = None, pooling: Optional[str] = None):
    """(config, model) from an HF folder with config.json and model.safetensors, sharded
    model-*-of-*.safetensors with model.safetensors.index.json, or pytorch_model.bin. A
    sentence-transformers folder, or `task` "embed" with `pooling`, gives an embedder."""
    cfg_path = os.path.join(directory, "config.json")
    if not os.path.isfile(cfg_path):
        raise crossencoder.CheckpointError(f"{cfg_path} not found")
    weights = checkpoint_weights(directory)
    try:
        with open(cfg_path, encoding="utf-8") as f:
            hf = json.load(f)
    except ValueError as e:
        raise crossencoder.CheckpointError(f"{cfg_path}: not JSON: {e}") from e
    if not isinstance(hf, dict):
        raise crossencoder.CheckpointError(f"{cfg_path}: not a JSON object")
    st_folder = biencoder.is_sentence_transformers_folder(directory)
    embed = task == "embed" or st_folder
    if decoder.is_decoder_config(hf) and (task == "embed" or (st_folder and task != "rerank")):
        return load_decoder_embedder(directory, hf, weights, st_folder, pooling)
    if embed and not decoder.is_decoder_config(hf):
        backbone = crossencoder.CrossEncoderConfig.from_hf_dict(hf)
        if biencoder.is_sentence_transformers_folder(directory):
            cfg = biencoder.read_sentence_transformers_folder(directory, backbone)
            if pooling and pooling != cfg.pooling:
                raise crossencoder.CheckpointError(f"--pooling {pooling} disagrees with the folder's Pooling module "
                                                   f"({cfg.pooling})")
        elif not pooling:
            raise crossencoder.CheckpointError(f"{directory} is not a sentence-transformers folder (no modules.json): "
                                               f"--task embed needs --pooling ({', '.join(biencoder.POOLINGS)})")
        else:
            cfg = biencoder.EmbedderConfig(backbone=backbone, pooling=pooling, normalize=True)
            cfg.validate()
        model = biencoder.build_model(cfg, seed=0)
        biencoder.load_hf_state_dict(model, read_state(directory, weights))
        return cfg, model
    if decoder.is_decoder_config(hf):
        cfg = decoder.DecoderConfig.from_hf_dict(hf)
        model_module = decoder
    else:
        cfg = crossencoder.CrossEncoderConfig.from_hf_dict(hf)
        model_module = crossencoder
    state = read_state(directory, weights)
    if model_module is decoder and cfg.kind == decoder.SEQUENCE_CLASSIFICATION:
        # The head "as it is": its rows, whatever config.json's id2label says; tide serves one logit.
        score = state.get("score.weight")
        if score is not None and score.dim() == 2:
            cfg = dataclasses.replace(cfg, num_labels=int(score.shape[0]))
        if cfg.num_labels != 1:
            raise crossencoder.CheckpointError(
                f"{cfg.architecture} with a {cfg.num_labels}-row score head: tide serves a decoder reranker with "
                "one relevance logit (score.weight [1, hidden])")
    model = model_module.build_model(cfg, seed=0)
    model_module.load_hf_state_dict(model, state)
    return cfg, model


def load_decoder_embedder(directory: str, hf: Dict, weights: str, st_folder: bool, pooling: Optional[str]):
    """(config, model) of a decoder bi-encoder folder (Qwen3-Embedding: config.json Qwen3Model or
    Qwen3ForCausalLM, a sentence-transformers folder, or --task embed --pooling MODE)."""
    backbone = biencoder.decoder_backbone_from_hf(hf)
    if not st_folder and not pooling:
        raise crossencoder.CheckpointError(f"{directory} is not a sentence-transformers folder (no modules.json): "
                                           f"--task embed needs --pooling ({', '.join(biencoder.POOLINGS)})")
    cfg = biencoder.decoder_embedder_config(directory if st_folder else None, backbone, pooling)
    if pooling and pooling != cfg.pooling:
        raise crossencoder.CheckpointError(f"--pooling {pooling} disagrees with the folder's Pooling module "
                                           f"({cfg.pooling})")
    model = biencoder.build_decoder_model(cfg, seed=0)
    biencoder.load_decoder_state_dict(model, read_state(directory, weights))
    return cfg, model


def read_state(directory: str, weights: str):
    if weights.endswith((".safetensors", ".json")):
        try:
            state = safetensors_file.read_folder(directory)
        except safetensors_file.SafetensorsError as e:
            raise crossencoder.CheckpointError(f"cannot read safetensors weights: {e}") from e
    else:
        state = load_plain_tensors(weights)
        if not isinstance(state, dict):
            raise crossencoder.CheckpointError(f"{weights} does not hold a state dict")
    return state


# ---- reference cases -------------------------------------------------------------------------------

def random_cases(cfg, seed: int, num_cases: int, max_length: int) -> List[Dict]:
    """Random query/document pair batches with padding inside each batch (fixed seed)."""
    if isinstance(cfg, decoder.DecoderConfig):
        return random_decoder_cases(cfg, seed, num_cases, max_length)
    if isinstance(cfg, biencoder.DecoderEmbedderConfig):
        return random_decoder_cases(dataclasses.replace(cfg.backbone, pad_token_id=cfg.pad_token_id), seed, num_cases,
                                    max_length)
    g = torch.Generator().manual_seed(seed)
    max_length = max(4, min(max_length, cfg.max_sequence_length))
    if cfg.model_type == crossencoder.BERT:
        cls, sep, pad, first_word = 101, 102, 0, 999
        if cfg.vocab_size <= first_word:
            first_word = 104
    else:
        cls, sep, pad, first_word = 0, 2, cfg.pad_token_id, 4
    cases = []
    for _ in range(num_cases):
        batch = int(torch.randint(1, 5, (1,), generator=g))
        lengths = [int(torch.randint(4, max_length + 1, (1,), generator=g)) for _ in range(batch)]
        seq = max(lengths)
        ids = torch.full((batch, seq), pad, dtype=torch.int64)
        mask = torch.zeros((batch, seq), dtype=torch.int64)
        types = torch.zeros((batch, seq), dtype=torch.int64)
        for row, n in enumerate(lengths):
            body = torch.randint(first_word, cfg.vocab_size, (n,), generator=g)
            query_len = int(torch.randint(1, max(2, n - 3), (1,), generator=g))
            body[0] = cls
            body[min(query_len, n - 2)] = sep
            body[n - 1] = sep
            ids[row, :n] = body
            mask[row, :n] = 1
            if cfg.uses_token_type_ids:
                types[row, min(query_len, n - 2) + 1:n] = 1
        inputs = {"input_ids": ids, "attention_mask": mask}
        if cfg.uses_token_type_ids:
            inputs["token_type_ids"] = types
        cases.append(inputs)
    return cases


def random_decoder_cases(cfg: decoder.DecoderConfig, seed: int, num_cases: int, max_length: int) -> List[Dict]:
    """Random prompts, right-padded to the longest of their batch; at least one batch mixes lengths."""
    g = torch.Generator().manual_seed(seed)
    max_length = max(2, min(max_length, cfg.max_position_embeddings))
    pad = cfg.pad_token_id if cfg.pad_token_id is not None else (151643 if cfg.vocab_size > 151643 else 0)
    cases = []
    for i in range(num_cases):
        batch = int(torch.randint(1, 5, (1,), generator=g)) if i else 4
        lengths = [int(torch.randint(1, max_length + 1, (1,), generator=g)) for _ in range(batch)]
        if i == 0:
            lengths[0], lengths[-1] = max_length, 1
        seq = max(lengths)
        ids = torch.full((batch, seq), pad, dtype=torch.int64)
        mask = torch.zeros((batch, seq), dtype=torch.int64)
        for row, n in enumerate(lengths):
            ids[row, :n] = torch.randint(0, cfg.vocab_size, (n,), generator=g)
            mask[row, :n] = 1
        cases.append({"input_ids": ids, "attention_mask": mask})
    return cases


def run_model(model: torch.nn.Module, cfg, inputs: Dict) -> torch.Tensor:
    with torch.no_grad():
        return model(*[inputs[n] for n in input_names(cfg)])


def write_reference(path: str, model, cfg, cases: List[Dict]) -> None:
    out = {"cases": []}
    for inputs in cases:
        logits = run_model(model, cfg, inputs)
        case = {"inputs": {k: v.tolist() for k, v in inputs.items()}, "logits": logits.tolist()}
        if isinstance(cfg, biencoder.EmbedderConfig):
            # The second output: verify-model compares it at the real (mask 1) positions.
            with torch.no_grad():
                _, states = biencoder.WithTokenEmbeddings(model)(*[inputs[n] for n in input_names(cfg)])
            case[biencoder.TOKEN_EMBEDDINGS] = states.tolist()
        out["cases"].append(case)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f)


def verify_with_tide(tide_binary: str, model_path: str, reference_path: str, atol: float) -> None:
    if not os.path.isfile(tide_binary) or not os.access(tide_binary, os.X_OK):
        raise ExportError(f"{tide_binary} not found or not executable: build it (make build) or pass --tide-binary")
    cmd = [tide_binary, "verify-model", "--model", model_path, "--reference", reference_path, "--atol", repr(atol)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode == 1:
        raise ExportError(f"ONNX Runtime output differs from PyTorch by more than {atol:g}: "
                          f"{' '.join(cmd)}:\n{proc.stdout.strip()}")
    if proc.returncode != 0:
        raise ExportError(f"verify-model could not check the export: {' '.join(cmd)} exited {proc.returncode} "
                          f"(does {tide_binary} have the verify-model command?):\n{proc.stdout.strip()}")


# ---- export ----------------------------------------------------------------------------------------

def export_onnx(model: torch.nn.Module, cfg, path: str) -> Optional[Dict[str, int]]:
    """Writes `model` as ONNX at `path`. A decoder_fused.FusedDecoderReranker is finished
    (decoder_fused.finish_fused_graph) after ONNX's checker saw it; returns its fused operator counts
    (None for any other model)."""
    fused = isinstance(model, decoder_fused.FusedDecoderReranker)
    counts = None
    names = input_names(cfg)
    sample = random_cases(cfg, seed=1, num_cases=1, max_length=16)[0]
    dynamic = {n: {0: "batch", 1: "sequence"} for n in names}
    dynamic[output_name(cfg)] = {0: "batch"}
    outputs = [output_name(cfg)]
    graph = model
    if isinstance(cfg, biencoder.EmbedderConfig):
        # An embedder's graph also outputs the token states (TEI's /embed_all); the server fetches
        # them only for batches that ask.
        graph = biencoder.WithTokenEmbeddings(model)
        outputs.append(biencoder.TOKEN_EMBEDDINGS)
        dynamic[biencoder.TOKEN_EMBEDDINGS] = {0: "batch", 1: "sequence"}
    n_bytes = sum(p.numel() * 4 for p in model.parameters())
    scratch = tempfile.mkdtemp(prefix="tide-onnx-", dir=os.path.dirname(path))
    try:
        raw = os.path.join(scratch, "model.onnx")
        with torch.no_grad():
            torch.onnx.export(graph, tuple(sample[n] for n in names), raw, input_names=names,
                              output_names=outputs, dynamic_axes=dynamic, opset_version=OPSET,
                              do_constant_folding=True)
        import onnx  # Debian python3-onnx; imported late so that --help works without it
        if n_bytes < _EXTERNAL_DATA_BYTES:
            onnx.checker.check_model(raw)
            if not fused:
                shutil.move(raw, path)
                return None
            proto = onnx.load(raw)
            decoder_fused.finish_fused_graph(proto, cfg.num_labels)  # ORT's contrib layout, which ONNX's checker does not know
            onnx.save_model(proto, path)
        else:  # torch writes one file per tensor; gather them into model.onnx.data beside model.onnx
            proto = onnx.load(raw, load_external_data=True)
            if not fused:
                onnx.save_model(proto, path, save_as_external_data=True, all_tensors_to_one_file=True,
                                location=os.path.basename(path) + ".data", size_threshold=1024)
                onnx.checker.check_model(path)
                return None
            # (torch's exporter already ran ONNX's full checker, before the graph was finished; a
            # proto over 2 GB cannot be checked in memory)
            decoder_fused.finish_fused_graph(proto, cfg.num_labels)
            onnx.save_model(proto, path, save_as_external_data=True, all_tensors_to_one_file=True,
                            location=os.path.basename(path) + ".data", size_threshold=1024)
        counts = decoder_fused.fused_op_counts(proto)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return counts


def decoder_embedder_tokenizer(args, tokenizer_path: Optional[str]):
    """(tokenizer.json dict, changed): the entry's tokenizer of a decoder embedder, one that appends
    <|endoftext|> to every input as Qwen3-Embedding's own does (biencoder.eos_tokenizer: unchanged
    when it already does). Checked before the export, which takes minutes at full size."""
    if not tokenizer_path:
        raise crossencoder.CheckpointError(f"{args.checkpoint or args.preset}: no tokenizer.json (a decoder embedder "
                                           "is served with its own tokenizer; pass --tokenizer)")
    tok, changed = biencoder.eos_tokenizer(read_tokenizer(tokenizer_path))
    if changed:
        log(args, f"{tokenizer_path} does not append {biencoder.QWEN3_EOS} to its inputs: the entry's tokenizer.json "
                  "does (TemplateProcessing), as Qwen3-Embedding's tokenizer does")
    return tok, changed


def place_entry(staging: str, final: str) -> None:
    """Replaces `final` with `staging` so that readers see the old entry or the new one, never half."""
    old = None
    if os.path.exists(final):
        old = os.path.join(os.path.dirname(final), f".{os.path.basename(final)}.old-{os.getpid()}")
        os.rename(final, old)
    os.rename(staging, final)
    if old:
        shutil.rmtree(old, ignore_errors=True)


def export(args: argparse.Namespace) -> str:
    ckpt_tokenizer = os.path.join(args.checkpoint, "tokenizer.json") if args.checkpoint else None
    tokenizer_path = args.tokenizer or (ckpt_tokenizer if ckpt_tokenizer and os.path.isfile(ckpt_tokenizer) else None)
    if args.checkpoint:
        cfg, model = load_checkpoint(args.checkpoint, args.task, args.pooling)
        name = args.name or os.path.basename(os.path.normpath(args.checkpoint))
    elif args.preset in biencoder.PRESETS:
        cfg = biencoder.PRESETS[args.preset]
        if isinstance(cfg, biencoder.DecoderEmbedderConfig) and not args.tokenizer:
            raise crossencoder.CheckpointError(
                f"--preset {args.preset} needs --tokenizer with the real Qwen3 tokenizer.json (e.g. "
                f"--tokenizer ../shared/assets/tokenizers/qwen3/tokenizer.json)")
        model = biencoder.build_embedder(cfg, seed=args.seed)
        name = args.name or args.preset
    elif args.preset in decoder.PRESETS:
        if not args.tokenizer:
            raise crossencoder.CheckpointError(
                f"--preset {args.preset} needs --tokenizer with the real Qwen3 tokenizer.json (e.g. "
                f"--tokenizer ../shared/assets/tokenizers/qwen3/tokenizer.json): its rerank tokens and the served "
                f"prompts are read with it")
        cfg = decoder.PRESETS[args.preset]
        model = decoder.build_causal_lm(cfg, seed=args.seed)
        if args.rerank_tokens is None:
            args.rerank_tokens = ",".join(decoder.PRESET_RERANK_TOKENS[args.preset])
        args.task = "rerank"  # a preset is a reranker
        name = args.name or args.preset
    else:
        cfg = crossencoder.PRESETS[args.preset]
        model = crossencoder.build_model(cfg, seed=args.seed)
        name = args.name or args.preset
    is_decoder = isinstance(cfg, decoder.DecoderConfig)
    kind = cfg.architecture if is_decoder else cfg.model_type
    if is_decoder:
        model = decoder_reranker(model, cfg, args, tokenizer_path)
        cfg = model.config
    elif args.rerank_tokens:
        raise crossencoder.CheckpointError("--rerank-tokens is for a decoder CausalLM folder (Qwen3ForCausalLM, "
                                           "Qwen2ForCausalLM)")
    embed_tokenizer = None
    if isinstance(cfg, biencoder.DecoderEmbedderConfig):
        embed_tokenizer = decoder_embedder_tokenizer(args, tokenizer_path)
    if not name or "/" in name or name.startswith("."):
        raise ExportError(f"bad model name {name!r}")
    torch.set_num_threads(max(1, args.threads))

    os.makedirs(args.repository, exist_ok=True)
    final = os.path.join(args.repository, name)
    for leftover in os.listdir(args.repository):  # from an export that was killed
        if leftover.startswith((f".{name}.staging-", f".{name}.old-")):
            shutil.rmtree(os.path.join(args.repository, leftover), ignore_errors=True)
    staging = tempfile.mkdtemp(prefix=f".{name}.staging-", dir=args.repository)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(staging, 0o777 & ~umask)  # mkdtemp makes it private; the entry should not be
    try:
        os.makedirs(os.path.join(staging, "1"))
        model_path = os.path.join(staging, "1", "model.onnx")
        fuse = is_decoder and not args.no_fusion
        log(args, f"exporting {name} ({kind}, {cfg.num_hidden_layers} x {cfg.hidden_size}, "
                  f"vocab {cfg.vocab_size}) to ONNX opset {OPSET}{' with fused decoder operators' if fuse else ''}")
        max_positions = min(DECODER_MAX_SEQUENCE_LENGTH, cfg.max_position_embeddings) if is_decoder else 0
        if fuse:
            counts = export_onnx(decoder_fused.FusedDecoderReranker(model, max_positions).eval(), cfg, model_path)
            log(args, "fused: " + ", ".join(f"{n} {op}" for op, n in counts.items()))
        else:
            export_onnx(model, cfg, model_path)

        tokenizer_out = os.path.join(staging, "tokenizer.json")
        if embed_tokenizer is not None and embed_tokenizer[1]:
            with open(tokenizer_out, "w", encoding="utf-8") as f:
                json.dump(embed_tokenizer[0], f, ensure_ascii=False)
        elif tokenizer_path:
            shutil.copyfile(tokenizer_path, tokenizer_out)
        elif is_decoder:
            raise crossencoder.CheckpointError(f"{args.checkpoint}: no tokenizer.json (a decoder reranker is served "
                                               "with its own tokenizer; pass --tokenizer)")
        else:
            layout = "bert" if cfg.model_type == crossencoder.BERT else "xlmr"
            log(args, f"generating a {layout} WordPiece tokenizer.json from {args.words} (placeholder vocabulary)")
            make_wordpiece_tokenizer.write_tokenizer(tokenizer_out, min(cfg.vocab_size, 30522), layout, args.words)

        with open(os.path.join(staging, "config.pbtxt"), "w", encoding="utf-8") as f:
            entry_config = decoder_config_pbtxt if is_decoder else config_pbtxt
            if isinstance(cfg, biencoder.EmbedderConfig):
                entry_config = embed_config_pbtxt
            f.write(entry_config(name, cfg, EntryOptions(max_batch_size=args.max_batch_size)))

        cases = random_cases(cfg, args.seed + 1, args.verify_cases, args.verify_max_length)
        ref_dir = tempfile.mkdtemp(prefix="tide-ref-")
        try:
            ref = args.reference_out or os.path.join(ref_dir, "reference.json")
            write_reference(ref, model, cfg, cases)
            if args.no_verify:
                log(args, "skipping verification (--no-verify)")
            else:
                try:
                    verify_with_tide(args.tide_binary, model_path, ref, args.atol)
                except ExportError as e:
                    if not fuse:
                        raise
                    # The fused graph is only an optimisation: when ONNX Runtime refuses it or it
                    # disagrees with PyTorch, the plain graph is exported and checked instead.
                    log(args, f"the fused graph failed verification, exporting the unfused graph instead: {e}")
                    for leftover in (model_path, model_path + ".data"):
                        if os.path.exists(leftover):
                            os.remove(leftover)
                    export_onnx(model, cfg, model_path)
                    verify_with_tide(args.tide_binary, model_path, ref, args.atol)
                log(args, f"verified: ONNX Runtime matches PyTorch within {args.atol:g} on {len(cases)} padded batches")
        finally:
            shutil.rmtree(ref_dir, ignore_errors=True)
        place_entry(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    log(args, f"wrote {final}/config.pbtxt, {final}/1/model.onnx, {final}/tokenizer.json")
    return final


def quantize_decoder_per_row(source: str, target: str) -> int:
    """Writes `source` quantized by decoder_int8.quantize_per_row (batch-invariant INT8) at `target`;
    the number of MatMuls quantized."""
    import onnx
    proto = onnx.load(source, load_external_data=True)
    count = decoder_int8.quantize_per_row(proto)
    if sum(len(t.raw_data) for t in proto.graph.initializer) < _EXTERNAL_DATA_BYTES:
        onnx.save_model(proto, target)
    else:
        onnx.save_model(proto, target, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=os.path.basename(target) + ".data", size_threshold=1024)
    return count


def add_int8_entry(args: argparse.Namespace, final: str, is_decoder: bool = False) -> str:
    """--int8: a second entry <name>-int8 holding `tide quantize --int8` of the exported model, or
    for a decoder its per-row quantization (decoder_int8.py: a pair scores the same in any batch)."""
    name = os.path.basename(os.path.normpath(final)) + "-int8"
    staging = tempfile.mkdtemp(prefix=f".{name}.staging-", dir=args.repository)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(staging, 0o777 & ~umask)
    try:
        os.makedirs(os.path.join(staging, "1"))
        source, target = os.path.join(final, "1", "model.onnx"), os.path.join(staging, "1", "model.onnx")
        if is_decoder:
            count = quantize_decoder_per_row(source, target)
            log(args, f"{name}: {count} MatMuls quantized to INT8 with per-row activation scales")
        else:
            cmd = [args.tide_binary, "quantize", "--int8", source, target]
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if proc.returncode != 0:
                raise ExportError(f"{' '.join(cmd)} failed: {proc.stdout.strip()}")
        shutil.copyfile(os.path.join(final, "tokenizer.json"), os.path.join(staging, "tokenizer.json"))
        with open(os.path.join(final, "config.pbtxt"), encoding="utf-8") as f:
            config = f.read()
        old_name = f'name: "{os.path.basename(os.path.normpath(final))}"'
        with open(os.path.join(staging, "config.pbtxt"), "w", encoding="utf-8") as f:
            f.write(config.replace(old_name, f'name: "{name}"', 1))
        place_entry(staging, os.path.join(args.repository, name))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    log(args, f"wrote {args.repository}/{name} ({'per-row INT8' if is_decoder else 'tide quantize --int8'})")
    return os.path.join(args.repository, name)


def is_decoder_entry(entry: str) -> bool:
    """Whether an exported entry is a decoder reranker (its config.pbtxt carries a prompt_template)."""
    with open(os.path.join(entry, "config.pbtxt"), encoding="utf-8") as f:
        return 'key: "prompt_template"' in f.read()


def log(args, msg: str) -> None:
    if not args.quiet:
        print(f"export_model: {msg}", file=sys.stderr, flush=True)


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--preset", choices=sorted(crossencoder.PRESETS) + sorted(decoder.PRESETS) + sorted(biencoder.PRESETS),
                     default="minilm-l6",
                     help="architecture with seeded random weights (default %(default)s)")
    src.add_argument("--checkpoint", help="local HF checkpoint folder (config.json + model.safetensors[.index.json] or pytorch_model.bin)")
    p.add_argument("--repository", default="models", help="model repository folder (default %(default)s)")
    p.add_argument("--name", help="entry name (default: the preset, or the checkpoint folder's name)")
    p.add_argument("--tokenizer", default=os.environ.get("TIDE_TOKENIZER") or None,
                   help="tokenizer.json to copy into the entry (env TIDE_TOKENIZER); default: the checkpoint's, "
                        "else one generated from --words")
    p.add_argument("--task", choices=["rerank", "embed"],
                   help="rerank: serve a decoder CausalLM folder (Qwen3ForCausalLM, Qwen2ForCausalLM) as a reranker "
                        "scored by its next-token logits of the rerank tokens; embed: a BERT / XLM-R / Qwen3 folder as an "
                        "embedding model (needs --pooling unless the folder is a sentence-transformers one)")
    p.add_argument("--pooling", choices=list(biencoder.POOLINGS),
                   help="with --task embed: how token vectors become the embedding (sentence-transformers' modes)")
    p.add_argument("--rerank-tokens", metavar="YES,NO",
                   help="with --task rerank: the tokens whose logits give the score, each ONE token of the "
                        "tokenizer (default: yes,no for Qwen3, 1,0 for Qwen2 / mxbai-rerank-v2)")
    p.add_argument("--words", default=make_wordpiece_tokenizer.DEFAULT_WORDS, help="word list for a generated tokenizer")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed for random weights and reference inputs")
    p.add_argument("--max-batch-size", type=int, default=64)
    p.add_argument("--tide-binary", default=os.environ.get("TIDE_BINARY", "build/tide"),
                   help="tide binary whose verify-model checks the export (env TIDE_BINARY; default %(default)s)")
    p.add_argument("--atol", type=float, default=DEFAULT_ATOL, help="largest allowed |ORT - PyTorch| (default 1e-4)")
    p.add_argument("--verify-cases", type=int, default=4, help="random padded batches to check")
    p.add_argument("--verify-max-length", type=int, default=96, help="longest random sequence to check")
    p.add_argument("--reference-out", help="also keep the reference JSON (PyTorch inputs and logits) here")
    p.add_argument("--no-verify", action="store_true", help="skip the ONNX Runtime check (not recommended)")
    p.add_argument("--no-fusion", action="store_true",
                   help="decoders: export the plain graph, without ONNX Runtime's fused operators "
                        "(tools/decoder_fused.py; a fused graph that fails verification falls back to it anyway)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="PyTorch threads")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--int8", action="store_true", help="also write <name>-int8, quantized with `tide quantize --int8` (a decoder: per-row INT8, tools/decoder_int8.py)")
    args = p.parse_args(argv)
    if args.tokenizer and not os.path.isfile(args.tokenizer):
        p.error(f"--tokenizer {args.tokenizer}: no such file")
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    try:
        final = export(args)
        if args.int8:
            add_int8_entry(args, final, is_decoder=is_decoder_entry(final))
    except crossencoder.CheckpointError as e:
        print(f"export_model: {e}", file=sys.stderr)
        return 2
    except (ExportError, OSError, ValueError) as e:
        print(f"export_model: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
