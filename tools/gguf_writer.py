"""GGUF v3 files: a writer, a reader, and ggml's Q8_0 block quantization (numpy only).

Written from the public GGUF specification (ggml's docs/gguf.md) and ggml's Q8_0 definition; no
code of llama.cpp or gguf-py is used.

Layout of a file (little-endian):
  "GGUF", uint32 version (3), uint64 tensor count, uint64 metadata count,
  metadata: key (string), uint32 value type, value;        string = uint64 byte length + UTF-8
  tensor infos: name (string), uint32 n_dims, uint64 ne[n_dims] (ne[0] the innermost, i.e. the
                numpy shape reversed), uint32 ggml type, uint64 offset into the data section,
  padding to `general.alignment` (32 unless the file says otherwise), then the data section,
  every tensor starting at a multiple of the alignment.

Q8_0 (ggml type 8): each row is cut into blocks of 32 values; a block is an fp16 scale
d = max|x| / 127 and 32 int8 q = round(x / d) (computed as x * (1/d), rounded half away from
zero, as ggml's reference quantizer does), 34 bytes; a value is read back as q * d.

Contract: `GGUFWriter.add_*` collect metadata and tensors in order, `write(path)` writes them in
one pass (atomically: a temporary file renamed into place) and raises GGUFError for anything the
format cannot hold (a duplicate key or tensor name, a Q8_0 row not a multiple of 32, a value of
the wrong type). `read(path)` returns a `GGUFFile` (version, metadata {key: (type, value)}, tensors
{name: TensorInfo}) and raises GGUFError naming the problem for a truncated or malformed file.
"""

from __future__ import annotations

import dataclasses
import os
import struct
import tempfile
from typing import Dict, List, Tuple

import numpy as np

MAGIC = b"GGUF"
VERSION = 3
DEFAULT_ALIGNMENT = 32

# Metadata value types.
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
_SCALAR = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i", FLOAT32: "<f",
           BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}
_NUMPY = {UINT8: "<u1", INT8: "<i1", UINT16: "<u2", INT16: "<i2", UINT32: "<u4", INT32: "<i4", FLOAT32: "<f4",
          BOOL: "<u1", UINT64: "<u8", INT64: "<i8", FLOAT64: "<f8"}
TYPE_NAMES = {UINT8: "uint8", INT8: "int8", UINT16: "uint16", INT16: "int16", UINT32: "uint32", INT32: "int32",
              FLOAT32: "float32", BOOL: "bool", STRING: "string", ARRAY: "array", UINT64: "uint64",
              INT64: "int64", FLOAT64: "float64"}

# ggml tensor types written here.
GGML_F32 = 0
GGML_F16 = 1
GGML_Q8_0 = 8
GGML_TYPE_NAMES = {GGML_F32: "F32", GGML_F16: "F16", GGML_Q8_0: "Q8_0"}
Q8_0_BLOCK = 32
Q8_0_BLOCK_BYTES = 2 + Q8_0_BLOCK
_Q8_0_DTYPE = np.dtype([("d", "<f2"), ("qs", "i1", (Q8_0_BLOCK,))])


class GGUFError(Exception):
    """A value the format cannot hold, or a file that is not a well-formed GGUF file."""


# ---- Q8_0 ----------------------------------------------------------------------------------------

def quantize_q8_0(x: np.ndarray) -> np.ndarray:
    """ggml's Q8_0 of a float array whose last dimension is a multiple of 32: uint8 bytes of shape
    [..., n / 32 * 34]."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim == 0 or x.shape[-1] % Q8_0_BLOCK:
        raise GGUFError(f"Q8_0 needs rows that are a multiple of {Q8_0_BLOCK} values, got shape {tuple(x.shape)}")
    blocks = x.reshape(-1, Q8_0_BLOCK)
    amax = np.abs(blocks).max(axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d > 0)
    scaled = blocks * inv[:, None]
    q = np.sign(scaled) * np.floor(np.abs(scaled) + np.float32(0.5))  # roundf: half away from zero
    out = np.empty(blocks.shape[0], dtype=_Q8_0_DTYPE)
    out["d"] = d.astype(np.float16)
    out["qs"] = q.astype(np.int8)
    return out.view(np.uint8).reshape(*x.shape[:-1], x.shape[-1] // Q8_0_BLOCK * Q8_0_BLOCK_BYTES)


def dequantize_q8_0(data: np.ndarray, shape: Tuple[int, ...]) -> np.ndarray:
    """float32 values of Q8_0 bytes, in `shape` (the numpy shape, last dimension a multiple of 32)."""
    n = int(np.prod(shape))
    raw = np.ascontiguousarray(data, dtype=np.uint8).reshape(-1)
    if n % Q8_0_BLOCK or raw.size != n // Q8_0_BLOCK * Q8_0_BLOCK_BYTES:
        raise GGUFError(f"Q8_0 data of {raw.size} bytes does not hold shape {tuple(shape)}")
    blocks = raw.view(_Q8_0_DTYPE)
    values = blocks["qs"].astype(np.float32) * blocks["d"].astype(np.float32)[:, None]
    return values.reshape(shape)


def tensor_nbytes(ggml_type: int, ne: Tuple[int, ...]) -> int:
    n = int(np.prod(ne)) if ne else 1
    if ggml_type == GGML_F32:
        return 4 * n
    if ggml_type == GGML_F16:
        return 2 * n
    if ggml_type == GGML_Q8_0:
        if not ne or ne[0] % Q8_0_BLOCK:
            raise GGUFError(f"Q8_0 tensor with ne[0] = {ne[0] if ne else None}: not a multiple of {Q8_0_BLOCK}")
        return n // Q8_0_BLOCK * Q8_0_BLOCK_BYTES
    raise GGUFError(f"ggml type {ggml_type} is not supported here (F32, F16, Q8_0)")


# ---- writer --------------------------------------------------------------------------------------

def _pack_string(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _pack_value(vtype: int, value, key: str) -> bytes:
    try:
        if vtype == STRING:
            if not isinstance(value, str):
                raise TypeError(f"not a string: {value!r}")
            return _pack_string(value)
        if vtype == BOOL:
            return struct.pack("<?", bool(value))
        return struct.pack(_SCALAR[vtype], value)
    except (struct.error, TypeError, KeyError) as e:
        raise GGUFError(f"metadata {key}: cannot write {value!r} as {TYPE_NAMES.get(vtype, vtype)}: {e}") from e


@dataclasses.dataclass
class _PendingTensor:
    name: str
    ne: Tuple[int, ...]
    ggml_type: int
    data: bytes


class GGUFWriter:
    def __init__(self, alignment: int = DEFAULT_ALIGNMENT):
        if alignment <= 0 or alignment % 8:
            raise GGUFError(f"alignment {alignment} must be a positive multiple of 8")
        self.alignment = alignment
        self._kv: Dict[str, bytes] = {}
        self._tensors: List[_PendingTensor] = []
        if alignment != DEFAULT_ALIGNMENT:
            self.add_uint32("general.alignment", alignment)

    # metadata
    def _add(self, key: str, payload: bytes) -> None:
        if not key or len(key.encode("utf-8")) > 65535:
            raise GGUFError(f"bad metadata key {key!r}")
        if key in self._kv:
            raise GGUFError(f"metadata key {key} written twice")
        self._kv[key] = _pack_string(key) + payload

    def add_scalar(self, key: str, vtype: int, value) -> None:
        if vtype in (ARRAY,) or vtype not in TYPE_NAMES:
            raise GGUFError(f"metadata {key}: {vtype} is not a scalar type")
        self._add(key, struct.pack("<I", vtype) + _pack_value(vtype, value, key))

    def add_string(self, key: str, value: str) -> None:
        self.add_scalar(key, STRING, value)

    def add_uint32(self, key: str, value: int) -> None:
        self.add_scalar(key, UINT32, value)

    def add_int32(self, key: str, value: int) -> None:
        self.add_scalar(key, INT32, value)

    def add_float32(self, key: str, value: float) -> None:
        self.add_scalar(key, FLOAT32, value)

    def add_bool(self, key: str, value: bool) -> None:
        self.add_scalar(key, BOOL, value)

    def add_array(self, key: str, elem_type: int, values) -> None:
        values = list(values) if elem_type == STRING else values
        head = struct.pack("<II", ARRAY, elem_type) + struct.pack("<Q", len(values))
        if elem_type == STRING:
            body = b"".join(_pack_value(STRING, v, key) for v in values)
        elif elem_type in _NUMPY:
            arr = np.asarray(values)
            if arr.ndim != 1:
                raise GGUFError(f"metadata {key}: an array must be one-dimensional")
            if elem_type != FLOAT32 and elem_type != FLOAT64 and arr.size and not np.issubdtype(arr.dtype, np.integer) \
                    and arr.dtype != np.bool_:
                raise GGUFError(f"metadata {key}: {arr.dtype} values for an array of {TYPE_NAMES[elem_type]}")
            conv = arr.astype(_NUMPY[elem_type])
            if elem_type not in (FLOAT32, FLOAT64) and arr.size and not np.array_equal(conv.astype(np.int64),
                                                                                       arr.astype(np.int64)):
                raise GGUFError(f"metadata {key}: values out of range for {TYPE_NAMES[elem_type]}")
            body = conv.tobytes()
        else:
            raise GGUFError(f"metadata {key}: arrays of {TYPE_NAMES.get(elem_type, elem_type)} are not supported")
        self._add(key, head + body)

    # tensors
    def add_tensor(self, name: str, array: np.ndarray, ggml_type: int = GGML_F32) -> None:
        """A float tensor (numpy shape [..., rows, columns]) stored as F32, F16 or Q8_0."""
        if not name or len(name.encode("utf-8")) >= 64:
            raise GGUFError(f"bad tensor name {name!r} (1-63 bytes)")
        if any(t.name == name for t in self._tensors):
            raise GGUFError(f"tensor {name} written twice")
        array = np.asarray(array)
        if array.ndim < 1 or array.ndim > 4:
            raise GGUFError(f"tensor {name}: {array.ndim} dimensions (1 to 4)")
        if not np.issubdtype(array.dtype, np.floating):
            raise GGUFError(f"tensor {name}: {array.dtype} values (float expected)")
        if not np.all(np.isfinite(array)):
            raise GGUFError(f"tensor {name}: holds NaN or infinite values")
        ne = tuple(int(n) for n in reversed(array.shape))
        if ggml_type == GGML_F32:
            data = np.ascontiguousarray(array, dtype="<f4").tobytes()
        elif ggml_type == GGML_F16:
            data = np.ascontiguousarray(array, dtype="<f2").tobytes()
        elif ggml_type == GGML_Q8_0:
            if ne[0] % Q8_0_BLOCK:
                raise GGUFError(f"tensor {name}: Q8_0 needs rows of a multiple of {Q8_0_BLOCK} values, "
                                f"shape {tuple(array.shape)}")
            data = quantize_q8_0(array).tobytes()
        else:
            raise GGUFError(f"tensor {name}: ggml type {ggml_type} not supported (F32, F16, Q8_0)")
        assert len(data) == tensor_nbytes(ggml_type, ne)
        self._tensors.append(_PendingTensor(name, ne, ggml_type, data))

    def _pad(self, n: int) -> int:
        return (self.alignment - n % self.alignment) % self.alignment

    def write(self, path: str) -> None:
        header = MAGIC + struct.pack("<IQQ", VERSION, len(self._tensors), len(self._kv))
        infos, offset = [], 0
        for t in self._tensors:
            infos.append(_pack_string(t.name) + struct.pack("<I", len(t.ne)) +
                         struct.pack(f"<{len(t.ne)}Q", *t.ne) + struct.pack("<IQ", t.ggml_type, offset))
            offset += len(t.data) + self._pad(len(t.data))
        head = header + b"".join(self._kv.values()) + b"".join(infos)
        directory = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".gguf-", dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(head + b"\0" * self._pad(len(head)))
                for t in self._tensors:
                    f.write(t.data)
                    f.write(b"\0" * self._pad(len(t.data)))
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


# ---- reader --------------------------------------------------------------------------------------

@dataclasses.dataclass
class TensorInfo:
    name: str
    ne: Tuple[int, ...]  # ggml order: ne[0] innermost
    ggml_type: int
    offset: int  # into the data section
    data: bytes

    @property
    def shape(self) -> Tuple[int, ...]:
        """The numpy shape (ne reversed)."""
        return tuple(reversed(self.ne))

    def to_numpy(self) -> np.ndarray:
        if self.ggml_type == GGML_F32:
            return np.frombuffer(self.data, dtype="<f4").reshape(self.shape)
        if self.ggml_type == GGML_F16:
            return np.frombuffer(self.data, dtype="<f2").astype(np.float32).reshape(self.shape)
        if self.ggml_type == GGML_Q8_0:
            return dequantize_q8_0(np.frombuffer(self.data, dtype=np.uint8), self.shape)
        raise GGUFError(f"tensor {self.name}: ggml type {self.ggml_type} cannot be read here")


@dataclasses.dataclass
class GGUFFile:
    version: int
    alignment: int
    metadata: Dict[str, Tuple[int, object]]  # key -> (type, value); arrays: (ARRAY, (elem_type, list))
    tensors: Dict[str, TensorInfo]

    def value(self, key: str, default=None):
        """The plain value of a key (an array's list), or `default`."""
        if key not in self.metadata:
            return default
        vtype, v = self.metadata[key]
        return v[1] if vtype == ARRAY else v


class _Cursor:
    def __init__(self, buf: bytes, path: str):
        self.buf, self.pos, self.path = buf, 0, path

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise GGUFError(f"{self.path}: truncated at byte {self.pos} reading {what} ({n} bytes)")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str, what: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))

    def string(self, what: str) -> str:
        (n,) = self.unpack("<Q", what)
        try:
            return self.take(n, what).decode("utf-8")
        except UnicodeDecodeError as e:
            raise GGUFError(f"{self.path}: {what} is not UTF-8: {e}") from e

    def value(self, vtype: int, what: str):
        if vtype == STRING:
            return self.string(what)
        if vtype in _SCALAR:
            return self.unpack(_SCALAR[vtype], what)[0]
        if vtype == ARRAY:
            (etype,) = self.unpack("<I", what)
            (count,) = self.unpack("<Q", what)
            if etype == STRING:
                return etype, [self.string(what) for _ in range(count)]
            if etype not in _NUMPY:
                raise GGUFError(f"{self.path}: {what}: array of unknown type {etype}")
            size = np.dtype(_NUMPY[etype]).itemsize * count
            return etype, np.frombuffer(self.take(size, what), dtype=_NUMPY[etype]).tolist()
        raise GGUFError(f"{self.path}: {what}: unknown value type {vtype}")


def read(path: str) -> GGUFFile:
    with open(path, "rb") as f:
        buf = f.read()
    c = _Cursor(buf, path)
    if c.take(4, "magic") != MAGIC:
        raise GGUFError(f"{path}: not a GGUF file (no GGUF magic)")
    (version,) = c.unpack("<I", "version")
    if version not in (2, 3):
        raise GGUFError(f"{path}: GGUF version {version} (2 or 3 expected)")
    n_tensors, n_kv = c.unpack("<QQ", "counts")
    metadata: Dict[str, Tuple[int, object]] = {}
    for i in range(n_kv):
        key = c.string(f"metadata key {i}")
        (vtype,) = c.unpack("<I", f"type of {key}")
        if key in metadata:
            raise GGUFError(f"{path}: metadata key {key} appears twice")
        metadata[key] = (vtype, c.value(vtype, key))
    alignment = metadata.get("general.alignment", (UINT32, DEFAULT_ALIGNMENT))[1]
    if not isinstance(alignment, int) or alignment <= 0:
        raise GGUFError(f"{path}: bad general.alignment {alignment!r}")
    infos = []
    for i in range(n_tensors):
        name = c.string(f"tensor name {i}")
        (n_dims,) = c.unpack("<I", f"dimensions of {name}")
        if n_dims < 1 or n_dims > 4:
            raise GGUFError(f"{path}: tensor {name} has {n_dims} dimensions")
        ne = c.unpack(f"<{n_dims}Q", f"shape of {name}")
        ggml_type, offset = c.unpack("<IQ", f"type and offset of {name}")
        if offset % alignment:
            raise GGUFError(f"{path}: tensor {name} at offset {offset}, not a multiple of {alignment}")
        infos.append((name, tuple(ne), ggml_type, offset))
    data_start = c.pos + (alignment - c.pos % alignment) % alignment
    tensors: Dict[str, TensorInfo] = {}
    for name, ne, ggml_type, offset in infos:
        if name in tensors:
            raise GGUFError(f"{path}: tensor {name} appears twice")
        n = tensor_nbytes(ggml_type, ne)
        start = data_start + offset
        if start + n > len(buf):
            raise GGUFError(f"{path}: tensor {name} ({n} bytes at {start}) runs past the end of the file "
                            f"({len(buf)} bytes)")
        tensors[name] = TensorInfo(name, ne, ggml_type, offset, buf[start:start + n])
    return GGUFFile(version, alignment, metadata, tensors)


def describe(f: GGUFFile, max_array: int = 4) -> str:
    """A short listing (metadata, then tensors) for humans."""
    lines = [f"GGUF v{f.version}, {len(f.metadata)} metadata keys, {len(f.tensors)} tensors"]
    for key, (vtype, v) in f.metadata.items():
        if vtype == ARRAY:
            etype, items = v
            shown = ", ".join(repr(x) for x in items[:max_array]) + (", ..." if len(items) > max_array else "")
            lines.append(f"  {key}: {TYPE_NAMES.get(etype, etype)}[{len(items)}] [{shown}]")
        else:
            lines.append(f"  {key}: {TYPE_NAMES.get(vtype, vtype)} {v!r}")
    for t in f.tensors.values():
        lines.append(f"  {t.name}: {GGML_TYPE_NAMES.get(t.ggml_type, t.ggml_type)} ne={list(t.ne)}")
    return "\n".join(lines)
