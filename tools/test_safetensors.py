#!/usr/bin/python3
"""Tests of tools/safetensors_file.py and of safetensors checkpoints in tools/export_model.py.

Run: /usr/bin/python3 tools/test_safetensors.py  (from the repository root; registered with CTest as
tools_safetensors). The files are written here by `write_safetensors`, an independent writer of the
format, so the reader is checked against the format rather than against itself. The export tests
need the tide binary with `verify-model` (found as in test_export.py) and fail without it.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest
from typing import Dict, Optional

TOOLS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TOOLS)

import torch  # noqa: E402

import crossencoder  # noqa: E402
import export_model  # noqa: E402
import safetensors_file  # noqa: E402
import test_export  # noqa: E402  (helpers only: its TestCase classes are not imported here)

_NAMES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
          torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
          torch.bool: "BOOL"}


def tensor_bytes(t: torch.Tensor) -> bytes:
    """Little-endian raw bytes (this test runs on little-endian hosts, as torch's storage is native)."""
    t = t.contiguous()
    if t.numel() == 0:
        return b""
    return t.reshape(-1).view(torch.uint8).numpy().tobytes()


def write_safetensors(path: str, tensors: Dict[str, torch.Tensor], metadata: Optional[Dict[str, str]] = None,
                      edit_header=None, header_length: Optional[int] = None, tail: bytes = b"") -> None:
    """Writes `tensors` in the safetensors layout; `edit_header(header)` may corrupt the header dict,
    `header_length` overrides the length field and `tail` is appended after the data."""
    header, data, offset = {}, bytearray(), 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        raw = tensor_bytes(t)
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        data += raw
        offset += len(raw)
    if edit_header:
        edit_header(header)
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the reference writer pads the header to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text) if header_length is None else header_length))
        f.write(text)
        f.write(data)
        f.write(tail)


def write_sharded(folder: str, state: Dict[str, torch.Tensor], shards: int) -> None:
    names = list(state)
    weight_map = {}
    for i in range(shards):
        shard = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: state[n] for n in names[i::shards]}
        write_safetensors(os.path.join(folder, shard), part, metadata={"format": "pt"})
        weight_map.update({n: shard for n in part})
    with open(os.path.join(folder, safetensors_file.INDEX_FILE), "w", encoding="utf-8") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)


class ReaderTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="tide-safetensors-test-")
        self.path = os.path.join(self.tmp.name, "model.safetensors")

    def tearDown(self):
        self.tmp.cleanup()

    def sample(self) -> Dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(7)
        return {
            "f32": torch.randn(3, 5, generator=g),
            "f16": torch.randn(4, generator=g).to(torch.float16),
            "bf16": torch.randn(2, 3, generator=g).to(torch.bfloat16),
            "f64": torch.randn(2, generator=g).to(torch.float64),
            "i64": torch.arange(-3, 6, dtype=torch.int64).reshape(3, 3),
            "i32": torch.tensor([1, -2, 2 ** 30], dtype=torch.int32),
            "i16": torch.tensor([-7, 300], dtype=torch.int16),
            "i8": torch.tensor([-128, 127], dtype=torch.int8),
            "u8": torch.tensor([0, 255], dtype=torch.uint8),
            "bool": torch.tensor([True, False, True]),
            "scalar": torch.tensor(2.5),
            "empty": torch.zeros(0, 4),
        }

    def test_every_dtype_reads_back_bit_exact(self):
        tensors = self.sample()
        write_safetensors(self.path, tensors, metadata={"format": "pt"})
        got = safetensors_file.read_file(self.path)
        self.assertEqual(sorted(got), sorted(tensors))
        for name, t in tensors.items():
            with self.subTest(name=name):
                self.assertEqual(got[name].dtype, t.dtype)
                self.assertEqual(tuple(got[name].shape), tuple(t.shape))
                self.assertTrue(torch.equal(got[name], t))
        _, _, metadata = safetensors_file.read_header(self.path)
        self.assertEqual(metadata, {"format": "pt"})

    def test_tensors_own_their_memory(self):
        write_safetensors(self.path, {"a": torch.ones(4)})
        got = safetensors_file.read_file(self.path)
        os.remove(self.path)
        got["a"].add_(1)  # writable, and independent of the (deleted) file
        self.assertTrue(torch.equal(got["a"], torch.full((4,), 2.0)))

    def assert_refused(self, pattern: str, **kwargs):
        write_safetensors(self.path, kwargs.pop("tensors", {"a": torch.ones(2, 2), "b": torch.zeros(3)}), **kwargs)
        with self.assertRaisesRegex(safetensors_file.SafetensorsError, pattern):
            safetensors_file.read_file(self.path)

    def test_short_file_is_refused(self):
        with open(self.path, "wb") as f:
            f.write(b"\x10\x00")
        with self.assertRaisesRegex(safetensors_file.SafetensorsError, "too short for the 8-byte header length"):
            safetensors_file.read_file(self.path)

    def test_header_length_past_the_end_is_refused(self):
        self.assert_refused(r"header length 4096 exceeds the \d+ bytes after it", header_length=4096)

    def test_absurd_header_length_is_refused(self):
        self.assert_refused(r"header length 18446744073709551615 is out of range", header_length=2 ** 64 - 1)
        self.assert_refused(r"header length 0 is out of range", header_length=0)

    def test_header_that_is_not_json_is_refused(self):
        self.assert_refused("header is not UTF-8 JSON", header_length=3)  # cuts the JSON after '{"a'

    def test_header_that_is_a_list_is_refused(self):
        with open(self.path, "wb") as f:
            f.write(struct.pack("<Q", 8) + b"[1,2,3] ")
        with self.assertRaisesRegex(safetensors_file.SafetensorsError, "header is not a JSON object"):
            safetensors_file.read_file(self.path)

    def test_unknown_dtype_is_refused(self):
        def edit(h):
            h["b"]["dtype"] = "F8_E4M3"
        self.assert_refused(r"tensor 'b': unsupported dtype 'F8_E4M3' \(supported: F64, F32, F16, BF16, I64",
                            edit_header=edit)

    def test_overlapping_offsets_are_refused(self):
        def edit(h):
            h["b"]["data_offsets"] = [8, 20]  # a is [0, 16): b starts inside it
            # keep the data region covered: the file still has 28 bytes of data
        self.assert_refused(r"tensors 'a' and 'b' overlap \(byte 8 < 16\)", edit_header=edit, tail=b"")

    def test_offsets_past_the_data_are_refused(self):
        def edit(h):
            h["b"]["data_offsets"] = [16, 40]
            h["b"]["shape"] = [6]
        self.assert_refused(r"tensor 'b': data_offsets \[16, 40\] run past the data region \(28 bytes",
                            edit_header=edit)

    def test_size_that_does_not_match_the_shape_is_refused(self):
        def edit(h):
            h["b"]["shape"] = [2]
        self.assert_refused(r"tensor 'b': data_offsets \[16, 28\] hold 12 bytes but F32 \[2\] needs 8",
                            edit_header=edit)

    def test_reversed_and_malformed_offsets_are_refused(self):
        def reversed_(h):
            h["b"]["data_offsets"] = [28, 16]
        self.assert_refused(r"data_offsets \[28, 16\] are not 0 <= begin <= end", edit_header=reversed_)

        def malformed(h):
            h["b"]["data_offsets"] = [16]
        self.assert_refused(r"data_offsets \[16\] is not \[begin, end\]", edit_header=malformed)

        def bad_shape(h):
            h["b"]["shape"] = [-3]
        self.assert_refused(r"shape \[-3\] is not a list of non-negative integers", edit_header=bad_shape)

    def test_unindexed_bytes_are_refused(self):
        self.assert_refused(r"the data region has 32 bytes but the tensors cover 28", tail=b"JUNK")

        def hole(h):
            h["b"]["data_offsets"] = [20, 32]
        self.assert_refused(r"bytes 16\.\.20 of the data region belong to no tensor \(before 'b'\)",
                            edit_header=hole, tail=b"JUNK")

    def test_duplicate_tensor_names_are_refused(self):
        with open(self.path, "wb") as f:
            text = b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},' \
                   b'"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}'
            f.write(struct.pack("<Q", len(text)) + text + b"\x01\x02")
        with self.assertRaisesRegex(safetensors_file.SafetensorsError, "header: duplicate key 'a'"):
            safetensors_file.read_file(self.path)

    def test_bad_metadata_is_refused(self):
        self.assert_refused("__metadata__ must be an object of strings", metadata={"total": 3})

    def test_sharded_folder_reads_every_shard(self):
        state = self.sample()
        write_sharded(self.tmp.name, state, 3)
        got = safetensors_file.read_folder(self.tmp.name)
        self.assertEqual(sorted(got), sorted(state))
        for name, t in state.items():
            self.assertTrue(torch.equal(got[name], t), name)

    def test_bad_indexes_are_refused(self):
        write_sharded(self.tmp.name, {"a": torch.ones(2), "b": torch.zeros(2)}, 2)
        index_path = os.path.join(self.tmp.name, safetensors_file.INDEX_FILE)
        with open(index_path, encoding="utf-8") as f:
            index = json.load(f)

        def check(weight_map, pattern):
            with open(index_path, "w", encoding="utf-8") as f:
                json.dump({"weight_map": weight_map}, f)
            with self.assertRaisesRegex(safetensors_file.SafetensorsError, pattern):
                safetensors_file.read_folder(self.tmp.name)

        check({**index["weight_map"], "a": "../model-00001-of-00002.safetensors"},
              r"weight_map\['a'\] = '\.\./model-00001-of-00002\.safetensors' is not a \.safetensors file name")
        check({**index["weight_map"], "c": "model-00009-of-00009.safetensors"},
              r"model-00009-of-00009\.safetensors: shard named by model\.safetensors\.index\.json not found")
        check({"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors"},
              r"model-00001-of-00002\.safetensors does not match model\.safetensors\.index\.json: "
              r"listed but absent: b; present but not listed: none")
        check({}, r'no "weight_map" object')
        os.remove(index_path)
        with self.assertRaisesRegex(safetensors_file.SafetensorsError, "neither model.safetensors nor"):
            safetensors_file.read_folder(self.tmp.name)


class SafetensorsExportTest(unittest.TestCase):
    """The same weights exported from pytorch_model.bin and from safetensors give the same logits."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="tide-safetensors-export-")
        cls.repo = os.path.join(cls.tmp.name, "models")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def checkpoint(self, folder: str, preset: str, seed: int, dtype=torch.float32) -> Dict[str, torch.Tensor]:
        """An HF folder (config.json, tokenizer.json) and its state dict in `dtype` (not yet written)."""
        cfg = crossencoder.PRESETS[preset]
        model = crossencoder.build_model(cfg, seed=seed)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(seed)) * 0.05)
        state = {k: v.to(dtype) for k, v in model.state_dict().items()}
        prefix = "bert" if cfg.model_type == crossencoder.BERT else "roberta"
        state[f"{prefix}.embeddings.position_ids"] = torch.arange(cfg.max_position_embeddings)[None, :]  # I64
        os.makedirs(folder)
        with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg.to_hf_dict(), f)
        test_export.make_wordpiece_tokenizer.write_tokenizer(
            os.path.join(folder, "tokenizer.json"), 300, "bert" if cfg.model_type == crossencoder.BERT else "xlmr")
        return state

    def export(self, folder: str) -> list:
        ref = os.path.join(self.tmp.name, os.path.basename(folder) + "-reference.json")
        proc = test_export.run_export("--checkpoint", folder, "--repository", self.repo, "--reference-out", ref,
                                      "--verify-cases", "3")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(ref, encoding="utf-8") as f:
            return json.load(f)["cases"]

    def check_same_export(self, preset: str, dtype, layout: str):
        base = os.path.join(self.tmp.name, f"{preset}-{str(dtype)[6:]}-{layout}")
        state = self.checkpoint(base + "-bin", preset, seed=5, dtype=dtype)
        torch.save(state, os.path.join(base + "-bin", "pytorch_model.bin"))
        self.checkpoint(base + "-st", preset, seed=5, dtype=dtype)
        if layout == "single":
            write_safetensors(os.path.join(base + "-st", "model.safetensors"), state, metadata={"format": "pt"})
        else:
            write_sharded(base + "-st", state, 2)
        from_bin, from_st = self.export(base + "-bin"), self.export(base + "-st")
        self.assertEqual(from_st, from_bin, "logits of the safetensors export differ from the .bin export")
        spread = [x for c in from_st for r in c["logits"] for x in r]
        self.assertGreater(max(spread) - min(spread), 1e-2, "weights must give distinguishable logits")
        # ONNX Runtime on the safetensors export reproduces the .bin export's PyTorch logits.
        ref_bin = os.path.join(self.tmp.name, os.path.basename(base + "-bin") + "-reference.json")
        onnx_st = os.path.join(self.repo, os.path.basename(base + "-st"), "1", "model.onnx")
        result = test_export.verify(onnx_st, ref_bin)
        self.assertEqual(result.returncode, 0, result.stdout)

    def test_single_file_f32_bert(self):
        self.check_same_export("tiny-bert", torch.float32, "single")

    def test_sharded_with_index_f32_xlmr(self):
        self.check_same_export("tiny-xlmr", torch.float32, "sharded")

    def test_single_file_bf16_bert(self):
        self.check_same_export("tiny-bert", torch.bfloat16, "single")

    def test_sharded_with_index_f16_bert(self):
        self.check_same_export("tiny-bert", torch.float16, "sharded")

    def test_safetensors_is_preferred_over_bin(self):
        folder = os.path.join(self.tmp.name, "both")
        state = self.checkpoint(folder, "tiny-bert", seed=6)
        write_safetensors(os.path.join(folder, "model.safetensors"), state)
        with open(os.path.join(folder, "pytorch_model.bin"), "wb") as f:
            f.write(b"not a pickle")
        self.assertEqual(export_model.checkpoint_weights(folder), os.path.join(folder, "model.safetensors"))
        self.export(folder)

    def test_corrupt_checkpoint_is_a_clear_export_error(self):
        folder = os.path.join(self.tmp.name, "corrupt")
        state = self.checkpoint(folder, "tiny-bert", seed=7)

        def edit(h):
            h["classifier.bias"]["dtype"] = "F4"
        write_safetensors(os.path.join(folder, "model.safetensors"), state, edit_header=edit)
        proc = test_export.run_export("--checkpoint", folder, "--repository", self.repo)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("cannot read safetensors weights", proc.stderr)
        self.assertIn("tensor 'classifier.bias': unsupported dtype 'F4'", proc.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.repo, "corrupt")))

    def test_folder_without_weights_names_what_it_looked_for(self):
        folder = os.path.join(self.tmp.name, "noweights")
        self.checkpoint(folder, "tiny-bert", seed=8)
        proc = test_export.run_export("--checkpoint", folder, "--repository", self.repo)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("no weights found (looked for model.safetensors, model.safetensors.index.json", proc.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
