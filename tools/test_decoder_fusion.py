#!/usr/bin/python3
"""Tests of the decoder graph fusion (tools/decoder_fused.py) and per-row INT8 (tools/decoder_int8.py).

Run: /usr/bin/python3 tools/test_decoder_fusion.py  (from the repository root; registered with CTest
as tools_decoder_fusion). Graphs of the qwen3-tiny and qwen2-tiny shapes (seeded weights, a small
vocabulary: no tokenizer needed) are exported fused and unfused and run in ONNX Runtime through
`tide verify-model` ($TIDE_BINARY, else build/tide; the tests fail without it).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import io
import os
import sys
import tempfile
import unittest
from unittest import mock

TOOLS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TOOLS)

import torch  # noqa: E402

import decoder  # noqa: E402
import decoder_fused  # noqa: E402
import decoder_int8  # noqa: E402
import export_model  # noqa: E402
from test_export import verify, verify_model_problem  # noqa: E402

VOCAB = 2000
PRESETS = ("qwen3-tiny", "qwen2-tiny")


def tiny_reranker(preset: str, layers: int = 2) -> decoder.DecoderReranker:
    cfg = dataclasses.replace(decoder.PRESETS[preset], vocab_size=VOCAB, num_hidden_layers=layers)
    return decoder.yes_no_reranker(decoder.build_causal_lm(cfg, seed=7), 11, 12)


def op_counts(path: str) -> collections.Counter:
    import onnx
    return collections.Counter(n.op_type for n in onnx.load(path).graph.node)


class DecoderFusionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="tide-decoder-fusion-test-")
        cls.verify_problem = verify_model_problem()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name: str) -> str:
        return os.path.join(self.tmp.name, name)

    def export(self, model, name: str, fused: bool) -> str:
        path = self.path(name)
        with contextlib.redirect_stderr(io.StringIO()):  # the tracer's warnings about custom operators
            module = decoder_fused.FusedDecoderReranker(model, 512).eval() if fused else model
            export_model.export_onnx(module, model.config, path)
        return path

    def reference(self, model, name: str, cases: int = 4, max_length: int = 60) -> str:
        path = self.path(name)
        export_model.write_reference(path, model, model.config,
                                     export_model.random_decoder_cases(model.config, 3, cases, max_length))
        return path

    def test_pytorch_forward_of_the_fused_form_equals_the_model(self):
        for preset in PRESETS:
            with self.subTest(preset=preset):
                model = tiny_reranker(preset)
                fused = decoder_fused.FusedDecoderReranker(model, 512).eval()
                for case in export_model.random_decoder_cases(model.config, 5, 3, 50):
                    with torch.no_grad():
                        a = model(case["input_ids"], case["attention_mask"])
                        b = fused(case["input_ids"], case["attention_mask"])
                    self.assertLessEqual((a - b).abs().max().item(), 1e-6)

    def test_fused_node_counts_and_no_unfused_norm_or_softmax_left(self):
        for preset, layers in (("qwen3-tiny", 2), ("qwen3-tiny", 3), ("qwen2-tiny", 2)):
            with self.subTest(preset=preset, layers=layers):
                model = tiny_reranker(preset, layers)
                path = self.export(model, f"{preset}-{layers}-fused.onnx", fused=True)
                ops = op_counts(path)
                qk_norms = 2 * layers if preset.startswith("qwen3") else 0
                # First input norm + final norm (+ Qwen3's per-head q and k norms); each later norm
                # has a residual Add before it: 2 per layer but the first.
                self.assertEqual(ops["SimplifiedLayerNormalization"], 2 + qk_norms)
                self.assertEqual(ops["SkipSimplifiedLayerNormalization"], 2 * layers - 1)
                self.assertEqual(ops["RotaryEmbedding"], 2 * layers)
                self.assertEqual(ops["GroupQueryAttention"], layers)
                for gone in ("Softmax", "ReduceMean", "Pow", "Sqrt", "Reciprocal", "Transpose"):
                    self.assertEqual(ops[gone], 0, f"{gone} left in the fused graph: {dict(ops)}")
                # Projections: q, k, v, o, gate, up, down per layer, and the 1-wide score head.
                self.assertEqual(ops["MatMul"], 7 * layers + 1)
                plain = op_counts(self.export(model, f"{preset}-{layers}-plain.onnx", fused=False))
                self.assertEqual(sum(plain[op] for op in decoder_fused.FUSED_OPS), 0)
                self.assertLess(sum(ops.values()), sum(plain.values()) // 2, (dict(ops), dict(plain)))

    def test_fused_and_unfused_graphs_agree_with_pytorch_in_onnx_runtime(self):
        if self.verify_problem:
            self.fail(self.verify_problem)
        for preset in PRESETS:
            with self.subTest(preset=preset):
                model = tiny_reranker(preset)
                ref = self.reference(model, f"{preset}-ref.json")
                for fused in (True, False):
                    path = self.export(model, f"{preset}-{fused}.onnx", fused=fused)
                    result = verify(path, ref, "1e-4")
                    self.assertEqual(result.returncode, 0, result.stdout)
                    self.assertIn("OK", result.stdout)

    def test_export_falls_back_to_the_unfused_graph_when_the_fused_one_disagrees(self):
        if self.verify_problem:
            self.fail(self.verify_problem)
        # A wrong rewrite (the attention scale doubled in the graph only) must not be served.
        original = decoder_fused._GroupQueryAttention.symbolic

        def wrong_scale(g, q, k, v, seqlens_k, total, mask, heads, kv_heads, scale):
            return original(g, q, k, v, seqlens_k, total, mask, heads, kv_heads, scale * 2)

        repo = self.path("fallback-repo")
        tokenizer = self.path("tokenizer.json")
        with open(tokenizer, "w", encoding="utf-8") as f:  # the yes/no lookup needs only these two
            f.write('{"model": {"type": "BPE", "vocab": {"yes": 11, "no": 12}}, "added_tokens": []}')
        cfg = dataclasses.replace(decoder.PRESETS["qwen3-tiny"], vocab_size=VOCAB)
        err = io.StringIO()
        with mock.patch.dict(decoder.PRESETS, {"qwen3-tiny": cfg}), \
                mock.patch.object(decoder_fused._GroupQueryAttention, "symbolic", staticmethod(wrong_scale)), \
                contextlib.redirect_stderr(err):
            code = export_model.main(["--preset", "qwen3-tiny", "--tokenizer", tokenizer, "--repository", repo,
                                      "--tide-binary", os.environ.get("TIDE_BINARY", "build/tide"),
                                      "--verify-cases", "2", "--verify-max-length", "30", "--threads", "2"])
        self.assertEqual(code, 0, err.getvalue())
        self.assertIn("the fused graph failed verification, exporting the unfused graph instead", err.getvalue())
        ops = op_counts(os.path.join(repo, "qwen3-tiny", "1", "model.onnx"))
        self.assertEqual(sum(ops[op] for op in decoder_fused.FUSED_OPS), 0, dict(ops))

    def test_per_row_int8_quantizes_every_projection_and_stays_close(self):
        import onnx
        if self.verify_problem:
            self.fail(self.verify_problem)
        for preset in PRESETS:
            with self.subTest(preset=preset):
                model = tiny_reranker(preset)
                path = self.export(model, f"{preset}-int8-src.onnx", fused=True)
                proto = onnx.load(path)
                self.assertEqual(decoder_int8.quantize_per_row(proto), 14)  # 7 per layer; the head stays FP32
                ops = collections.Counter(n.op_type for n in proto.graph.node)
                self.assertEqual(ops["MatMulInteger"], 14)
                self.assertEqual(ops["MatMul"], 1)
                # One quantization of each activation: q/k/v share one, gate/up another.
                self.assertEqual(ops["ReduceMax"], 4 * 2 + 1)  # + last_token_index's ReduceMax
                with self.assertRaisesRegex(ValueError, "already quantized"):
                    decoder_int8.quantize_per_row(proto)
                out = self.path(f"{preset}-int8.onnx")
                onnx.save(proto, out)
                result = verify(out, self.reference(model, f"{preset}-int8-ref.json"), "5e-2")
                self.assertEqual(result.returncode, 0, result.stdout)

    def test_per_row_int8_refuses_a_graph_without_weight_matmuls(self):
        from onnx import TensorProto, helper
        graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
        with self.assertRaisesRegex(ValueError, "no MatMul"):
            decoder_int8.quantize_per_row(helper.make_model(graph))


if __name__ == "__main__":
    unittest.main(verbosity=2)
