#!/usr/bin/python3
"""Tests of tools/gguf_writer.py and tools/export_gguf.py (the llama.cpp peer's GGUF converter).

Run: /usr/bin/python3 tools/test_gguf.py  (from the repository root; registered with CTest as
tools_gguf). Files written by the writer are parsed here by `parse_gguf`, a small reader written
from the GGUF specification independently of gguf_writer.read, so the writer is checked against the
format rather than against itself. The Unigram case reads ../shared/assets/tokenizers/t5-small-unigram
and skips when the assets are absent. About 10 s.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import struct
import sys
import tempfile
import unittest

TOOLS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TOOLS)

import numpy as np  # noqa: E402

import crossencoder  # noqa: E402
import export_gguf  # noqa: E402
import gguf_writer as gg  # noqa: E402
import make_wordpiece_tokenizer  # noqa: E402

ASSETS = os.path.join(os.path.dirname(TOOLS), "..", "shared", "assets")


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def parse_gguf(path):
    """(version, {key: value}, {name: (ne, type, bytes)}, data_start) of a GGUF file, from the spec."""
    buf = read_bytes(path)
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from(fmt, buf, pos)
        pos += struct.calcsize(fmt)
        return vals

    def string():
        nonlocal pos
        (n,) = take("<Q")
        s = buf[pos:pos + n].decode("utf-8")
        pos += n
        return s

    scalars = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("<IQ")
            return [value(et) for _ in range(n)]
        return take(scalars[t])[0]

    assert buf[:4] == b"GGUF", "magic"
    pos = 4
    version, n_tensors, n_kv = take("<IQQ")
    meta = {}
    for _ in range(n_kv):
        key = string()
        (t,) = take("<I")
        meta[key] = value(t)
    infos = []
    for _ in range(n_tensors):
        name = string()
        (nd,) = take("<I")
        ne = take(f"<{nd}Q")
        t, off = take("<IQ")
        infos.append((name, ne, t, off))
    align = meta.get("general.alignment", 32)
    data_start = (pos + align - 1) // align * align
    tensors = {}
    for name, ne, t, off in infos:
        n = int(np.prod(ne))
        size = {0: 4 * n, 1: 2 * n, 8: n // 32 * 34}[t]
        tensors[name] = (tuple(ne), t, buf[data_start + off:data_start + off + size], off)
    return version, meta, tensors, data_start


class WriterTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tide-gguf-test-")
        self.path = os.path.join(self.dir, "t.gguf")

    def tearDown(self):
        for f in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, f))
        os.rmdir(self.dir)

    def test_header_metadata_and_tensors_round_trip(self):
        w = gg.GGUFWriter()
        w.add_string("general.architecture", "bert")
        w.add_uint32("bert.block_count", 6)
        w.add_float32("bert.attention.layer_norm_epsilon", 1e-12)
        w.add_bool("bert.attention.causal", False)
        w.add_int32("test.negative", -7)
        w.add_array("tokenizer.ggml.tokens", gg.STRING, ["[PAD]", "\u2581caf\u00e9", "##x", "\u5927"])
        w.add_array("tokenizer.ggml.token_type", gg.INT32, [3, 1, 1, 1])
        w.add_array("tokenizer.ggml.scores", gg.FLOAT32, [0.0, -1.5, -2.25, -3.0])
        w.add_array("tokenizer.ggml.precompiled_charsmap", gg.UINT8, [0, 255, 7])
        rng = np.random.default_rng(1)
        a = rng.standard_normal((3, 5)).astype(np.float32)  # 60 bytes: the next tensor needs padding
        b = rng.standard_normal((2, 64)).astype(np.float32)
        c = rng.standard_normal(7).astype(np.float32)
        w.add_tensor("a.weight", a)
        w.add_tensor("b.weight", b, gg.GGML_Q8_0)
        w.add_tensor("c.bias", c)
        w.write(self.path)

        version, meta, tensors, data_start = parse_gguf(self.path)
        self.assertEqual(version, 3)
        self.assertEqual(meta["general.architecture"], "bert")
        self.assertEqual(meta["bert.block_count"], 6)
        self.assertAlmostEqual(meta["bert.attention.layer_norm_epsilon"], 1e-12, delta=1e-18)
        self.assertIs(meta["bert.attention.causal"], False)
        self.assertEqual(meta["test.negative"], -7)
        self.assertEqual(meta["tokenizer.ggml.tokens"], ["[PAD]", "\u2581caf\u00e9", "##x", "\u5927"])
        self.assertEqual(meta["tokenizer.ggml.token_type"], [3, 1, 1, 1])
        self.assertEqual(meta["tokenizer.ggml.scores"], [0.0, -1.5, -2.25, -3.0])
        self.assertEqual(meta["tokenizer.ggml.precompiled_charsmap"], [0, 255, 7])
        self.assertEqual(list(tensors), ["a.weight", "b.weight", "c.bias"])
        self.assertEqual(data_start % 32, 0)
        for name, (ne, t, raw, off) in tensors.items():
            self.assertEqual(off % 32, 0, name)
        self.assertEqual(tensors["a.weight"][0], (5, 3))  # ne: the numpy shape reversed
        self.assertEqual(tensors["a.weight"][1], gg.GGML_F32)
        np.testing.assert_array_equal(np.frombuffer(tensors["a.weight"][2], "<f4").reshape(3, 5), a)
        self.assertEqual(tensors["b.weight"][:2], ((64, 2), gg.GGML_Q8_0))
        self.assertEqual(len(tensors["b.weight"][2]), 4 * 34)
        np.testing.assert_array_equal(np.frombuffer(tensors["c.bias"][2], "<f4"), c)
        self.assertEqual(os.path.getsize(self.path), data_start + tensors["c.bias"][3] + 32)  # 28 bytes + padding

        # The module's own reader agrees with the independent one.
        f = gg.read(self.path)
        self.assertEqual(f.value("tokenizer.ggml.tokens"), meta["tokenizer.ggml.tokens"])
        np.testing.assert_array_equal(f.tensors["a.weight"].to_numpy(), a)
        self.assertEqual(f.tensors["b.weight"].shape, (2, 64))

    def test_refusals(self):
        w = gg.GGUFWriter()
        w.add_uint32("k", 1)
        with self.assertRaisesRegex(gg.GGUFError, "written twice"):
            w.add_uint32("k", 2)
        with self.assertRaisesRegex(gg.GGUFError, "multiple of 32"):
            w.add_tensor("x.weight", np.zeros((2, 40), np.float32), gg.GGML_Q8_0)
        with self.assertRaisesRegex(gg.GGUFError, "NaN"):
            w.add_tensor("y.weight", np.array([1.0, np.nan], np.float32))
        with self.assertRaisesRegex(gg.GGUFError, "out of range"):
            w.add_array("z", gg.UINT8, [256])
        with self.assertRaisesRegex(gg.GGUFError, "uint32"):
            w.add_uint32("neg", -1)
        w.add_tensor("ok.weight", np.ones((1, 32), np.float32))
        w.write(self.path)
        data = read_bytes(self.path)
        with open(self.path, "wb") as f:
            f.write(data[:-40])
        with self.assertRaisesRegex(gg.GGUFError, "runs past the end"):
            gg.read(self.path)
        with open(self.path, "wb") as f:
            f.write(b"GGML" + data[4:])
        with self.assertRaisesRegex(gg.GGUFError, "not a GGUF file"):
            gg.read(self.path)


class Q80Test(unittest.TestCase):
    def test_block_layout_and_rounding(self):
        # d = 127 / 127 = 1: q = round(x) half away from zero, the scale an fp16 1.0.
        x = np.zeros(32, np.float32)
        x[:6] = [127.0, -63.5, 63.5, 0.49, -0.5, 2.5]
        raw = gg.quantize_q8_0(x).tobytes()
        self.assertEqual(len(raw), 34)
        self.assertEqual(struct.unpack("<e", raw[:2])[0], 1.0)
        self.assertEqual(list(struct.unpack("<6b", raw[2:8])), [127, -64, 64, 0, -1, 3])
        # An all-zero block: scale 0, values 0 (no division by zero).
        zero = gg.quantize_q8_0(np.zeros(32, np.float32)).tobytes()
        self.assertEqual(zero, b"\0" * 34)
        np.testing.assert_array_equal(gg.dequantize_q8_0(np.frombuffer(zero, np.uint8), (32,)), np.zeros(32))

    def test_dequantization_error_bound(self):
        rng = np.random.default_rng(7)
        x = (rng.standard_normal((64, 256)) * rng.uniform(1e-3, 10, (64, 1))).astype(np.float32)
        x[3, :32] = 0.0
        x[5, 40] = 1e4  # one outlier: its block's scale is large, the others' are not affected
        back = gg.dequantize_q8_0(gg.quantize_q8_0(x), x.shape)
        blocks, err = x.reshape(-1, 32), np.abs(back - x).reshape(-1, 32)
        d = np.abs(blocks).max(axis=1) / np.float32(127)
        d16 = d.astype(np.float16).astype(np.float32)
        # rounding to the nearest step (d / 2) plus the fp16 scale's own error on |q| <= 127 steps
        bound = d / 2 + 127 * np.abs(d - d16) + 1e-6 * np.abs(blocks).max(axis=1)
        self.assertTrue(np.all(err.max(axis=1) <= bound), f"worst excess {np.max(err.max(axis=1) - bound)}")
        self.assertTrue(np.all(err.max(axis=1) <= 0.57 * d + 1e-12))  # fp16's 11 bits: at most 0.5 + 127 / 2048 steps
        np.testing.assert_array_equal(back[3, :32], 0.0)
        outlier_block = 5 * 8 + 1
        self.assertLess(np.abs(back.reshape(-1, 32)[outlier_block][8] - 1e4), 1e4 / 127 / 2 + 1e4 * 2 ** -11)


def wordpiece_tokenizer(path, vocab_size, layout):
    make_wordpiece_tokenizer.write_tokenizer(path, vocab_size, layout)


class ExportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tide-gguf-export-")

    @classmethod
    def tearDownClass(cls):
        import shutil
        shutil.rmtree(cls.dir, ignore_errors=True)

    def run_export(self, *argv):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = export_gguf.main(list(argv))
        return code, err.getvalue()

    def test_bert_reranker_layout_f32(self):
        tok = os.path.join(self.dir, "bert.json")
        wordpiece_tokenizer(tok, 1500, "bert")  # shorter than tiny-bert's 2048 rows: padded
        out = os.path.join(self.dir, "tiny-bert.gguf")
        code, err = self.run_export("--preset", "tiny-bert", "--seed", "5", "--tokenizer", tok, "--output", out)
        self.assertEqual(code, 0, err)
        _, meta, tensors, _ = parse_gguf(out)
        cfg = crossencoder.PRESETS["tiny-bert"]
        self.assertEqual(meta["general.architecture"], "bert")
        self.assertEqual(meta["general.file_type"], 0)
        self.assertEqual(meta["bert.pooling_type"], 4)  # RANK
        self.assertEqual(meta["bert.context_length"], 128)
        self.assertEqual(meta["bert.block_count"], 2)
        self.assertEqual(meta["bert.embedding_length"], 64)
        self.assertIs(meta["bert.attention.causal"], False)
        self.assertEqual(meta["tokenizer.ggml.model"], "bert")
        self.assertEqual(meta["tokenizer.ggml.token_type_count"], 2)
        self.assertEqual(meta["tokenizer.chat_template.rerank"], "[CLS]{query}[SEP]{document}[SEP]")
        tokens = meta["tokenizer.ggml.tokens"]
        self.assertEqual(len(tokens), cfg.vocab_size)
        spec = read_json(tok)
        vocab = spec["model"]["vocab"]
        self.assertEqual(tokens[vocab["[CLS]"]], "[CLS]")  # special: as is
        word = next(w for w in vocab if w.isalpha() and len(w) > 3)
        piece = next(w for w in vocab if w.startswith("##") and w[2:].isalpha())
        self.assertEqual(tokens[vocab[word]], "\u2581" + word)  # phantom space
        self.assertEqual(tokens[vocab[piece]], piece[2:])
        self.assertEqual(tokens[1500], "[PAD1500]")
        self.assertEqual(meta["tokenizer.ggml.token_type"][1500], export_gguf.TOKEN_UNUSED)
        self.assertEqual(meta["tokenizer.ggml.token_type"][vocab["[SEP]"]], export_gguf.TOKEN_CONTROL)
        self.assertEqual((meta["tokenizer.ggml.bos_token_id"], meta["tokenizer.ggml.eos_token_id"],
                          meta["tokenizer.ggml.seperator_token_id"], meta["tokenizer.ggml.padding_token_id"],
                          meta["tokenizer.ggml.unknown_token_id"]), (101, 102, 102, 0, 100))
        self.assertEqual((meta["tokenizer.ggml.add_bos_token"], meta["tokenizer.ggml.add_eos_token"],
                          meta["tokenizer.ggml.add_sep_token"]), (True, True, False))
        # Every weight, as PyTorch holds it; the pooler is the rank head's cls layer.
        model = crossencoder.build_model(cfg, seed=5)
        state = {k: v.numpy() for k, v in model.state_dict().items()}

        def f32(name):
            ne, t, raw, _ = tensors[name]
            self.assertEqual(t, gg.GGML_F32, name)
            return np.frombuffer(raw, "<f4").reshape(tuple(reversed(ne)))
        np.testing.assert_array_equal(f32("token_embd.weight"), state["bert.embeddings.word_embeddings.weight"])
        np.testing.assert_array_equal(f32("position_embd.weight"), state["bert.embeddings.position_embeddings.weight"])
        np.testing.assert_array_equal(f32("blk.1.attn_k.weight"), state["bert.encoder.layer.1.attention.self.key.weight"])
        np.testing.assert_array_equal(f32("blk.0.ffn_down.bias"), state["bert.encoder.layer.0.output.dense.bias"])
        np.testing.assert_array_equal(f32("blk.1.layer_output_norm.weight"),
                                      state["bert.encoder.layer.1.output.LayerNorm.weight"])
        np.testing.assert_array_equal(f32("cls.weight"), state["bert.pooler.dense.weight"])
        np.testing.assert_array_equal(f32("cls.output.weight"), state["classifier.weight"])
        self.assertEqual(tensors["cls.output.weight"][0], (64, 1))
        self.assertEqual(len(tensors), 5 + 2 * 16 + 4)

    def test_xlmr_reranker_q8_0(self):
        tok = os.path.join(self.dir, "xlmr.json")
        wordpiece_tokenizer(tok, 2048, "xlmr")
        out = os.path.join(self.dir, "tiny-xlmr.gguf")
        code, err = self.run_export("--preset", "tiny-xlmr", "--tokenizer", tok, "--type", "q8_0", "--output", out)
        self.assertEqual(code, 0, err)
        _, meta, tensors, _ = parse_gguf(out)
        cfg = crossencoder.PRESETS["tiny-xlmr"]
        self.assertEqual(meta["general.file_type"], 7)
        self.assertEqual(meta["general.quantization_version"], 2)
        self.assertEqual(meta["bert.context_length"], 130 - 2)  # positions count from pad_token_id + 1
        self.assertEqual(meta["tokenizer.chat_template.rerank"], "<s>{query}</s></s>{document}</s>")
        self.assertEqual((meta["tokenizer.ggml.bos_token_id"], meta["tokenizer.ggml.eos_token_id"],
                          meta["tokenizer.ggml.seperator_token_id"], meta["tokenizer.ggml.padding_token_id"]),
                         (0, 2, 2, 1))
        self.assertIs(meta["tokenizer.ggml.add_sep_token"], True)
        self.assertEqual(meta["tokenizer.ggml.token_type_count"], 1)
        model = crossencoder.build_model(cfg, seed=export_gguf.DEFAULT_SEED)
        state = {k: v.numpy() for k, v in model.state_dict().items()}
        ne, t, raw, _ = tensors["position_embd.weight"]
        self.assertEqual((ne, t), ((64, 128), gg.GGML_F32))  # position and token-type tables stay F32
        np.testing.assert_array_equal(np.frombuffer(raw, "<f4").reshape(128, 64),
                                      state["roberta.embeddings.position_embeddings.weight"][2:])
        self.assertEqual(tensors["token_types.weight"][:2], ((64, 1), gg.GGML_F32))
        self.assertEqual(tensors["blk.0.attn_output_norm.weight"][1], gg.GGML_F32)
        self.assertEqual(tensors["blk.0.attn_q.bias"][1], gg.GGML_F32)
        for name, hf in (("token_embd.weight", "roberta.embeddings.word_embeddings.weight"),
                         ("blk.1.ffn_up.weight", "roberta.encoder.layer.1.intermediate.dense.weight"),
                         ("cls.weight", "classifier.dense.weight"), ("cls.output.weight", "classifier.out_proj.weight")):
            ne, t, raw, _ = tensors[name]
            self.assertEqual(t, gg.GGML_Q8_0, name)
            back = gg.dequantize_q8_0(np.frombuffer(raw, np.uint8), tuple(reversed(ne)))
            want = state[hf]
            step = np.abs(want.reshape(-1, 32)).max(axis=1) / 127
            self.assertTrue(np.all(np.abs(back - want).reshape(-1, 32).max(axis=1) <= 0.57 * step + 1e-12), name)

    def test_unigram_vocabulary(self):
        path = os.path.join(ASSETS, "tokenizers", "t5-small-unigram", "tokenizer.json")
        if not os.path.isfile(path):
            self.skipTest(f"{path} absent (../shared/assets)")
        spec = read_json(path)
        n = len(spec["model"]["vocab"])
        meta, summary = export_gguf.tokenizer_metadata(spec, n + 4)
        m = {k: (v[1] if t == gg.ARRAY else v) for k, t, v in meta}
        self.assertEqual(m["tokenizer.ggml.model"], "t5")
        self.assertEqual(m["tokenizer.ggml.tokens"][:n], [p for p, _ in spec["model"]["vocab"]])
        self.assertEqual(m["tokenizer.ggml.scores"][:n], [float(s) for _, s in spec["model"]["vocab"]])
        self.assertEqual(m["tokenizer.ggml.tokens"][n], f"[PAD{n}]")
        self.assertEqual(bytes(m["tokenizer.ggml.precompiled_charsmap"]),
                         base64.b64decode(spec["normalizer"]["precompiled_charsmap"]))
        self.assertIs(m["tokenizer.ggml.add_space_prefix"], True)
        unk = spec["model"]["unk_id"]
        self.assertEqual(m["tokenizer.ggml.unknown_token_id"], unk)
        self.assertEqual(m["tokenizer.ggml.token_type"][1], export_gguf.TOKEN_CONTROL)  # </s>, a special token
        self.assertEqual(m["tokenizer.chat_template.rerank"], "{query}</s>{document}</s>")
        self.assertEqual(m["tokenizer.ggml.eos_token_id"], 1)
        self.assertNotIn("tokenizer.ggml.bos_token_id", m)

    def test_refuses_an_unsupported_architecture(self):
        ckpt = os.path.join(self.dir, "gpt2")
        os.makedirs(ckpt, exist_ok=True)
        with open(os.path.join(ckpt, "config.json"), "w") as f:
            json.dump({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}, f)
        out = os.path.join(self.dir, "gpt2.gguf")
        code, err = self.run_export("--checkpoint", ckpt, "--output", out)
        self.assertEqual(code, 2)
        self.assertIn("GPT2LMHeadModel is not supported", err)
        self.assertFalse(os.path.exists(out))
        # A BERT config of another task (two labels) and a BPE tokenizer are refused by name too.
        with open(os.path.join(ckpt, "config.json"), "w") as f:
            json.dump(dict(crossencoder.PRESETS["tiny-bert"].to_hf_dict(), architectures=["DistilBertModel"]), f)
        code, err = self.run_export("--checkpoint", ckpt, "--output", out)
        self.assertEqual(code, 2)
        self.assertIn("DistilBertModel is not supported", err)
        bpe = {"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}
        with self.assertRaisesRegex(export_gguf.ExportError, "model type 'BPE'"):
            export_gguf.tokenizer_metadata(bpe, 10)
        with self.assertRaisesRegex(export_gguf.ExportError, "2048 rows"):
            tok = os.path.join(self.dir, "big.json")
            wordpiece_tokenizer(tok, 4000, "bert")
            export_gguf.tokenizer_metadata(read_json(tok), 2048)


if __name__ == "__main__":
    unittest.main(verbosity=2)
