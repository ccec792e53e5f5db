#!/usr/bin/python3
"""Real SDK clients against `tide serve` on an embedding model (issue #31 item 4): OpenAI's Node SDK
(`openai` embeddings.create, float and base64) and Cohere's (`cohere-ai` CohereClientV2.embed with
float, int8 and binary types), run unchanged with only their base URL pointed at tide
(tools/embed_sdks.js). What each SDK hands its caller is checked against tide's own TEI /embed
answer for the same texts: the same vectors, base64 decoding to them, Cohere's int8 / binary as
tide quantizes them, usage counted, and the SDK's error for an empty input list.

The SDKs come from the npm registry (openai@4.104.0, cohere-ai@7.21.0, installed into
third_party/clients with --ignore-scripts on first use); where npm or node is unavailable the test
says so and is skipped.
"""
from __future__ import annotations

import base64
import json
import os
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

import test_export  # noqa: E402

SDKS = {"openai": "4.104.0", "cohere-ai": "7.21.0"}
CLIENTS = os.path.join(ROOT, "third_party", "clients")


def install_sdks() -> str:
    """node_modules holding the pinned SDKs, or a SkipTest saying why there is none."""
    modules = os.path.join(CLIENTS, "node_modules")
    def installed() -> bool:
        for name, version in SDKS.items():
            try:
                with open(os.path.join(modules, name, "package.json"), encoding="utf-8") as f:
                    if json.load(f).get("version") != version:
                        return False
            except OSError:
                return False
        return True
    if installed():
        return modules
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise unittest.SkipTest("node/npm not installed: the SDK clients cannot run")
    os.makedirs(CLIENTS, exist_ok=True)
    proc = subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--ignore-scripts", "--prefix", CLIENTS,
                           *[f"{n}@{v}" for n, v in SDKS.items()]],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    if proc.returncode != 0 or not installed():
        raise unittest.SkipTest(f"npm could not install {SDKS} (no registry?): {proc.stdout[-500:]}")
    return modules


class EmbedSdkTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.modules = install_sdks()
        cls.tmp = tempfile.mkdtemp(prefix="tide-embed-sdks-")
        repo = os.path.join(cls.tmp, "repo")
        proc = test_export.run_export("--preset", "tiny-bert-embed", "--repository", repo)
        if proc.returncode != 0:
            raise RuntimeError(proc.stdout + proc.stderr)
        cls.model = "tiny-bert-embed"
        log_path = os.path.join(cls.tmp, "serve.log")
        cls.log = open(log_path, "w", encoding="utf-8")
        cls.proc = subprocess.Popen([test_export.tide_binary(), "serve", "--port", "0", "--grpc-port", "0",
                                     "--model-repository", repo], stdout=cls.log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        cls.url = test_export.wait_until_listening(cls.proc, log_path)
        if cls.url is None:
            cls.tearDownClass()
            with open(log_path, encoding="utf-8") as f:
                raise RuntimeError(f"tide serve did not start:\n{f.read()}")

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "proc", None) is not None and cls.proc.poll() is None:
            cls.proc.terminate()
            cls.proc.wait(timeout=30)
        if getattr(cls, "log", None) is not None:
            cls.log.close()
        shutil.rmtree(getattr(cls, "tmp", ""), ignore_errors=True)

    def embed(self, texts, prompt_name=None):
        body = {"inputs": texts}
        if prompt_name is not None:
            body["prompt_name"] = prompt_name
        body = json.dumps(body).encode()
        req = urllib.request.Request(self.url + "/embed", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())

    def test_sdks_get_tides_vectors(self):
        texts = ["what is a panda?", "The giant panda is a bear native to China."]
        proc = subprocess.run(["node", os.path.join(TOOLS, "embed_sdks.js"), self.modules, self.url, self.model],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        got = json.loads(proc.stdout)
        want = self.embed(texts)  # the model's default: normalized
        dim = len(want[0])

        # OpenAI: float vectors in input order, usage, the model echoed, base64 = little-endian float32.
        data = got["openai"]["data"]
        self.assertEqual([d["index"] for d in data], [0, 1])
        for d, w in zip(data, want):
            self.assertEqual(len(d["embedding"]), dim)
            for a, b in zip(d["embedding"], w):
                self.assertAlmostEqual(a, b, places=6)
        self.assertGreater(got["openai"]["usage"]["prompt_tokens"], 0)
        self.assertEqual(got["openai"]["usage"]["total_tokens"], got["openai"]["usage"]["prompt_tokens"])
        self.assertEqual(got["openai"]["model"], self.model)
        for s, w in zip(got["openai"]["base64"], want):
            floats = struct.unpack(f"<{dim}f", base64.b64decode(s))
            for a, b in zip(floats, w):
                self.assertAlmostEqual(a, b, places=6)

        # Cohere v2 (input_type search_document: the model's `document` prompt, else `passage`,
        # else none): float as /embed's with that prompt; int8 and binary as Cohere defines them
        # over those floats
        # (docs/embeddings.md: int8 = round(v * 127) over the fixed range [-1, 1]; binary = the
        # signs packed 8 per byte, most significant first, as int8 (value - 128)).
        co = got["cohere"]
        self.assertEqual(co["texts"], texts)
        want = None
        for prompt in ("document", "passage"):
            try:
                want = self.embed(texts, prompt)
                break
            except urllib.error.HTTPError:
                continue
        if want is None:
            want = self.embed(texts)
        for f, w in zip(co["float"], want):
            for a, b in zip(f, w):
                self.assertAlmostEqual(a, b, places=6)
        for q, w in zip(co["int8"], want):
            self.assertEqual(len(q), dim)
            for a, b in zip(q, w):
                self.assertLessEqual(abs(a - b * 127), 1.0)
        for packed, w in zip(co["binary"], want):
            self.assertEqual(len(packed), (dim + 7) // 8)
            bits = [1 if v > 0 else 0 for v in w]
            for i, byte in enumerate(packed):
                value = 0
                for b in bits[i * 8:(i + 1) * 8]:
                    value = (value << 1) | b
                value <<= max(0, 8 - len(bits[i * 8:(i + 1) * 8]))
                self.assertEqual(byte, value - 128)

        # The SDK surfaces tide's 400 for an empty input list as its own error with the status.
        self.assertIsNotNone(got["empty_input_error"])
        self.assertEqual(got["empty_input_error"]["status"], 400)


if __name__ == "__main__":
    unittest.main(verbosity=2)
