"""Reads HuggingFace safetensors checkpoints into PyTorch tensors without the safetensors package.

Debian ships python3-torch but not safetensors, and most current HF rerankers publish only
`model.safetensors` (or shards `model-0000i-of-0000n.safetensors` listed in
`model.safetensors.index.json`). The format is small enough to read here:

  8 bytes    N, the header length, unsigned little-endian
  N bytes    UTF-8 JSON object: {tensor name: {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
             optional "__metadata__": {str: str}}
  the rest   the tensors' raw little-endian bytes; offsets count from the first byte after the header

Contract: `read_file(path)` and `read_folder(directory)` return {name: torch.Tensor} (CPU, the
file's dtype, contiguous, owning their memory) or raise `SafetensorsError` naming the file and
the tensor at fault. The header is checked as the reference implementation does: JSON object with
no duplicate names, known dtypes, non-negative integer shapes, offsets inside the data region whose
length equals shape x dtype size, no two tensors overlapping, and no unindexed bytes (holes or a
trailing tail), so a file cannot carry data the header does not describe. Pure functions;
thread-safe (each call opens its own file).
"""

from __future__ import annotations

import json
import os
import struct
import sys
from typing import Dict, List, Tuple

import torch

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
# The reference implementation refuses headers above 100 MB; a real header is a few hundred KB.
MAX_HEADER_BYTES = 100 * 1000 * 1000

# safetensors dtype -> (torch dtype, bytes per element). FP8 types need torch >= 2.1 (not Debian's).
DTYPES: Dict[str, Tuple[torch.dtype, int]] = {
    "F64": (torch.float64, 8),
    "F32": (torch.float32, 4),
    "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2),
    "I64": (torch.int64, 8),
    "I32": (torch.int32, 4),
    "I16": (torch.int16, 2),
    "I8": (torch.int8, 1),
    "U8": (torch.uint8, 1),
    "BOOL": (torch.bool, 1),
}


class SafetensorsError(Exception):
    """A safetensors file or index that is malformed, inconsistent or unsupported."""


def _reject_duplicates(pairs: List[Tuple[str, object]]) -> Dict[str, object]:
    out: Dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise SafetensorsError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def read_header(path: str) -> Tuple[int, Dict[str, Dict], Dict[str, str]]:
    """(data start offset, {name: {"dtype", "shape", "data_offsets"}}, metadata), all validated."""
    try:
        file_size = os.path.getsize(path)
        with open(path, "rb") as f:
            prefix = f.read(8)
            if len(prefix) < 8:
                raise SafetensorsError(f"{path}: {file_size} bytes: too short for the 8-byte header length")
            (n,) = struct.unpack("<Q", prefix)
            if n == 0 or n > MAX_HEADER_BYTES:
                raise SafetensorsError(f"{path}: header length {n} is out of range (1..{MAX_HEADER_BYTES})")
            if n > file_size - 8:
                raise SafetensorsError(f"{path}: header length {n} exceeds the {file_size - 8} bytes after it "
                                       "(truncated file, or not safetensors)")
            raw = f.read(n)
    except OSError as e:
        raise SafetensorsError(f"{path}: cannot read: {e}") from e
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_reject_duplicates)
    except SafetensorsError as e:
        raise SafetensorsError(f"{path}: header: {e}") from e
    except (UnicodeDecodeError, ValueError) as e:
        raise SafetensorsError(f"{path}: header is not UTF-8 JSON: {e}") from e
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: header is not a JSON object")

    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise SafetensorsError(f"{path}: __metadata__ must be an object of strings")

    data_start = 8 + n
    data_len = file_size - data_start
    spans = []
    for name, info in header.items():
        where = f"{path}: tensor {name!r}"
        if not isinstance(info, dict):
            raise SafetensorsError(f"{where}: entry is not an object")
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if dtype not in DTYPES:
            raise SafetensorsError(f"{where}: unsupported dtype {dtype!r} (supported: {', '.join(DTYPES)})")
        if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
            raise SafetensorsError(f"{where}: shape {shape!r} is not a list of non-negative integers")
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_int(o) for o in offsets)):
            raise SafetensorsError(f"{where}: data_offsets {offsets!r} is not [begin, end]")
        begin, end = offsets
        if begin < 0 or end < begin:
            raise SafetensorsError(f"{where}: data_offsets [{begin}, {end}] are not 0 <= begin <= end")
        if end > data_len:
            raise SafetensorsError(f"{where}: data_offsets [{begin}, {end}] run past the data region "
                                   f"({data_len} bytes after the header)")
        numel = 1
        for d in shape:
            numel *= d
        expected = numel * DTYPES[dtype][1]
        if end - begin != expected:
            raise SafetensorsError(f"{where}: data_offsets [{begin}, {end}] hold {end - begin} bytes but "
                                   f"{dtype} {shape} needs {expected}")
        spans.append((begin, end, name))
    spans.sort()
    position, previous = 0, None
    for begin, end, name in spans:
        if begin < position:
            raise SafetensorsError(f"{path}: tensors {previous!r} and {name!r} overlap "
                                   f"(byte {begin} < {position})")
        if begin > position:
            raise SafetensorsError(f"{path}: bytes {position}..{begin} of the data region belong to no tensor "
                                   f"(before {name!r})")
        position, previous = end, name
    if position != data_len:
        raise SafetensorsError(f"{path}: the data region has {data_len} bytes but the tensors cover {position}")
    return data_start, header, metadata


def _to_tensor(buffer: bytearray, dtype: str, shape: List[int]) -> torch.Tensor:
    torch_dtype, size = DTYPES[dtype]
    if not buffer:
        return torch.empty(shape, dtype=torch_dtype)
    if sys.byteorder == "big" and size > 1:  # the file is little-endian
        view = memoryview(buffer)
        swapped = bytearray(len(buffer))
        for i in range(size):
            swapped[i::size] = view[size - 1 - i::size]
        buffer = swapped
    return torch.frombuffer(buffer, dtype=torch_dtype).reshape(shape)


def read_file(path: str) -> Dict[str, torch.Tensor]:
    """Every tensor of one safetensors file."""
    data_start, header, _ = read_header(path)
    tensors: Dict[str, torch.Tensor] = {}
    try:
        with open(path, "rb") as f:
            for name, info in header.items():
                begin, end = info["data_offsets"]
                f.seek(data_start + begin)
                buffer = bytearray(end - begin)
                if f.readinto(buffer) != end - begin:
                    raise SafetensorsError(f"{path}: tensor {name!r}: file ended early")
                tensors[name] = _to_tensor(buffer, info["dtype"], info["shape"])
    except OSError as e:
        raise SafetensorsError(f"{path}: cannot read: {e}") from e
    return tensors


def read_index(directory: str) -> Dict[str, List[str]]:
    """{shard file name: [tensor names]} from model.safetensors.index.json, validated."""
    path = os.path.join(directory, INDEX_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            index = json.load(f, object_pairs_hook=_reject_duplicates)
    except SafetensorsError as e:
        raise SafetensorsError(f"{path}: {e}") from e
    except (OSError, ValueError) as e:
        raise SafetensorsError(f"{path}: cannot read: {e}") from e
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise SafetensorsError(f"{path}: no \"weight_map\" object of tensor name -> shard file")
    shards: Dict[str, List[str]] = {}
    for name, shard in weight_map.items():
        if (not isinstance(shard, str) or not shard or shard != os.path.basename(shard) or shard.startswith(".")
                or not shard.endswith(".safetensors")):
            raise SafetensorsError(f"{path}: weight_map[{name!r}] = {shard!r} is not a .safetensors file name "
                                   "in the same folder")
        shards.setdefault(shard, []).append(name)
    return shards


def read_folder(directory: str) -> Dict[str, torch.Tensor]:
    """The state dict of an HF folder: model.safetensors, else the shards named by the index."""
    single = os.path.join(directory, SINGLE_FILE)
    if os.path.isfile(single):
        return read_file(single)
    if not os.path.isfile(os.path.join(directory, INDEX_FILE)):
        raise SafetensorsError(f"{directory}: neither {SINGLE_FILE} nor {INDEX_FILE}")
    state: Dict[str, torch.Tensor] = {}
    for shard, names in sorted(read_index(directory).items()):
        shard_path = os.path.join(directory, shard)
        if not os.path.isfile(shard_path):
            raise SafetensorsError(f"{shard_path}: shard named by {INDEX_FILE} not found")
        tensors = read_file(shard_path)
        listed, found = set(names), set(tensors)
        if listed != found:
            missing, extra = sorted(listed - found), sorted(found - listed)
            raise SafetensorsError(f"{shard_path} does not match {INDEX_FILE}: listed but absent: "
                                   f"{', '.join(missing[:10]) or 'none'}; present but not listed: "
                                   f"{', '.join(extra[:10]) or 'none'}")
        state.update(tensors)
    return state
