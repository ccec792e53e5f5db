#!/usr/bin/python3
"""A decoder bi-encoder (Qwen3-Embedding style) through the server, against PyTorch (issue #31).

Run: /usr/bin/python3 tools/test_decoder_embed_serving.py  (from the repository root; registered with
CTest as decoder_embed_serving, label blackbox). With the real Qwen3 tokenizer from
../shared/assets/tokenizers/qwen3 (skipped, saying so, when it is absent):
  - exports the qwen3-embed-tiny preset (tools/export_model.py) and serves the repository with the
    tide binary ($TIDE_BINARY, else build/tide) on a free loopback port;
  - writes a sentence-transformers Qwen3-Embedding folder (config.json Qwen3ForCausalLM,
    model.safetensors named as Qwen3Model, last-token Pooling, Normalize, the query prompt) and
    serves it with `tide serve --model FOLDER`, which exports it on start;
and checks for each: /tokenize appends <|endoftext|> to every input (as Qwen3-Embedding's tokenizer
does), and /embed (raw, normalized, prompt_name query) and /v1/embeddings (float, dimensions) answer,
for texts of different lengths in one batch, the vectors PyTorch computes for each text alone from
the same token ids, within 1e-4; an input truncated to max_sequence_length still ends with
<|endoftext|>.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request
from typing import Dict, List

TOOLS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TOOLS)
sys.path.insert(0, TOOLS)

import torch  # noqa: E402

import biencoder  # noqa: E402
import export_model  # noqa: E402
import test_decoder_embed  # noqa: E402
import test_export  # noqa: E402

QWEN3_TOKENIZER = test_decoder_embed.QWEN3_TOKENIZER
PRESET = test_decoder_embed.TINY
ATOL = 1e-4
SHORT_LIMIT = 16  # max_sequence_length of the served preset: TEXTS[1] is longer
TEXTS = ["what is the giant panda's diet?",
         "The giant panda is a bear native to South Central China; its diet is 99% bamboo.",
         "bamboo"]


class Server:
    """`tide serve --port 0 --grpc-port 0 ARGS...` (run from the repository root), up until close()."""

    def __init__(self, args: List[str], log_path: str):
        self.log_path = log_path
        self.log = open(log_path, "w", encoding="utf-8")
        self.proc = subprocess.Popen([test_export.tide_binary(), "serve", "--port", "0", "--grpc-port", "0", *args],
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT)
        self.url = test_export.wait_until_listening(self.proc, log_path)  # `--model FOLDER` exports first
        if self.url is not None:
            return
        self.close()
        with open(log_path, encoding="utf-8") as f:
            raise RuntimeError(f"tide serve did not start:\n{f.read()}")

    def post(self, path: str, body: Dict):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Host": "127.0.0.1"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def close(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


@unittest.skipIf(test_export.verify_model_problem(), test_export.verify_model_problem())
@unittest.skipUnless(os.path.isfile(QWEN3_TOKENIZER),
                     f"the real Qwen3 tokenizer is absent ({os.path.relpath(QWEN3_TOKENIZER, ROOT)}): "
                     "decoder embedder serving skipped")
class DecoderEmbedServingTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="tide-qwen3-embed-serving-")

    def tearDown(self):
        self.tmp.cleanup()

    def reference(self, server: Server, model, texts: List[str]) -> torch.Tensor:
        """PyTorch's pooled vectors (not normalized) of each text ALONE, from the server's token ids,
        which end with <|endoftext|>."""
        status, tokens = server.post("/tokenize", {"inputs": texts})
        self.assertEqual(status, 200, tokens)
        out = []
        for row in tokens:
            ids = [t["id"] for t in row]
            self.assertEqual(ids[-1], biencoder.QWEN3_EOS_ID, f"no <|endoftext|> at the end of {row}")
            self.assertEqual(ids.count(biencoder.QWEN3_EOS_ID), 1, row)
            x = torch.tensor([ids], dtype=torch.int64)
            with torch.no_grad():
                out.append(model(x, torch.ones_like(x))[0])
        return torch.stack(out)

    def check_served(self, server: Server, model, name: str):
        want = self.reference(server, model, TEXTS)
        self.assertGreater(float(want.abs().max()), 1e-2)
        normalized = torch.nn.functional.normalize(want, dim=1)

        status, raw = server.post("/embed", {"inputs": TEXTS, "normalize": False})
        self.assertEqual(status, 200, raw)
        torch.testing.assert_close(torch.tensor(raw), want, rtol=0, atol=ATOL)

        status, unit = server.post("/embed", {"inputs": TEXTS})
        self.assertEqual(status, 200, unit)
        torch.testing.assert_close(torch.tensor(unit), normalized, rtol=0, atol=ATOL)

        # Qwen3-Embedding's query prompt ("Instruct: ...\nQuery:") goes before the text.
        prompted = self.reference(server, model, [biencoder.QWEN3_EMBEDDING_QUERY_PROMPT + TEXTS[0]])
        status, got = server.post("/embed", {"inputs": TEXTS[0], "prompt_name": "query", "normalize": False})
        self.assertEqual(status, 200, got)
        torch.testing.assert_close(torch.tensor(got), prompted, rtol=0, atol=ATOL)

        status, oai = server.post("/v1/embeddings", {"input": TEXTS, "model": name})
        self.assertEqual(status, 200, oai)
        self.assertEqual([d["index"] for d in oai["data"]], [0, 1, 2])
        torch.testing.assert_close(torch.tensor([d["embedding"] for d in oai["data"]]), normalized, rtol=0, atol=ATOL)
        self.assertGreater(oai["usage"]["prompt_tokens"], len(TEXTS))

        status, cut = server.post("/v1/embeddings", {"input": TEXTS[1], "model": name, "dimensions": 32})
        self.assertEqual(status, 200, cut)
        torch.testing.assert_close(torch.tensor(cut["data"][0]["embedding"]),
                                   torch.nn.functional.normalize(want[1, :32], dim=0), rtol=0, atol=ATOL)

    def test_exported_preset_is_served_with_the_pytorch_vectors(self):
        repo = os.path.join(self.tmp.name, "repo")
        proc = test_export.run_export("--quiet", "--preset", PRESET, "--repository", repo, "--tokenizer",
                                      QWEN3_TOKENIZER, "--verify-cases", "2", "--verify-max-length", "40")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        # A short limit, so that the longest text is truncated: the <|endoftext|> still ends it (room
        # is kept for it, as HF's truncation keeps room for the post-processor's tokens).
        path = os.path.join(repo, PRESET, "config.pbtxt")
        with open(path, encoding="utf-8") as f:
            config = f.read()
        config, n = re.subn(r'(key: "max_sequence_length"\s+value \{ string_value: ")\d+', r"\g<1>%d" % SHORT_LIMIT,
                            config)
        self.assertEqual(n, 1)
        with open(path, "w", encoding="utf-8") as f:
            f.write(config)
        model = biencoder.build_embedder(biencoder.PRESETS[PRESET], seed=export_model.DEFAULT_SEED)
        server = Server(["--model-repository", repo], os.path.join(self.tmp.name, "preset-serve.log"))
        try:
            self.check_served(server, model, PRESET)
            status, tokens = server.post("/tokenize", {"inputs": [TEXTS[1]]})
            self.assertEqual(status, 200, tokens)
            self.assertEqual(len(tokens[0]), SHORT_LIMIT)
            self.assertEqual(tokens[0][-1]["id"], biencoder.QWEN3_EOS_ID)
        finally:
            server.close()

    def test_sentence_transformers_qwen3_folder_is_served_with_the_pytorch_vectors(self):
        folder = os.path.join(self.tmp.name, "Qwen3-Embedding-tiny")
        model = test_decoder_embed.write_qwen3_st_folder(folder, seed=9, tokenizer=QWEN3_TOKENIZER)
        server = Server(["--model", folder], os.path.join(self.tmp.name, "folder-serve.log"))
        try:
            self.check_served(server, model, "Qwen3-Embedding-tiny")
        finally:
            server.close()
        self.assertTrue(os.path.isfile(os.path.join(folder, ".tide", "Qwen3-Embedding-tiny", "1", "model.onnx")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
