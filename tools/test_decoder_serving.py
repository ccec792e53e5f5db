#!/usr/bin/python3
"""Batch invariance of a decoder reranker through the server (issue #28, item 3).

Run: /usr/bin/python3 tools/test_decoder_serving.py  (from the repository root; registered with CTest
as decoder_batch_invariance, label blackbox). Exports the qwen3-tiny preset (tools/export_model.py:
the fused graph, and --int8's per-row INT8 entry) with the real Qwen3 tokenizer from
../shared/assets/tokenizers/qwen3 (skipped, saying so, when it is absent), declares sequence buckets
in each entry's config.pbtxt, serves each entry with the tide binary ($TIDE_BINARY, else build/tide)
on free loopback ports, and checks, for FP32 and INT8, at every sequence bucket the config declares
(and the last, max_sequence_length): a pair's raw score alone equals (<= 1e-5) its score in one
request beside a shorter and a longer document. The server's own counters prove the shapes: alone,
the pair runs as one row padded to its bucket; beside the others, the three run as ONE batch padded
to the longer document's bucket (tide_batch_size_*, tide_batch_padded_tokens_total). Where the CPU has
AVX-512, the load log shows that those batches ran on tide's causal attention kernel, after the
prompt's shared first tokens computed once (shared_prompt_prefix: the load log's prefix length, and
tide_batch_prompt_prefix_tokens_total grows by it per row; a request with its own instruction by the
shorter prefix before the instruction), and the same pairs served with shared_prompt_prefix false
score the same (<= 1e-5).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest
import urllib.request
from typing import Dict, List, Tuple

TOOLS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TOOLS)
sys.path.insert(0, TOOLS)

import test_export  # noqa: E402

QWEN3_TOKENIZER = os.path.join(ROOT, "..", "shared", "assets", "tokenizers", "qwen3", "tokenizer.json")
MAX_SEQUENCE_LENGTH = 384
DECLARED_BUCKETS = [96, 128, 192, 256]  # above the Qwen3 prompt frame (~75 tokens with a short query)
BUCKETS = DECLARED_BUCKETS + [MAX_SEQUENCE_LENGTH]  # tide adds max_sequence_length as the last bucket
QUERY = "what is the giant panda's diet?"
INSTRUCTION = "Find the passage that names what the animal eats"
TOLERANCE = 1e-5


def set_parameter(config: str, key: str, value: str) -> str:
    """config.pbtxt text with parameter `key` set to `value` (replaced or appended)."""
    entry = f'parameters {{\n  key: "{key}"\n  value {{ string_value: "{value}" }}\n}}\n'
    pattern = re.compile(r'parameters \{\n  key: "' + re.escape(key) + r'"\n  value \{ string_value: "[^"]*" \}\n\}\n')
    if pattern.search(config):
        return pattern.sub(lambda _: entry, config)
    return config + entry


class Server:
    """`tide serve --port 0 --grpc-port 0 --model-repository REPO`, up until close()."""

    def __init__(self, tide: str, repository: str, log_path: str):
        self.log_path = log_path
        self.log = open(log_path, "w", encoding="utf-8")
        self.proc = subprocess.Popen([tide, "serve", "--port", "0", "--grpc-port", "0", "--model-repository", repository],
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.url = test_export.wait_until_listening(self.proc, log_path)  # `--model FOLDER` exports first
        if self.url is not None:
            return
        self.close()
        with open(log_path, encoding="utf-8") as f:
            raise RuntimeError(f"tide serve did not start:\n{f.read()}")

    def post(self, path: str, body: Dict):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Host": "127.0.0.1"})
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read())

    def counters(self, model: str) -> Dict[str, float]:
        with urllib.request.urlopen(self.url + "/metrics", timeout=60) as r:
            text = r.read().decode()
        out = {}
        for name in ("tide_batch_size_count", "tide_batch_size_sum", "tide_batch_padded_tokens_total",
                     "tide_batch_prompt_prefix_tokens_total"):
            m = re.search(r"^" + name + r'\{model="' + re.escape(model) + r'",version="1"\} (\S+)$', text, re.M)
            out[name] = float(m.group(1)) if m else 0.0
        return out

    def close(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


def cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            line = next((l for l in f if l.startswith("flags")), "")
    except OSError:
        return set()
    return set(line.split(":", 1)[-1].split())


def bucket_of(length: int) -> int:
    return next(b for b in BUCKETS if length <= b)


@unittest.skipUnless(os.path.isfile(QWEN3_TOKENIZER),
                     f"the real Qwen3 tokenizer is absent ({os.path.relpath(QWEN3_TOKENIZER, ROOT)}): "
                     "decoder batch invariance through the server skipped")
class DecoderBatchInvarianceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="tide-decoder-serving-")
        export_repo = os.path.join(cls.tmp.name, "export")
        proc = test_export.run_export("--quiet", "--preset", "qwen3-tiny", "--repository", export_repo,
                                      "--tokenizer", QWEN3_TOKENIZER, "--int8", "--verify-cases", "2",
                                      "--verify-max-length", "40")
        if proc.returncode != 0:
            raise RuntimeError(f"export failed:\n{proc.stderr}")
        cls.repos = {}
        for name in ("qwen3-tiny", "qwen3-tiny-int8"):  # one server each: TEI /rerank serves the one model
            repo = os.path.join(cls.tmp.name, name)
            os.makedirs(repo)
            shutil.move(os.path.join(export_repo, name), os.path.join(repo, name))
            path = os.path.join(repo, name, "config.pbtxt")
            with open(path, encoding="utf-8") as f:
                config = f.read()
            config = set_parameter(config, "max_sequence_length", str(MAX_SEQUENCE_LENGTH))
            config = set_parameter(config, "sequence_buckets", ",".join(map(str, DECLARED_BUCKETS)))
            # No padding limit and room for three rows, so one request's rows of any buckets share a batch.
            config = set_parameter(config, "max_padding_ratio", "0")
            config = set_parameter(config, "max_batch_tokens", str(4 * MAX_SEQUENCE_LENGTH))  # 3 rows of any bucket
            # No batch saturation either (its derived default stops batches at 400 tokens).
            config = set_parameter(config, "batch_saturation_tokens", "0")
            # A window long enough that a loaded machine (ctest -j2) still queues the request's three
            # rows before the first leaves (the export's 2 ms did not always).
            config = re.sub(r"max_queue_delay_microseconds: \d+", "max_queue_delay_microseconds: 50000", config)
            config = re.sub(r"count: \d+", "count: 1", config)
            with open(path, "w", encoding="utf-8") as f:
                f.write(config)
            cls.repos[name] = repo

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def prompt_length(self, server: Server, document: str) -> int:
        return len(server.post("/tokenize", {"inputs": [[QUERY, document]]})[0])

    def document_of_length(self, server: Server, target: int) -> str:
        """A document whose rendered prompt is exactly `target` tokens (Qwen3 gives " the" one token)."""
        n = 1
        for _ in range(8):
            document = " ".join(["the"] * n)
            length = self.prompt_length(server, document)
            if length == target:
                return document
            n = max(1, n + target - length)
        self.fail(f"no document found with a {target}-token prompt")

    def score_and_shape(self, server: Server, model: str, texts: List[str], index: int,
                        instruction: str = "") -> Tuple[float, Dict]:
        before = server.counters(model)
        body = {"query": QUERY, "texts": texts, "raw_scores": True}
        if instruction:
            body["instruction"] = instruction
        answer = server.post("/rerank", body)
        after = server.counters(model)
        score = next(r["score"] for r in answer if r["index"] == index)
        return score, {k: after[k] - before[k] for k in after}

    def check_model(self, model: str):
        log = os.path.join(self.tmp.name, f"{model}-serve.log")
        server = Server(test_export.tide_binary(), self.repos[model], log)
        # With AVX-512 (tide's causal kernel) the load computes the prompt's shared first tokens once
        # (shared_prompt_prefix) and every batch here runs the rest of its rows after them.
        avx512 = {"avx512f", "avx512dq"} <= cpu_flags()
        prefix = 0
        if avx512:
            with open(log, encoding="utf-8") as f:
                m = re.search(r"shared prompt prefix: (\d+) tokens computed once \((\d+) before the instruction",
                              f.read())
            self.assertIsNotNone(m, "the load log names the shared prompt prefix")
            prefix, before_instruction = int(m.group(1)), int(m.group(2))
            self.assertGreater(prefix, 40, "Qwen3-Reranker's system message and instruction are shared")
            self.assertTrue(20 < before_instruction < prefix, (before_instruction, prefix))
        alone_scores = {}
        try:
            shortest = "hi"
            shortest_length = self.prompt_length(server, shortest)
            self.assertLess(shortest_length, BUCKETS[0] - 2, "the prompt frame must fit the first bucket")
            for i, bucket in enumerate(BUCKETS):
                with self.subTest(model=model, bucket=bucket):
                    target_length = bucket - 2
                    longer_length = BUCKETS[i + 1] - 1 if i + 1 < len(BUCKETS) else bucket
                    target = self.document_of_length(server, target_length)
                    longer = self.document_of_length(server, longer_length)
                    alone, shape = self.score_and_shape(server, model, [target], 0)
                    alone_scores[target] = alone
                    self.assertEqual(shape["tide_batch_size_count"], 1, shape)
                    self.assertEqual(shape["tide_batch_padded_tokens_total"], bucket, shape)
                    self.assertEqual(shape["tide_batch_prompt_prefix_tokens_total"], prefix, shape)
                    batched, shape = self.score_and_shape(server, model, [shortest, target, longer], 1)
                    # One batch of the three rows, padded to the longer document's bucket.
                    self.assertEqual((shape["tide_batch_size_count"], shape["tide_batch_size_sum"]), (1, 3), shape)
                    self.assertEqual(shape["tide_batch_padded_tokens_total"], 3 * bucket_of(longer_length), shape)
                    self.assertEqual(shape["tide_batch_prompt_prefix_tokens_total"], 3 * prefix, shape)
                    self.assertLessEqual(abs(alone - batched), TOLERANCE,
                                         f"{model}: a {target_length}-token pair scores {alone!r} alone (bucket "
                                         f"{bucket}) but {batched!r} beside {shortest_length}- and "
                                         f"{longer_length}-token pairs (bucket {bucket_of(longer_length)})")
            # The batches above ran on tide's causal attention kernel where the CPU has AVX-512 (the
            # load moves both layers' GroupQueryAttention; FP32 products for INT8 too under auto).
            if avx512:
                with open(log, encoding="utf-8") as f:
                    self.assertIn("2 causal attention (tide kernel), shared prompt prefix inputs (2 layers); ", f.read())
                # A request with its own instruction runs after the prompt's first tokens before it.
                own, shape = self.score_and_shape(server, model, [shortest, "the the the"], 1, INSTRUCTION)
                self.assertEqual(shape["tide_batch_prompt_prefix_tokens_total"], 2 * before_instruction, shape)
        finally:
            server.close()
        if not avx512:
            return
        # The same pairs with shared_prompt_prefix false: every prompt whole, the same scores.
        path = os.path.join(self.repos[model], model, "config.pbtxt")
        with open(path, encoding="utf-8") as f:
            config = f.read()
        whole_repo = os.path.join(self.tmp.name, f"{model}-whole")
        shutil.copytree(self.repos[model], whole_repo)
        with open(os.path.join(whole_repo, model, "config.pbtxt"), "w", encoding="utf-8") as f:
            f.write(set_parameter(config, "shared_prompt_prefix", "false"))
        log = os.path.join(self.tmp.name, f"{model}-whole-serve.log")
        server = Server(test_export.tide_binary(), whole_repo, log)
        try:
            for target, prefixed in alone_scores.items():
                whole, shape = self.score_and_shape(server, model, [target], 0)
                self.assertEqual(shape["tide_batch_prompt_prefix_tokens_total"], 0, shape)
                self.assertLessEqual(abs(whole - prefixed), TOLERANCE,
                                     f"{model}: {whole!r} whole but {prefixed!r} after the shared prompt prefix")
            whole, _ = self.score_and_shape(server, model, [shortest, "the the the"], 1, INSTRUCTION)
            self.assertLessEqual(abs(whole - own), TOLERANCE,
                                 f"{model}: {whole!r} whole but {own!r} after the prompt's first tokens (own instruction)")
            with open(log, encoding="utf-8") as f:
                self.assertNotIn("shared prompt prefix", f.read())
        finally:
            server.close()

    def test_fp32_pair_scores_the_same_alone_and_batched_at_every_bucket(self):
        self.check_model("qwen3-tiny")

    def test_int8_pair_scores_the_same_alone_and_batched_at_every_bucket(self):
        self.check_model("qwen3-tiny-int8")


if __name__ == "__main__":
    unittest.main(verbosity=2)
