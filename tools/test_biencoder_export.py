#!/usr/bin/python3
"""Bi-encoder (embedding model) export and serving, checked against the PyTorch reference.

Run: /usr/bin/python3 tools/test_biencoder_export.py (from the repository root; CTest:
tools_biencoder_export). The tide binary is $TIDE_BINARY, else $TIDE_BINARY_DIR/tide, else build/tide.

  - pooling (cls, mean, last_token) against a naive per-row computation, and padding invariance;
  - sentence-transformers folders: modules.json / 1_Pooling / 2_Normalize / prompts read, and the
    modules tide cannot serve refused by name;
  - the presets export and pass `tide verify-model` (ONNX Runtime within 1e-4 of PyTorch);
  - a sentence-transformers folder with its own weights is exported (task embed, its pooling and
    prompts), and `tide serve --model FOLDER` answers /embed, /v1/embeddings and /v2/embed with the
    vectors PyTorch computes for the same token ids (from the server's /tokenize), within 1e-4.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

TOOLS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TOOLS)
sys.path.insert(0, TOOLS)

import torch  # noqa: E402

import biencoder  # noqa: E402
import crossencoder  # noqa: E402
import make_wordpiece_tokenizer  # noqa: E402
from test_export import run_export, tide_binary, verify, verify_model_problem  # noqa: E402

ATOL = 1e-4


def naive_pool(hidden: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    rows = []
    for b in range(hidden.shape[0]):
        real = [t for t in range(hidden.shape[1]) if mask[b, t]]
        if pooling == biencoder.CLS:
            rows.append(hidden[b, 0])
        elif pooling == biencoder.MEAN:
            rows.append(sum(hidden[b, t] for t in real) / len(real))
        else:
            rows.append(hidden[b, real[-1]])
    return torch.stack(rows)


def widen(model: torch.nn.Module, seed: int) -> None:
    """Trained weights are not near zero: widen them so the comparisons mean something."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.05)


def write_st_folder(folder: str, cfg: biencoder.EmbedderConfig, seed: int) -> biencoder.BiEncoder:
    """A sentence-transformers folder: BertModel-named weights (with a pooler, as HF saves them),
    config.json, tokenizer.json and the module files."""
    model = biencoder.build_model(cfg, seed=seed)
    widen(model, seed)
    state = {k[len("backbone."):]: v for k, v in model.state_dict().items()}
    h = cfg.hidden_size
    state["pooler.dense.weight"] = torch.zeros(h, h)
    state["pooler.dense.bias"] = torch.zeros(h)
    os.makedirs(folder)
    torch.save(state, os.path.join(folder, "pytorch_model.bin"))
    hf = cfg.backbone.to_hf_dict()
    hf["architectures"] = ["BertModel" if cfg.model_type == crossencoder.BERT else "XLMRobertaModel"]
    for k in ("id2label", "label2id"):
        hf.pop(k)
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(hf, f)
    biencoder.write_sentence_transformers_folder(folder, cfg)
    layout = "bert" if cfg.model_type == crossencoder.BERT else "xlmr"
    make_wordpiece_tokenizer.write_tokenizer(os.path.join(folder, "tokenizer.json"), min(cfg.vocab_size, 30522), layout)
    return model


class PoolingTest(unittest.TestCase):
    def test_pooling_matches_a_naive_per_row_computation(self):
        g = torch.Generator().manual_seed(3)
        hidden = torch.randn(3, 7, 5, generator=g)
        mask = torch.tensor([[1] * 7, [1, 1, 1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0]])
        for pooling in biencoder.POOLINGS:
            with self.subTest(pooling=pooling):
                torch.testing.assert_close(biencoder.pool(hidden, mask, pooling), naive_pool(hidden, mask, pooling))

    def test_padding_does_not_change_an_embedding(self):
        for preset in ("tiny-bert-embed", "tiny-xlmr-embed", "tiny-bert-embed-last"):
            with self.subTest(preset=preset):
                cfg = biencoder.PRESETS[preset]
                model = biencoder.build_model(cfg, seed=5)
                widen(model, 5)
                ids = torch.randint(5, cfg.vocab_size, (1, 9), generator=torch.Generator().manual_seed(1))
                pad = cfg.pad_token_id
                padded = torch.cat([ids, torch.full((1, 4), pad)], dim=1)
                mask = torch.cat([torch.ones(1, 9, dtype=torch.int64), torch.zeros(1, 4, dtype=torch.int64)], dim=1)
                with torch.no_grad():
                    alone = model(ids, torch.ones_like(ids))
                    batched = model(padded, mask)
                torch.testing.assert_close(alone, batched, rtol=0, atol=1e-5)

    def test_presets_have_the_published_shapes(self):
        minilm = biencoder.PRESETS["all-minilm-l6-v2"]
        self.assertEqual((minilm.hidden_size, minilm.num_hidden_layers, minilm.pooling, minilm.max_sequence_length),
                         (384, 6, "mean", 256))
        bge = biencoder.PRESETS["bge-base-en-v1.5"]
        self.assertEqual((bge.hidden_size, bge.num_hidden_layers, bge.pooling, bge.max_sequence_length),
                         (768, 12, "cls", 512))


class SentenceTransformersFolderTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="tide-st-")

    def tearDown(self):
        self.tmp.cleanup()

    def test_modules_pooling_normalize_and_prompts_are_read(self):
        cfg = biencoder.EmbedderConfig(crossencoder.PRESETS["tiny-bert"], pooling="cls", normalize=False,
                                       max_seq_length=100, prompts={"query": "q: "}, default_prompt_name="query")
        folder = os.path.join(self.tmp.name, "st")
        os.makedirs(folder)
        biencoder.write_sentence_transformers_folder(folder, cfg)
        read = biencoder.read_sentence_transformers_folder(folder, crossencoder.PRESETS["tiny-bert"])
        self.assertEqual((read.pooling, read.normalize, read.max_seq_length, read.prompts, read.default_prompt_name),
                         ("cls", False, 100, {"query": "q: "}, "query"))

    def test_modules_tide_cannot_serve_are_refused_by_name(self):
        folder = os.path.join(self.tmp.name, "dense")
        os.makedirs(folder)
        biencoder.write_sentence_transformers_folder(folder, biencoder.PRESETS["tiny-bert-embed"])
        with open(os.path.join(folder, "modules.json"), encoding="utf-8") as f:
            modules = json.load(f)
        modules.append({"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"})
        with open(os.path.join(folder, "modules.json"), "w", encoding="utf-8") as f:
            json.dump(modules, f)
        with self.assertRaisesRegex(crossencoder.CheckpointError, "Dense"):
            biencoder.read_sentence_transformers_folder(folder, crossencoder.PRESETS["tiny-bert"])
        with self.assertRaisesRegex(crossencoder.CheckpointError, "pooling_mode_max_tokens"):
            biencoder.pooling_from_config({"pooling_mode_max_tokens": True}, "1_Pooling/config.json")
        with self.assertRaisesRegex(crossencoder.CheckpointError, "exactly one"):
            biencoder.pooling_from_config({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": True}, "p")


@unittest.skipIf(verify_model_problem(), verify_model_problem())
class ExportAndServeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="tide-embed-export-")
        self.repo = os.path.join(self.tmp.name, "repo")

    def tearDown(self):
        self.tmp.cleanup()

    def test_presets_export_and_verify(self):
        for preset in ("tiny-bert-embed", "tiny-xlmr-embed", "tiny-bert-embed-last"):
            with self.subTest(preset=preset):
                ref = os.path.join(self.tmp.name, f"{preset}.json")
                proc = run_export("--preset", preset, "--repository", self.repo, "--reference-out", ref,
                                  "--verify-cases", "3")
                self.assertEqual(proc.returncode, 0, proc.stderr)
                entry = os.path.join(self.repo, preset)
                with open(os.path.join(entry, "config.pbtxt"), encoding="utf-8") as f:
                    config = f.read()
                cfg = biencoder.PRESETS[preset]
                self.assertIn('name: "sentence_embedding"', config)
                self.assertIn(f"dims: [ {cfg.hidden_size} ]", config)
                self.assertRegex(config, r'key: "task"\s+value \{ string_value: "embed" \}')
                self.assertRegex(config, r'key: "pooling"\s+value \{ string_value: "%s" \}' % cfg.pooling)
                # The verification can fail: a perturbed reference is refused.
                with open(ref, encoding="utf-8") as f:
                    doc = json.load(f)
                doc["cases"][0]["logits"][0][0] += 1e-3
                bad = os.path.join(self.tmp.name, f"{preset}-bad.json")
                with open(bad, "w", encoding="utf-8") as f:
                    json.dump(doc, f)
                self.assertEqual(verify(os.path.join(entry, "1", "model.onnx"), bad).returncode, 1)
                # So is a perturbed token state (the graph's second output, token_embeddings), at a
                # real position; one at a padding position is not compared.
                doc["cases"][0]["logits"][0][0] -= 1e-3
                self.assertIn("token_embeddings", doc["cases"][0])
                doc["cases"][0]["token_embeddings"][0][0][0] += 1e-3
                with open(bad, "w", encoding="utf-8") as f:
                    json.dump(doc, f)
                self.assertEqual(verify(os.path.join(entry, "1", "model.onnx"), bad).returncode, 1)
                doc["cases"][0]["token_embeddings"][0][0][0] -= 1e-3
                padded = [(c, r, t) for c, case in enumerate(doc["cases"])
                          for r, row in enumerate(case["inputs"]["attention_mask"])
                          for t, m in enumerate(row) if m == 0]
                self.assertTrue(padded, "a case mixes lengths")
                c, r, t = padded[0]
                doc["cases"][c]["token_embeddings"][r][t][0] += 1.0
                with open(bad, "w", encoding="utf-8") as f:
                    json.dump(doc, f)
                self.assertEqual(verify(os.path.join(entry, "1", "model.onnx"), bad).returncode, 0)

    def test_plain_folder_needs_pooling(self):
        folder = os.path.join(self.tmp.name, "plain")
        write_st_folder(folder, biencoder.PRESETS["tiny-bert-embed"], seed=2)
        os.remove(os.path.join(folder, "modules.json"))
        proc = run_export("--checkpoint", folder, "--task", "embed", "--repository", self.repo)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("--pooling", proc.stderr)
        proc = run_export("--checkpoint", folder, "--task", "embed", "--pooling", "cls", "--repository", self.repo,
                          "--verify-cases", "2")
        self.assertEqual(proc.returncode, 0, proc.stderr)

    def test_served_st_folder_answers_the_pytorch_vectors(self):
        cfg = biencoder.PRESETS["tiny-bert-embed"]
        folder = os.path.join(self.tmp.name, "st-embedder")
        model = write_st_folder(folder, cfg, seed=7)
        server = subprocess.Popen([tide_binary(), "serve", "--model", folder, "--port", "0", "--host", "127.0.0.1",
                                   "--log-level", "warn"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        try:
            port = None
            for line in server.stdout:
                m = re.match(r"tide: listening on http://127\.0\.0\.1:(\d+)", line)
                if m:
                    port = int(m.group(1))
                    break
            self.assertIsNotNone(port, server.stderr.read() if server.poll() is not None else "no listening line")
            self.check_served(port, model, cfg)
        finally:
            server.terminate()
            server.communicate(timeout=30)  # waits, and closes the pipes

    def post(self, port: int, path: str, body) -> tuple:
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def reference(self, port: int, model, texts):
        """PyTorch's pooled vectors for the server's own token ids of `texts`."""
        status, tokens = self.post(port, "/tokenize", {"inputs": texts})
        self.assertEqual(status, 200, tokens)
        out = []
        for row in tokens:
            ids = torch.tensor([[t["id"] for t in row]], dtype=torch.int64)
            with torch.no_grad():
                out.append(model(ids, torch.ones_like(ids), torch.zeros_like(ids))[0])
        return torch.stack(out)

    def reference_states(self, port: int, model, texts):
        """PyTorch's token states [tokens, hidden] per text, for the server's own token ids."""
        status, tokens = self.post(port, "/tokenize", {"inputs": texts})
        self.assertEqual(status, 200, tokens)
        out = []
        for row in tokens:
            ids = torch.tensor([[t["id"] for t in row]], dtype=torch.int64)
            with torch.no_grad():
                _, states = biencoder.WithTokenEmbeddings(model)(ids, torch.ones_like(ids), torch.zeros_like(ids))
            out.append(states[0])
        return out

    def check_served(self, port: int, model, cfg):
        texts = ["what is a panda?", "The giant panda is a bear native to China.", "short"]
        want = self.reference(port, model, texts)
        self.assertGreater(float(want.abs().max()), 1e-2)

        status, raw = self.post(port, "/embed", {"inputs": texts, "normalize": False})
        self.assertEqual(status, 200, raw)
        torch.testing.assert_close(torch.tensor(raw), want, rtol=0, atol=ATOL)

        normalized = torch.nn.functional.normalize(want, dim=1)
        status, unit = self.post(port, "/embed", {"inputs": texts})
        self.assertEqual(status, 200, unit)
        torch.testing.assert_close(torch.tensor(unit), normalized, rtol=0, atol=ATOL)

        # Matryoshka: cut, then normalized.
        status, cut = self.post(port, "/embed", {"inputs": texts, "dimensions": 16})
        self.assertEqual(status, 200, cut)
        torch.testing.assert_close(torch.tensor(cut), torch.nn.functional.normalize(want[:, :16], dim=1),
                                   rtol=0, atol=ATOL)

        # The query prompt of config_sentence_transformers.json goes before the text.
        prompted = self.reference(port, model, [cfg.prompts["query"] + texts[0]])
        status, got = self.post(port, "/embed", {"inputs": texts[0], "prompt_name": "query", "normalize": False})
        self.assertEqual(status, 200, got)
        torch.testing.assert_close(torch.tensor(got), prompted, rtol=0, atol=ATOL)

        # OpenAI base64: little-endian float32 of the normalized vectors.
        status, oai = self.post(port, "/v1/embeddings", {"input": texts, "encoding_format": "base64"})
        self.assertEqual(status, 200, oai)
        for i, item in enumerate(oai["data"]):
            raw_bytes = base64.b64decode(item["embedding"])
            values = struct.unpack(f"<{len(raw_bytes) // 4}f", raw_bytes)
            torch.testing.assert_close(torch.tensor(values), normalized[i], rtol=0, atol=ATOL)

        # /embed_all: each token's raw state (the backbone's last hidden state), padding dropped
        # (the texts differ in length, so they share a padded batch).
        status, states = self.post(port, "/embed_all", {"inputs": texts})
        self.assertEqual(status, 200, states)
        self.assertEqual(len(states), len(texts))
        for got, want_states in zip(states, self.reference_states(port, model, texts)):
            torch.testing.assert_close(torch.tensor(got), want_states, rtol=0, atol=ATOL)

        # Cohere's search_query is the model's "query" prompt.
        status, co = self.post(port, "/v2/embed", {"texts": [texts[0]], "input_type": "search_query",
                                                   "embedding_types": ["float"]})
        self.assertEqual(status, 200, co)
        torch.testing.assert_close(torch.tensor(co["embeddings"]["float"]),
                                   torch.nn.functional.normalize(prompted, dim=1), rtol=0, atol=ATOL)


if __name__ == "__main__":
    unittest.main()
