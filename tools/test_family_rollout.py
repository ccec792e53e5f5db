#!/usr/bin/python3
"""Gray release across model families through the server (issue #28, item 5).

Run: /usr/bin/python3 tools/test_family_rollout.py  (from the repository root; registered with CTest as
family_rollout, label blackbox). Skipped, saying so, without the real Qwen3 tokenizer in
../shared/assets/tokenizers/qwen3.

One model name `m`, two versions of different families: version 1 the exported tiny BERT
cross-encoder (tools/crossencoder.py preset tiny-bert: WordPiece, [CLS] query [SEP] document [SEP]),
version 2 the exported tiny Qwen3 reranker (tools/decoder.py preset qwen3-tiny: the real Qwen3 BPE
tokenizer, the Qwen3-Reranker prompt template, a default instruction). Version 2 carries its own
config.pbtxt and tokenizer.json in its version folder (the exported entry's, copied in as they are:
config/model_repository.h, VersionConfig). The same server also serves each exported entry alone
(`x-enc`, `x-dec`; `m` stays the default model) as the reference for what each version must answer.

  - canary 50%: every /v1/rerank answer names its version (x-tide-model-version), both versions
    answer, and each answer's scores equal that version's reference model's (its own tokenizer and
    prompt); the canary's duplicates on the stable version are compared (agreement pairs > 0);
  - shadow with a guard that accepts any agreement (min_spearman -1, min_top1 0): every answer is
    version 1's, the decoder scores the shadows (tide_rollout_shadow_requests_total outcome scored,
    none failed), agreement is computed on the rankings and the rollout keeps running;
  - shadow with the default agreement bounds (0.9, 0.8): the random-weight decoder ranks unlike the
    encoder and the guard rolls the rollout back by itself, the reason naming the measure, while
    every answer stays 200 from version 1;
  - long documents (chunk_max) past version 1's 64 tokens: each version splits them by its own
    tokenizer and length (the encoder into windows, the decoder, with its longer
    max_sequence_length, inside one prompt) and the per-document scores are compared; every
    answer is version 1's and equals the encoder reference's order; no shadow fails.
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
import time
import unittest
import urllib.error
import urllib.request
from typing import Dict, List, Optional, Tuple

TOOLS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TOOLS)
sys.path.insert(0, TOOLS)

import test_export  # noqa: E402

QWEN3_TOKENIZER = os.path.join(ROOT, "..", "shared", "assets", "tokenizers", "qwen3", "tokenizer.json")
ADMIN_KEY = "family-rollout-admin"
TOLERANCE = 1e-5
# Version 1's config: no inputs listed (each version's graph has its own: the decoder has no
# token_type_ids), the tiny BERT's 64 positions; version 2's own config.pbtxt overrides the
# parameters it sets (max_sequence_length, score_activation, prompt_template, default_instruction)
# and brings its warm-up shapes.
MODEL_CONFIG = ('backend: "onnxruntime"\nmax_batch_size: 8\nversion_policy { all { } }\n'
                'instance_group [ { count: 1 kind: KIND_CPU } ]\n'
                'parameters { key: "max_sequence_length" value { string_value: "64" } }\n'
                'parameters { key: "tokenizer" value { string_value: "tokenizer.json" } }\n')
# A guard that never rolls back on latency or errors: only agreement is under test.
QUIET_GUARD = {"max_error_rate": 1.0, "max_p99_ratio": 1e6}


def rerank_body(i: int) -> Dict:
    """Five documents, so that two rankings can disagree."""
    return {"query": f"what is a panda number {i % 17}?",
            "documents": ["a bear", "a city in china", "the giant panda eats bamboo", "a red fox",
                          f"number {i % 5} is a number"]}


class Server:
    """`tide serve --port 0 --grpc-port 0 --model-repository REPO ARGS...`, up until close()."""

    def __init__(self, tide: str, repository: str, log_path: str, args: List[str]):
        self.log_path = log_path
        self.log = open(log_path, "w", encoding="utf-8")
        self.proc = subprocess.Popen([tide, "serve", "--port", "0", "--grpc-port", "0", "--model-repository", repository,
                                      *args], stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.url = test_export.wait_until_listening(self.proc, log_path)  # `--model FOLDER` exports first
        if self.url is not None:
            return
        self.close()
        with open(log_path, encoding="utf-8") as f:
            raise RuntimeError(f"tide serve did not start:\n{f.read()}")

    def request(self, method: str, path: str, body: Optional[Dict] = None,
                admin: bool = False) -> Tuple[int, Dict[str, str], object]:
        headers = {"Host": "127.0.0.1"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if admin:
            headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                raw = r.read()
                return r.status, {k.lower(): v for k, v in r.headers.items()}, (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as e:
            raw = e.read()
            return e.code, {k.lower(): v for k, v in e.headers.items()}, raw.decode(errors="replace")

    def metric(self, name: str, labels: Dict[str, str]) -> float:
        with urllib.request.urlopen(self.url + "/metrics", timeout=60) as r:
            text = r.read().decode()
        total = 0.0
        for line in text.splitlines():
            if not line.startswith(name + "{"):
                continue
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def close(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


def scores(answer) -> List[float]:
    """A Cohere /v1/rerank answer's relevance scores by document index."""
    out = [None] * len(answer["results"])
    for item in answer["results"]:
        out[item["index"]] = item["relevance_score"]
    return out


@unittest.skipUnless(os.path.isfile(QWEN3_TOKENIZER),
                     f"the real Qwen3 tokenizer is absent ({os.path.relpath(QWEN3_TOKENIZER, ROOT)}): "
                     "the encoder -> decoder rollout test skipped")
class FamilyRolloutTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="tide-family-rollout-")
        export = os.path.join(cls.tmp.name, "export")
        for args in (("--preset", "tiny-bert"),
                     ("--preset", "qwen3-tiny", "--tokenizer", QWEN3_TOKENIZER, "--verify-cases", "2",
                      "--verify-max-length", "40")):
            proc = test_export.run_export("--quiet", "--repository", export, *args)
            if proc.returncode != 0:
                raise RuntimeError(f"export {' '.join(args)} failed:\n{proc.stderr}")
        repo = os.path.join(cls.tmp.name, "repo")
        os.makedirs(repo)
        # The references: each exported entry alone.
        shutil.copytree(os.path.join(export, "tiny-bert"), os.path.join(repo, "x-enc"))
        shutil.copytree(os.path.join(export, "qwen3-tiny"), os.path.join(repo, "x-dec"))
        for name in ("x-enc", "x-dec"):
            path = os.path.join(repo, name, "config.pbtxt")
            with open(path, encoding="utf-8") as f:
                config = f.read()
            config = re.sub(r'name: "[^"]*"', f'name: "{name}"', config, count=1)
            config = re.sub(r"count: \d+", "count: 1", config)
            with open(path, "w", encoding="utf-8") as f:
                f.write(config)
        # m: version 1 the encoder (the model folder's tokenizer), version 2 the decoder with the
        # exported entry's config.pbtxt and tokenizer.json in its version folder.
        m = os.path.join(repo, "m")
        shutil.copytree(os.path.join(export, "tiny-bert", "1"), os.path.join(m, "1"))
        shutil.copy(os.path.join(export, "tiny-bert", "tokenizer.json"), os.path.join(m, "tokenizer.json"))
        shutil.copytree(os.path.join(export, "qwen3-tiny", "1"), os.path.join(m, "2"))
        for f in ("config.pbtxt", "tokenizer.json"):
            shutil.copy(os.path.join(export, "qwen3-tiny", f), os.path.join(m, "2", f))
        with open(os.path.join(m, "config.pbtxt"), "w", encoding="utf-8") as f:
            f.write(MODEL_CONFIG)
        # Shadow lanes at the inference threads' priority: a test machine shared with other work
        # would starve SCHED_IDLE threads.
        cls.server = Server(test_export.tide_binary(), repo, os.path.join(cls.tmp.name, "serve.log"),
                            ["--admin-api-key", ADMIN_KEY, "--shadow-scheduling", "normal", "--log-level", "info"])

    @classmethod
    def tearDownClass(cls):
        cls.server.close()
        cls.tmp.cleanup()

    def rerank(self, model: str, i: int) -> Tuple[str, List[float]]:
        status, headers, answer = self.server.request("POST", "/v1/rerank", dict(rerank_body(i), model=model))
        self.assertEqual(status, 200, answer)
        return headers.get("x-tide-model-version", ""), scores(answer)

    def put_rollout(self, spec: Dict):
        status, _, answer = self.server.request("PUT", "/v2/models/m/rollout", spec, admin=True)
        self.assertEqual(status, 200, answer)

    def rollout(self) -> Dict:
        status, _, answer = self.server.request("GET", "/v2/models/m/rollout", admin=True)
        self.assertEqual(status, 200, answer)
        return answer

    def assert_answers_like(self, version: str, i: int, got: List[float]):
        reference = {"1": "x-enc", "2": "x-dec"}[version]
        _, want = self.rerank(reference, i)
        for a, b in zip(got, want):
            self.assertLessEqual(abs(a - b), TOLERANCE, f"version {version} answered {got}, {reference} {want}")

    def shadow_until(self, done, limit_s: float = 120) -> List[str]:
        """Sends reranks (pausing 40 ms after each: shadows run in the gaps) until done(rollout)."""
        versions = []
        deadline = time.monotonic() + limit_s
        i = 0
        while time.monotonic() < deadline:
            version, got = self.rerank("m", i)
            versions.append(version)
            if i % 10 == 0:
                self.assert_answers_like(version, i, got)
            i += 1
            time.sleep(0.04)
            if i % 5 == 0 and done(self.rollout()):
                return versions
        self.fail(f"not reached in {limit_s} s: {json.dumps(self.rollout())}")

    def test_1_both_versions_answer_with_their_own_tokenizer_and_template(self):
        # A request naming a version bypasses any rollout: each answers as its reference does.
        for version, reference in (("1", "x-enc"), ("2", "x-dec")):
            status, headers, answer = self.server.request(
                "POST", f"/v2/models/m/versions/{version}/infer",
                {"inputs": [{"name": "text", "shape": [2], "datatype": "BYTES", "data": ["what is a panda?"] * 2},
                            {"name": "text_pair", "shape": [2], "datatype": "BYTES", "data": ["a bear", "a red fox"]}]})
            self.assertEqual(status, 200, answer)
            status, _, want = self.server.request(
                "POST", f"/v2/models/{reference}/infer",
                {"inputs": [{"name": "text", "shape": [2], "datatype": "BYTES", "data": ["what is a panda?"] * 2},
                            {"name": "text_pair", "shape": [2], "datatype": "BYTES", "data": ["a bear", "a red fox"]}]})
            self.assertEqual(status, 200, want)
            self.assertEqual(answer["outputs"][0]["data"], want["outputs"][0]["data"], f"version {version}")

    def test_2_canary_splits_and_each_version_answers_as_its_family(self):
        self.put_rollout({"stable": "1", "candidate": "2", "mode": "canary", "percent": 50,
                          "guard": dict(QUIET_GUARD, min_requests=100000)})
        seen = {"1": 0, "2": 0}
        for i in range(40):
            version, got = self.rerank("m", i)
            self.assertIn(version, seen)
            seen[version] += 1
            self.assert_answers_like(version, i, got)
        self.assertGreaterEqual(seen["1"], 5, seen)
        self.assertGreaterEqual(seen["2"], 5, seen)
        # The candidate's answers are re-scored by the encoder on its lane and compared by ranking.
        self.shadow_until(lambda r: r.get("agreement", {}).get("pairs", 0) >= 3)
        state = self.rollout()
        self.assertEqual(state["state"], "running", state)

    def test_3_shadow_compares_rankings_and_keeps_running_when_agreement_is_enough(self):
        failed_before = self.server.metric("tide_rollout_shadow_requests_total", {"model": "m", "outcome": "failed"})
        scored_before = self.server.metric("tide_rollout_shadow_requests_total", {"model": "m", "outcome": "scored"})
        self.put_rollout({"stable": "1", "candidate": "2", "mode": "shadow", "percent": 100,
                          "guard": dict(QUIET_GUARD, min_requests=10, min_spearman=-1, min_top1=0)})
        versions = self.shadow_until(lambda r: r.get("agreement", {}).get("pairs", 0) >= 12)
        self.assertEqual(set(versions), {"1"}, "in shadow only the stable version answers")
        state = self.rollout()
        print(f"\nshadow, any agreement accepted: {json.dumps(state['agreement'])}", file=sys.stderr)
        self.assertEqual(state["state"], "running", state)
        agreement = state["agreement"]
        for measure in ("spearman", "top1", "ndcg10"):
            self.assertIn(measure, agreement)
        self.assertGreaterEqual(agreement["spearman"], -1.0)
        self.assertLessEqual(agreement["spearman"], 1.0)
        self.assertGreater(self.server.metric("tide_rollout_shadow_requests_total", {"model": "m", "outcome": "scored"}),
                           scored_before)
        self.assertEqual(self.server.metric("tide_rollout_shadow_requests_total", {"model": "m", "outcome": "failed"}),
                         failed_before)

    def test_4_shadow_rolls_back_a_decoder_that_ranks_unlike_the_encoder(self):
        self.put_rollout({"stable": "1", "candidate": "2", "mode": "shadow", "percent": 100,
                          "guard": dict(QUIET_GUARD, min_requests=10, min_spearman=0.9, min_top1=0.8)})
        versions = self.shadow_until(lambda r: r.get("state") != "running")
        self.assertEqual(set(versions), {"1"})
        state = self.rollout()
        print(f"\nshadow, default bounds: {state['state']}: {state['reason']}", file=sys.stderr)
        self.assertEqual(state["state"], "rolled_back", state)
        self.assertRegex(state["reason"], r"min_spearman|min_top1", state)
        self.assertGreater(self.server.metric("tide_rollout_rollbacks_total", {"model": "m"}), 0)
        version, got = self.rerank("m", 1)  # after the rollback: the stable version
        self.assertEqual(version, "1")
        self.assert_answers_like("1", 1, got)

    def test_5_long_documents_are_split_by_each_version_and_compared_per_document(self):
        failed_before = self.server.metric("tide_rollout_shadow_requests_total", {"model": "m", "outcome": "failed"})
        self.put_rollout({"stable": "1", "candidate": "2", "mode": "shadow", "percent": 100,
                          "guard": dict(QUIET_GUARD, min_requests=10, min_spearman=-1, min_top1=0)})
        long_doc = " ".join(["the giant panda eats bamboo in the mountains of china"] * 8)  # ~180 tokens
        deadline = time.monotonic() + 120
        i = 0
        while self.rollout().get("agreement", {}).get("pairs", 0) < 5:
            self.assertLess(time.monotonic(), deadline, json.dumps(self.rollout()))
            body = {"query": f"what does a panda eat {i}?", "texts": ["a bear", long_doc, "a city in china"],
                    "long_documents": "chunk_max", "raw_scores": True}
            status, headers, answer = self.server.request("POST", "/rerank", body)
            self.assertEqual(status, 200, answer)
            self.assertEqual(headers.get("x-tide-model-version"), "1")
            status, _, want = self.server.request("POST", "/v1/rerank",
                                                  {"model": "x-enc", "query": body["query"], "documents": body["texts"],
                                                   "long_documents": "chunk_max", "return_documents": False})
            self.assertEqual(status, 200, want)
            self.assertEqual([r["index"] for r in answer], [r["index"] for r in want["results"]])
            i += 1
            time.sleep(0.04)
        self.assertEqual(self.rollout()["state"], "running")
        self.assertEqual(self.server.metric("tide_rollout_shadow_requests_total", {"model": "m", "outcome": "failed"}),
                         failed_before)


if __name__ == "__main__":
    unittest.main(verbosity=2)
