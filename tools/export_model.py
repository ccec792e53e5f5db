#!/usr/bin/python3
"""Exports a cross-encoder reranker to ONNX as a tide model repository entry.

  /usr/bin/python3 tools/export_model.py --preset minilm-l6 --repository models
  /usr/bin/python3 tools/export_model.py --checkpoint DIR --name my-reranker --repository models

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

import crossencoder  # noqa: E402
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


def input_names(cfg: crossencoder.CrossEncoderConfig) -> List[str]:
    names = ["input_ids", "attention_mask"]
    if cfg.uses_token_type_ids:
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


def load_checkpoint(directory: str):
    """(config, model) from an HF folder with config.json and model.safetensors, sharded
    model-*-of-*.safetensors with model.safetensors.index.json, or pytorch_model.bin."""
    cfg_path = os.path.join(directory, "config.json")
    if not os.path.isfile(cfg_path):
        raise crossencoder.CheckpointError(f"{cfg_path} not found")
    weights = checkpoint_weights(directory)
    with open(cfg_path, encoding="utf-8") as f:
        cfg = crossencoder.CrossEncoderConfig.from_hf_dict(json.load(f))
    model = crossencoder.build_model(cfg, seed=0)
    if weights.endswith((".safetensors", ".json")):
        try:
            state = safetensors_file.read_folder(directory)
        except safetensors_file.SafetensorsError as e:
            raise crossencoder.CheckpointError(f"cannot read safetensors weights: {e}") from e
    else:
        state = load_plain_tensors(weights)
        if not isinstance(state, dict):
            raise crossencoder.CheckpointError(f"{weights} does not hold a state dict")
    crossencoder.load_hf_state_dict(model, state)
    return cfg, model


# ---- reference cases -------------------------------------------------------------------------------

def random_cases(cfg: crossencoder.CrossEncoderConfig, seed: int, num_cases: int, max_length: int) -> List[Dict]:
    """Random query/document pair batches with padding inside each batch (fixed seed)."""
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


def run_model(model: torch.nn.Module, cfg: crossencoder.CrossEncoderConfig, inputs: Dict) -> torch.Tensor:
    with torch.no_grad():
        return model(*[inputs[n] for n in input_names(cfg)])


def write_reference(path: str, model, cfg, cases: List[Dict]) -> None:
    out = {"cases": []}
    for inputs in cases:
        logits = run_model(model, cfg, inputs)
        out["cases"].append({"inputs": {k: v.tolist() for k, v in inputs.items()}, "logits": logits.tolist()})
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

def export_onnx(model: torch.nn.Module, cfg: crossencoder.CrossEncoderConfig, path: str) -> None:
    names = input_names(cfg)
    sample = random_cases(cfg, seed=1, num_cases=1, max_length=16)[0]
    dynamic = {n: {0: "batch", 1: "sequence"} for n in names}
    dynamic["logits"] = {0: "batch"}
    n_bytes = sum(p.numel() * 4 for p in model.parameters())
    scratch = tempfile.mkdtemp(prefix="tide-onnx-", dir=os.path.dirname(path))
    try:
        raw = os.path.join(scratch, "model.onnx")
        with torch.no_grad():
            torch.onnx.export(model, tuple(sample[n] for n in names), raw, input_names=names,
                              output_names=["logits"], dynamic_axes=dynamic, opset_version=OPSET,
                              do_constant_folding=True)
        import onnx  # Debian python3-onnx; imported late so that --help works without it
        if n_bytes < _EXTERNAL_DATA_BYTES:
            onnx.checker.check_model(raw)
            shutil.move(raw, path)
        else:  # torch writes one file per tensor; gather them into model.onnx.data beside model.onnx
            proto = onnx.load(raw, load_external_data=True)
            onnx.save_model(proto, path, save_as_external_data=True, all_tensors_to_one_file=True,
                            location=os.path.basename(path) + ".data", size_threshold=1024)
            onnx.checker.check_model(path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


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
    if args.checkpoint:
        cfg, model = load_checkpoint(args.checkpoint)
        name = args.name or os.path.basename(os.path.normpath(args.checkpoint))
    else:
        cfg = crossencoder.PRESETS[args.preset]
        model = crossencoder.build_model(cfg, seed=args.seed)
        name = args.name or args.preset
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
        log(args, f"exporting {name} ({cfg.model_type}, {cfg.num_hidden_layers} x {cfg.hidden_size}, "
                  f"vocab {cfg.vocab_size}) to ONNX opset {OPSET}")
        export_onnx(model, cfg, model_path)

        tokenizer_out = os.path.join(staging, "tokenizer.json")
        ckpt_tokenizer = os.path.join(args.checkpoint, "tokenizer.json") if args.checkpoint else None
        if args.tokenizer:
            shutil.copyfile(args.tokenizer, tokenizer_out)
        elif ckpt_tokenizer and os.path.isfile(ckpt_tokenizer):
            shutil.copyfile(ckpt_tokenizer, tokenizer_out)
        else:
            layout = "bert" if cfg.model_type == crossencoder.BERT else "xlmr"
            log(args, f"generating a {layout} WordPiece tokenizer.json from {args.words} (placeholder vocabulary)")
            make_wordpiece_tokenizer.write_tokenizer(tokenizer_out, min(cfg.vocab_size, 30522), layout, args.words)

        with open(os.path.join(staging, "config.pbtxt"), "w", encoding="utf-8") as f:
            f.write(config_pbtxt(name, cfg, EntryOptions(max_batch_size=args.max_batch_size)))

        cases = random_cases(cfg, args.seed + 1, args.verify_cases, args.verify_max_length)
        ref_dir = tempfile.mkdtemp(prefix="tide-ref-")
        try:
            ref = args.reference_out or os.path.join(ref_dir, "reference.json")
            write_reference(ref, model, cfg, cases)
            if args.no_verify:
                log(args, "skipping verification (--no-verify)")
            else:
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


def add_int8_entry(args: argparse.Namespace, final: str) -> str:
    """--int8: a second entry <name>-int8 holding `tide quantize --int8` of the exported model."""
    name = os.path.basename(os.path.normpath(final)) + "-int8"
    staging = tempfile.mkdtemp(prefix=f".{name}.staging-", dir=args.repository)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(staging, 0o777 & ~umask)
    try:
        os.makedirs(os.path.join(staging, "1"))
        cmd = [args.tide_binary, "quantize", "--int8", os.path.join(final, "1", "model.onnx"),
               os.path.join(staging, "1", "model.onnx")]
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
    log(args, f"wrote {args.repository}/{name} (tide quantize --int8)")
    return os.path.join(args.repository, name)


def log(args, msg: str) -> None:
    if not args.quiet:
        print(f"export_model: {msg}", file=sys.stderr, flush=True)


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--preset", choices=sorted(crossencoder.PRESETS), default="minilm-l6",
                     help="architecture with seeded random weights (default %(default)s)")
    src.add_argument("--checkpoint", help="local HF checkpoint folder (config.json + model.safetensors[.index.json] or pytorch_model.bin)")
    p.add_argument("--repository", default="models", help="model repository folder (default %(default)s)")
    p.add_argument("--name", help="entry name (default: the preset, or the checkpoint folder's name)")
    p.add_argument("--tokenizer", default=os.environ.get("TIDE_TOKENIZER") or None,
                   help="tokenizer.json to copy into the entry (env TIDE_TOKENIZER); default: the checkpoint's, "
                        "else one generated from --words")
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
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="PyTorch threads")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--int8", action="store_true", help="also write <name>-int8, quantized with `tide quantize --int8`")
    args = p.parse_args(argv)
    if args.tokenizer and not os.path.isfile(args.tokenizer):
        p.error(f"--tokenizer {args.tokenizer}: no such file")
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    try:
        final = export(args)
        if args.int8:
            add_int8_entry(args, final)
    except crossencoder.CheckpointError as e:
        print(f"export_model: {e}", file=sys.stderr)
        return 2
    except (ExportError, OSError, ValueError) as e:
        print(f"export_model: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
