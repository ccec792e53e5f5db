#!/usr/bin/python3
"""Decoder bi-encoders (Qwen3-Embedding style) in tools/biencoder.py, and their export.

Run: /usr/bin/python3 tools/test_decoder_embed.py (from the repository root; CTest:
tools_decoder_embed_export). The tide binary is $TIDE_BINARY, else $TIDE_BINARY_DIR/tide, else build/tide.

  - last-token pooling is the final-normed hidden state of each row's last real token, the same
    with right padding, left padding and alone;
  - a sentence-transformers Qwen3 folder (config.json Qwen3ForCausalLM or Qwen3Model, weights named
    as Qwen3Model, modules.json with pooling_mode_lasttoken and Normalize, prompts) is read and its
    weights loaded strictly; a CausalLM-named state dict (model.*, lm_head) loads too;
  - the tokenizer of a decoder embedder appends <|endoftext|> (kept when it already does);
  - the qwen3-embed-tiny preset exports and passes `tide verify-model` (ONNX Runtime within 1e-4 of
    PyTorch; a perturbed reference is refused), with the real Qwen3 tokenizer (skipped when absent).
"""

from __future__ import annotations

import json
import os
import struct
import sys
import tempfile
import unittest

TOOLS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TOOLS)
sys.path.insert(0, TOOLS)

import torch  # noqa: E402

import biencoder  # noqa: E402
import crossencoder  # noqa: E402
import decoder  # noqa: E402
import export_model  # noqa: E402
from test_export import run_export, verify, verify_model_problem  # noqa: E402

QWEN3_TOKENIZER = os.path.join(ROOT, "..", "shared", "assets", "tokenizers", "qwen3", "tokenizer.json")
TINY = "qwen3-embed-tiny"


def write_safetensors(path: str, state) -> None:
    """A model.safetensors file (the format's header: JSON of dtype, shape and byte offsets)."""
    header, blobs, offset = {}, [], 0
    for name, tensor in state.items():
        data = tensor.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensor.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write_qwen3_st_folder(folder: str, seed: int, architecture: str = "Qwen3ForCausalLM",
                          tokenizer: str = "") -> biencoder.DecoderBiEncoder:
    """A sentence-transformers Qwen3-Embedding folder as Qwen publishes it: config.json (Qwen3ForCausalLM),
    model.safetensors named as Qwen3Model (no `model.` prefix, no head), modules.json with a
    last-token Pooling and Normalize, the query prompt; tokenizer.json copied from `tokenizer`."""
    cfg = biencoder.PRESETS[TINY]
    model = biencoder.build_decoder_model(cfg, seed=seed)
    os.makedirs(folder)
    write_safetensors(os.path.join(folder, "model.safetensors"),
                      {k[len("model."):]: v for k, v in model.state_dict().items()})
    hf = cfg.backbone.to_hf_dict()
    hf["architectures"] = [architecture]
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(hf, f)
    biencoder.write_sentence_transformers_folder(folder, biencoder.DecoderEmbedderConfig(
        cfg.backbone, pooling=biencoder.LAST_TOKEN, normalize=True, max_seq_length=1024, prompts=dict(cfg.prompts)))
    if tokenizer:
        with open(tokenizer, encoding="utf-8") as f:
            text = f.read()
        with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
            f.write(text)
    return model


class DecoderPoolingTest(unittest.TestCase):
    def setUp(self):
        self.cfg = biencoder.PRESETS[TINY]
        self.model = biencoder.build_decoder_model(self.cfg, seed=11)
        g = torch.Generator().manual_seed(2)
        self.rows = [torch.randint(0, 150000, (n,), generator=g) for n in (9, 4, 1)]

    def alone(self, row: torch.Tensor) -> torch.Tensor:
        """Qwen3Model's output (every token final-normed) at the last token of the row alone."""
        with torch.no_grad():
            hidden = self.model.model.norm(self.model.model(row[None], torch.ones(1, len(row), dtype=torch.int64)))
        return hidden[0, -1]

    def batch(self, left: bool):
        seq = max(len(r) for r in self.rows)
        ids = torch.full((len(self.rows), seq), self.cfg.pad_token_id, dtype=torch.int64)
        mask = torch.zeros((len(self.rows), seq), dtype=torch.int64)
        for i, r in enumerate(self.rows):
            span = slice(seq - len(r), seq) if left else slice(0, len(r))
            ids[i, span], mask[i, span] = r, 1
        with torch.no_grad():
            return self.model(ids, mask)

    def test_last_token_of_each_row_with_right_and_left_padding(self):
        want = torch.stack([self.alone(r) for r in self.rows])
        self.assertGreater(float(want.abs().max()), 1e-2)
        for left in (False, True):
            with self.subTest(left_padding=left):
                torch.testing.assert_close(self.batch(left), want, rtol=0, atol=1e-5)

    def test_the_last_token_decides(self):
        """Causal attention: the embedding is the last token's state, which sees every token."""
        row = self.rows[0]
        changed = row.clone()
        changed[0] = (changed[0] + 1) % 150000
        self.assertGreater(float((self.alone(row) - self.alone(changed)).abs().max()), 1e-4)

    def test_presets(self):
        big = biencoder.PRESETS["qwen3-embedding-0.6b"]
        self.assertEqual((big.hidden_size, big.num_hidden_layers, big.vocab_size, big.pooling, big.normalize),
                         (1024, 28, 151669, "last_token", True))
        self.assertTrue(big.prompts["query"].startswith("Instruct: ") and big.prompts["query"].endswith("\nQuery:"))
        self.assertEqual(self.cfg.num_hidden_layers, 2)
        self.assertEqual(self.cfg.max_sequence_length, biencoder.DECODER_MAX_SEQUENCE_LENGTH)


class DecoderFolderTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="tide-qwen3-embed-")

    def tearDown(self):
        self.tmp.cleanup()

    def test_sentence_transformers_qwen3_folder_loads(self):
        for arch in ("Qwen3ForCausalLM", "Qwen3Model"):
            with self.subTest(architecture=arch):
                folder = os.path.join(self.tmp.name, arch)
                want = write_qwen3_st_folder(folder, seed=3, architecture=arch)
                cfg, model = export_model.load_checkpoint(folder)
                self.assertIsInstance(cfg, biencoder.DecoderEmbedderConfig)
                self.assertEqual((cfg.pooling, cfg.normalize, cfg.max_sequence_length),
                                 ("last_token", True, 1024))
                self.assertEqual(cfg.prompts, {"query": biencoder.QWEN3_EMBEDDING_QUERY_PROMPT})
                ids = torch.randint(0, 150000, (2, 6), generator=torch.Generator().manual_seed(4))
                mask = torch.tensor([[1] * 6, [1, 1, 1, 0, 0, 0]])
                with torch.no_grad():
                    torch.testing.assert_close(model(ids, mask), want(ids, mask), rtol=0, atol=0)

    def test_causal_lm_state_dict_and_strictness(self):
        cfg = biencoder.PRESETS[TINY]
        source = biencoder.build_decoder_model(cfg, seed=5)
        state = dict(source.state_dict())
        state["lm_head.weight"] = torch.zeros(cfg.vocab_size, cfg.hidden_size)  # a CausalLM's head: dropped
        target = biencoder.build_decoder_model(cfg, seed=6)
        biencoder.load_decoder_state_dict(target, state)
        torch.testing.assert_close(target.model.norm.weight, source.model.norm.weight, rtol=0, atol=0)
        del state["model.norm.weight"]
        with self.assertRaisesRegex(crossencoder.CheckpointError, "norm.weight"):
            biencoder.load_decoder_state_dict(target, state)

    def test_a_qwen3_folder_with_task_rerank_stays_a_reranker(self):
        """--task rerank picks the reranker even in a folder with modules.json."""
        folder = os.path.join(self.tmp.name, "rerank")
        model = write_qwen3_st_folder(folder, seed=3)
        # CausalLM-named weights (a tied head), as a Qwen3 reranker folder has them.
        os.remove(os.path.join(folder, "model.safetensors"))
        write_safetensors(os.path.join(folder, "model.safetensors"), model.state_dict())
        cfg, lm = export_model.load_checkpoint(folder, task="rerank")
        self.assertIsInstance(cfg, decoder.DecoderConfig)
        self.assertIsInstance(lm, decoder.DecoderForCausalLM)
        cfg, _ = export_model.load_checkpoint(folder)  # without a task: the embedder
        self.assertIsInstance(cfg, biencoder.DecoderEmbedderConfig)

    def test_plain_qwen3_folder_needs_pooling(self):
        folder = os.path.join(self.tmp.name, "plain")
        write_qwen3_st_folder(folder, seed=3)
        os.remove(os.path.join(folder, "modules.json"))
        with self.assertRaisesRegex(crossencoder.CheckpointError, "--pooling"):
            export_model.load_checkpoint(folder, task="embed")
        cfg, _ = export_model.load_checkpoint(folder, task="embed", pooling="last_token")
        self.assertEqual((cfg.pooling, cfg.normalize), ("last_token", True))

    def test_a_folder_without_tokenizer_is_refused_before_the_export(self):
        folder = os.path.join(self.tmp.name, "no-tokenizer")
        write_qwen3_st_folder(folder, seed=3)
        repo = os.path.join(self.tmp.name, "repo")
        proc = run_export("--checkpoint", folder, "--repository", repo)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("no tokenizer.json", proc.stderr)
        self.assertNotIn("exporting", proc.stderr)
        self.assertEqual(os.listdir(repo) if os.path.isdir(repo) else [], [])

    def test_eos_tokenizer(self):
        base = {"added_tokens": [{"id": 151643, "content": "<|endoftext|>", "special": True}],
                "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False}}
        tok, changed = biencoder.eos_tokenizer(base)
        self.assertTrue(changed)
        self.assertTrue(biencoder.appends_token(tok, "<|endoftext|>"))
        self.assertEqual(tok["post_processor"]["special_tokens"]["<|endoftext|>"]["ids"], [151643])
        again, changed = biencoder.eos_tokenizer(tok)
        self.assertFalse(changed)
        self.assertIs(again, tok)
        with self.assertRaisesRegex(crossencoder.CheckpointError, "endoftext"):
            biencoder.eos_tokenizer({"added_tokens": [], "post_processor": None})


@unittest.skipIf(verify_model_problem(), verify_model_problem())
@unittest.skipUnless(os.path.isfile(QWEN3_TOKENIZER),
                     f"the real Qwen3 tokenizer is absent ({os.path.relpath(QWEN3_TOKENIZER, ROOT)}): "
                     "decoder embedder export skipped")
class DecoderEmbedExportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="tide-qwen3-embed-export-")
        self.repo = os.path.join(self.tmp.name, "repo")

    def tearDown(self):
        self.tmp.cleanup()

    def test_tiny_preset_exports_and_verifies(self):
        ref = os.path.join(self.tmp.name, "ref.json")
        proc = run_export("--preset", TINY, "--repository", self.repo, "--tokenizer", QWEN3_TOKENIZER,
                          "--reference-out", ref, "--verify-cases", "3", "--verify-max-length", "40")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("verified", proc.stderr)
        entry = os.path.join(self.repo, TINY)
        with open(os.path.join(entry, "config.pbtxt"), encoding="utf-8") as f:
            config = f.read()
        self.assertIn('name: "sentence_embedding"', config)
        self.assertIn("dims: [ 64 ]", config)
        self.assertNotIn("token_type_ids", config)
        self.assertRegex(config, r'key: "task"\s+value \{ string_value: "embed" \}')
        self.assertRegex(config, r'key: "pooling"\s+value \{ string_value: "last_token" \}')
        self.assertRegex(config, r'key: "max_sequence_length"\s+value \{ string_value: "8192" \}')
        self.assertIn("model_warmup", config)
        import onnx  # Debian python3-onnx, as export_model.py
        # The width ONNX shape inference derives for the output (as ONNX Runtime reports it to tide,
        # which refuses an output whose width is not fixed), once the exporter's symbolic name is dropped.
        proto = onnx.load(os.path.join(entry, "1", "model.onnx"))
        self.assertEqual(proto.graph.output[0].name, "sentence_embedding")
        proto.graph.output[0].type.tensor_type.shape.dim[1].ClearField("dim_param")
        inferred = onnx.shape_inference.infer_shapes(proto).graph.output[0].type.tensor_type.shape.dim[1]
        self.assertEqual(inferred.dim_value, 64, "tide needs a fixed output width")
        self.assertIn("Instruct: ", config)
        with open(os.path.join(entry, "tokenizer.json"), encoding="utf-8") as f:
            self.assertTrue(biencoder.appends_token(json.load(f), "<|endoftext|>"))
        # The verification can fail: a perturbed reference is refused.
        with open(ref, encoding="utf-8") as f:
            doc = json.load(f)
        doc["cases"][0]["logits"][0][0] += 1e-3
        bad = os.path.join(self.tmp.name, "bad.json")
        with open(bad, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        self.assertEqual(verify(os.path.join(entry, "1", "model.onnx"), bad).returncode, 1)

    def test_preset_needs_the_tokenizer(self):
        proc = run_export("--preset", TINY, "--repository", self.repo)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("--tokenizer", proc.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
