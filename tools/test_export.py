#!/usr/bin/python3
"""Round-trip tests of tools/export_model.py: PyTorch -> ONNX -> `tide verify-model` (ONNX Runtime).

Run: /usr/bin/python3 tools/test_export.py  (from the repository root; registered with CTest as
tools_export_roundtrip). The tide binary is $TIDE_BINARY, else $TIDE_BINARY_DIR/tide, else build/tide;
when it lacks `verify-model` the ONNX Runtime tests fail rather than skip.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from typing import Optional

TOOLS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TOOLS)
sys.path.insert(0, TOOLS)

import torch  # noqa: E402

import crossencoder  # noqa: E402
import export_model  # noqa: E402
import make_wordpiece_tokenizer  # noqa: E402


def tide_binary() -> str:
    if os.environ.get("TIDE_BINARY"):
        return os.environ["TIDE_BINARY"]
    if os.environ.get("TIDE_BINARY_DIR"):
        return os.path.join(os.environ["TIDE_BINARY_DIR"], "tide")
    return os.path.join(ROOT, "build", "tide")


def wait_until_listening(proc: subprocess.Popen, log_path: str, timeout_s: float = 300) -> Optional[str]:
    """The URL `tide serve` (started with --port 0, logging to log_path) prints once it listens, or
    None when it exits or does not listen within timeout_s (the caller stops it and shows the log)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        with open(log_path, encoding="utf-8") as f:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", f.read())
        if m:
            return f"http://127.0.0.1:{m.group(1)}"
        time.sleep(0.2)
    return None


def run_export(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, os.path.join(TOOLS, "export_model.py"), "--tide-binary", tide_binary(), "--threads", "2",
           *args]
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)


def verify(model: str, reference: str, atol: str = "1e-4") -> subprocess.CompletedProcess:
    return subprocess.run([tide_binary(), "verify-model", "--model", model, "--reference", reference, "--atol", atol],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def verify_model_problem() -> str:
    """Why `tide verify-model` cannot check exports here ("" when it can)."""
    binary = tide_binary()
    probe = subprocess.run([binary, "verify-model", "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True) if os.path.isfile(binary) else None
    # `tide --help` also exits 0, so look for verify-model's own flags in the help text.
    if probe is None or probe.returncode != 0 or "--reference" not in probe.stdout:
        return (f"{binary} verify-model is unavailable (build the tide binary with its verify-model command): "
                f"{probe.stdout.strip() if probe else 'no such file'}")
    return ""


class TokenizerTest(unittest.TestCase):
    def test_bert_layout_is_deterministic_and_bert_shaped(self):
        with tempfile.TemporaryDirectory() as d:
            a, b = os.path.join(d, "a.json"), os.path.join(d, "b.json")
            make_wordpiece_tokenizer.write_tokenizer(a, 30522, "bert")
            make_wordpiece_tokenizer.write_tokenizer(b, 30522, "bert")
            with open(a, "rb") as fa, open(b, "rb") as fb:
                self.assertEqual(fa.read(), fb.read())
            with open(a, encoding="utf-8") as f:
                tok = json.load(f)
        vocab = tok["model"]["vocab"]
        self.assertEqual(len(vocab), 30522)
        self.assertEqual(sorted(vocab.values()), list(range(30522)))
        for token, id_ in (("[PAD]", 0), ("[UNK]", 100), ("[CLS]", 101), ("[SEP]", 102), ("[MASK]", 103)):
            self.assertEqual(vocab[token], id_)
        self.assertEqual(tok["model"]["type"], "WordPiece")
        self.assertEqual(tok["normalizer"]["type"], "BertNormalizer")
        self.assertTrue(tok["normalizer"]["lowercase"])
        self.assertEqual(tok["pre_tokenizer"]["type"], "BertPreTokenizer")
        self.assertIsNone(tok["truncation"])
        self.assertIsNone(tok["padding"])
        pair = tok["post_processor"]["pair"]
        self.assertEqual([next(iter(p.values()))["type_id"] for p in pair], [0, 0, 0, 1, 1])
        for piece in ("a", "z", "##s", "##ing", "the", "run"):
            self.assertIn(piece, vocab)
        self.assertTrue(any(k.startswith("##") and len(k) > 4 for k in vocab))

    def test_hf_tokenizers_loads_and_encodes_pairs(self):
        node_modules = os.path.join(ROOT, "third_party", "node", "node_modules")
        if not os.path.isdir(os.path.join(node_modules, "tokenizers")) or not shutil.which("node"):
            self.skipTest("HF tokenizers (npm) not installed under third_party/node: run scripts/bootstrap.sh")
        script = """
const { Tokenizer } = require('tokenizers');
(async () => {
  const out = {};
  for (const [name, path] of Object.entries(JSON.parse(process.argv[1]))) {
    const e = await Tokenizer.fromFile(path).encode('What is a Panda?', 'The giant panda, a bear.');
    out[name] = { ids: e.getIds(), types: e.getTypeIds(), tokens: e.getTokens() };
  }
  console.log(JSON.stringify(out));
})().catch((err) => { console.error(err); process.exit(1); });
"""
        with tempfile.TemporaryDirectory() as d:
            paths = {layout: os.path.join(d, f"{layout}.json") for layout in ("bert", "xlmr")}
            for layout, path in paths.items():
                make_wordpiece_tokenizer.write_tokenizer(path, 30522 if layout == "bert" else 5000, layout)
            proc = subprocess.run(["node", "-e", script, json.dumps(paths)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env={**os.environ, "NODE_PATH": node_modules})
            self.assertEqual(proc.returncode, 0, proc.stderr)
            out = json.loads(proc.stdout)
        bert, xlmr = out["bert"], out["xlmr"]
        self.assertEqual(bert["tokens"], ["[CLS]", "what", "is", "a", "panda", "?", "[SEP]", "the", "giant", "panda",
                                          ",", "a", "bear", ".", "[SEP]"])
        self.assertEqual(bert["ids"][0], 101)
        self.assertEqual(bert["types"], [0] * 7 + [1] * 8)
        self.assertEqual(xlmr["tokens"][:2], ["<s>", "what"])
        self.assertEqual(xlmr["ids"][0], 0)
        seps = [i for i, t in enumerate(xlmr["tokens"]) if t == "</s>"]  # <s> A </s></s> B </s>
        self.assertEqual(len(seps), 3)
        self.assertEqual(seps[1], seps[0] + 1)
        self.assertEqual(seps[2], len(xlmr["tokens"]) - 1)

    def test_xlmr_layout_special_ids(self):
        vocab = make_wordpiece_tokenizer.build_vocab(["alpha", "beta", "gamma", "delta"] * 1, 60, "xlmr")
        self.assertEqual([vocab[t] for t in ("<s>", "<pad>", "</s>", "<unk>")], [0, 1, 2, 3])
        self.assertEqual(len(vocab), 60)

    def test_too_small_word_list_is_an_error(self):
        with self.assertRaises(ValueError):
            make_wordpiece_tokenizer.build_vocab(["alpha"], 5000, "bert")


class ModelTest(unittest.TestCase):
    def check_padding_invariance(self, preset: str):
        cfg = crossencoder.PRESETS[preset]
        model = crossencoder.build_model(cfg, seed=3)
        cases = export_model.random_cases(cfg, seed=5, num_cases=6, max_length=40)
        padded_rows = 0
        for inputs in cases:
            batch = export_model.run_model(model, cfg, inputs)
            for row in range(batch.shape[0]):
                n = int(inputs["attention_mask"][row].sum())
                padded_rows += n < inputs["input_ids"].shape[1]
                alone = {k: v[row:row + 1, :n] for k, v in inputs.items()}
                torch.testing.assert_close(export_model.run_model(model, cfg, alone), batch[row:row + 1],
                                           rtol=0, atol=1e-5)
        self.assertGreater(padded_rows, 0, "the random cases must contain padding")

    def test_bert_padding_does_not_change_outputs(self):
        self.check_padding_invariance("tiny-bert")

    def test_xlmr_padding_does_not_change_outputs(self):
        self.check_padding_invariance("tiny-xlmr")

    def test_parameter_names_are_hf_names(self):
        bert = crossencoder.build_model(crossencoder.PRESETS["tiny-bert"], seed=0).state_dict()
        for key in ("bert.embeddings.word_embeddings.weight", "bert.embeddings.LayerNorm.weight",
                    "bert.encoder.layer.0.attention.self.query.weight",
                    "bert.encoder.layer.1.attention.output.LayerNorm.bias",
                    "bert.encoder.layer.1.intermediate.dense.weight", "bert.encoder.layer.1.output.dense.bias",
                    "bert.pooler.dense.weight", "classifier.weight", "classifier.bias"):
            self.assertIn(key, bert)
        xlmr = crossencoder.build_model(crossencoder.PRESETS["tiny-xlmr"], seed=0).state_dict()
        for key in ("roberta.embeddings.token_type_embeddings.weight", "roberta.encoder.layer.0.output.LayerNorm.weight",
                    "classifier.dense.weight", "classifier.out_proj.bias"):
            self.assertIn(key, xlmr)
        self.assertEqual(tuple(xlmr["roberta.embeddings.token_type_embeddings.weight"].shape), (1, 64))
        self.assertFalse(any(k.startswith("roberta.pooler") for k in xlmr))

    def test_loader_accepts_tf_layernorm_names_and_rejects_shape_mismatch(self):
        cfg = crossencoder.PRESETS["tiny-bert"]
        source = crossencoder.build_model(cfg, seed=21)
        state = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
                 for k, v in source.state_dict().items()}
        self.assertIn("bert.embeddings.LayerNorm.gamma", state)
        target = crossencoder.build_model(cfg, seed=22)
        crossencoder.load_hf_state_dict(target, state)
        for k, v in source.state_dict().items():
            torch.testing.assert_close(target.state_dict()[k], v, rtol=0, atol=0)
        state["classifier.weight"] = torch.zeros(2, cfg.hidden_size)
        with self.assertRaisesRegex(crossencoder.CheckpointError, r"classifier.weight: checkpoint \(2, 64\)"):
            crossencoder.load_hf_state_dict(target, state)

    def test_config_task_follows_the_number_of_labels(self):
        one = export_model.config_pbtxt("m", crossencoder.PRESETS["tiny-bert"], export_model.EntryOptions())
        self.assertIn('key: "task"\n  value { string_value: "rerank" }', one)
        self.assertNotIn("score_activation", one)
        two = export_model.config_pbtxt("m", dataclasses.replace(crossencoder.PRESETS["tiny-bert"], num_labels=2),
                                        export_model.EntryOptions())
        self.assertIn('key: "task"\n  value { string_value: "classify" }', two)
        self.assertIn('key: "score_activation"\n  value { string_value: "softmax" }', two)
        self.assertIn("dims: [ 2 ]", two)

    def test_presets_have_the_published_shapes(self):
        p = crossencoder.PRESETS
        self.assertEqual((p["minilm-l6"].num_hidden_layers, p["minilm-l6"].hidden_size, p["minilm-l6"].vocab_size),
                         (6, 384, 30522))
        self.assertEqual((p["bge-reranker-base"].num_hidden_layers, p["bge-reranker-base"].hidden_size,
                          p["bge-reranker-base"].vocab_size), (12, 768, 250002))
        self.assertEqual((p["bge-reranker-large"].num_hidden_layers, p["bge-reranker-large"].hidden_size), (24, 1024))


class ExportRoundTripTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="tide-export-test-")
        cls.repo = os.path.join(cls.tmp.name, "models")
        cls.verify_problem = verify_model_problem()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def setUp(self):
        if self.verify_problem:
            self.fail(self.verify_problem)

    def export_preset(self, preset: str, **extra):
        ref = os.path.join(self.tmp.name, f"{preset}-reference.json")
        args = ["--preset", preset, "--repository", self.repo, "--reference-out", ref, "--verify-cases", "3"]
        for k, v in extra.items():
            args += [f"--{k.replace('_', '-')}", v]
        proc = run_export(*args)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return os.path.join(self.repo, extra.get("name", preset)), ref

    def check_entry(self, entry: str, cfg: crossencoder.CrossEncoderConfig):
        name = os.path.basename(entry)
        self.assertEqual(sorted(os.listdir(entry)), ["1", "config.pbtxt", "tokenizer.json"])
        self.assertEqual(os.listdir(os.path.join(entry, "1")), ["model.onnx"])
        with open(os.path.join(entry, "config.pbtxt"), encoding="utf-8") as f:
            text = f.read()
        self.assertIn(f'name: "{name}"', text)
        self.assertIn('backend: "onnxruntime"', text)
        self.assertIn("max_batch_size: 64", text)
        self.assertIn("max_queue_delay_microseconds: 2000", text)
        self.assertIn("kind: KIND_CPU", text)
        self.assertIn(f"dims: [ {cfg.num_labels} ]", text)
        self.assertEqual(text.count("TYPE_INT64"), 3 if cfg.uses_token_type_ids else 2)
        self.assertEqual('name: "token_type_ids"' in text, cfg.uses_token_type_ids)
        for key, value in (("task", "rerank"), ("tokenizer", "tokenizer.json"), ("max_sequence_length", "128")):
            self.assertIn(f'key: "{key}"\n  value {{ string_value: "{value}" }}', text)

        import onnx
        model = onnx.load(os.path.join(entry, "1", "model.onnx"))
        self.assertEqual([o.version for o in model.opset_import if o.domain in ("", "ai.onnx")], [17])
        inputs = {i.name: i for i in model.graph.input}
        self.assertEqual(sorted(inputs), sorted(export_model.input_names(cfg)))
        for i in inputs.values():
            self.assertEqual(i.type.tensor_type.elem_type, onnx.TensorProto.INT64)
            dims = i.type.tensor_type.shape.dim
            self.assertEqual(len(dims), 2)
            self.assertTrue(all(d.dim_param and not d.dim_value for d in dims), f"{i.name} axes must be dynamic")
        (out,) = model.graph.output
        self.assertEqual(out.name, "logits")
        self.assertEqual(out.type.tensor_type.elem_type, onnx.TensorProto.FLOAT)
        self.assertEqual(out.type.tensor_type.shape.dim[1].dim_value, cfg.num_labels)

    def test_tiny_bert_round_trip_and_perturbed_reference_fails(self):
        entry, ref = self.export_preset("tiny-bert")
        self.check_entry(entry, crossencoder.PRESETS["tiny-bert"])
        model = os.path.join(entry, "1", "model.onnx")
        self.assertEqual(verify(model, ref).returncode, 0)
        with open(ref, encoding="utf-8") as f:
            reference = json.load(f)
        logits = [x for case in reference["cases"] for row in case["logits"] for x in row]
        self.assertGreater(max(logits) - min(logits), 1e-3, "random weights must give distinguishable logits")
        reference["cases"][-1]["logits"][0][0] += 1e-3
        bad = os.path.join(self.tmp.name, "perturbed.json")
        with open(bad, "w", encoding="utf-8") as f:
            json.dump(reference, f)
        self.assertNotEqual(verify(model, bad).returncode, 0, "verify-model must reject logits off by 1e-3")

    def test_int8_flag_writes_a_quantized_sibling_entry(self):
        ref = os.path.join(self.tmp.name, "int8-reference.json")
        proc = run_export("--preset", "tiny-bert", "--name", "tb", "--repository", self.repo, "--reference-out", ref,
                          "--verify-cases", "3", "--int8")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        entry = os.path.join(self.repo, "tb-int8")
        self.assertEqual(sorted(os.listdir(entry)), ["1", "config.pbtxt", "tokenizer.json"])
        with open(os.path.join(entry, "config.pbtxt"), encoding="utf-8") as f:
            text = f.read()
        self.assertIn('name: "tb-int8"', text)
        self.assertNotIn('name: "tb"', text)
        import onnx
        ops = {n.op_type for n in onnx.load(os.path.join(entry, "1", "model.onnx")).graph.node}
        self.assertTrue(ops & {"DynamicQuantizeMatMul", "MatMulInteger"}, f"no INT8 MatMul in {sorted(ops)}")
        fp32_ops = {n.op_type for n in onnx.load(os.path.join(self.repo, "tb", "1", "model.onnx")).graph.node}
        self.assertFalse(fp32_ops & {"DynamicQuantizeMatMul", "MatMulInteger"}, "the FP32 entry must stay FP32")
        # The INT8 model runs in ONNX Runtime and stays near the PyTorch FP32 logits, but not within 1e-4.
        int8_model = os.path.join(entry, "1", "model.onnx")
        self.assertNotEqual(verify(int8_model, ref).returncode, 0, "INT8 logits equal FP32 to 1e-4: not quantized?")
        near = subprocess.run([tide_binary(), "verify-model", "--model", int8_model, "--reference", ref, "--atol", "0.5"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(near.returncode, 0, near.stdout)
        self.assertEqual(sorted(n for n in os.listdir(self.repo) if n.startswith(".")), [],
                         "no staging folders may remain")

    def test_tiny_xlmr_round_trip(self):
        entry, ref = self.export_preset("tiny-xlmr")
        self.check_entry(entry, crossencoder.PRESETS["tiny-xlmr"])
        with open(ref, encoding="utf-8") as f:
            self.assertNotIn("token_type_ids", json.load(f)["cases"][0]["inputs"])
        with open(os.path.join(entry, "tokenizer.json"), encoding="utf-8") as f:
            tok = json.load(f)
        self.assertEqual(tok["post_processor"]["type"], "RobertaProcessing")
        self.assertEqual(tok["model"]["vocab"]["<pad>"], 1)

    def test_given_tokenizer_is_copied_and_reexport_replaces_entry(self):
        given = os.path.join(self.tmp.name, "given-tokenizer.json")
        make_wordpiece_tokenizer.write_tokenizer(given, 500, "bert")
        entry, _ = self.export_preset("tiny-bert", name="tiny-bert-given", tokenizer=given)
        with open(given, "rb") as a, open(os.path.join(entry, "tokenizer.json"), "rb") as b:
            self.assertEqual(a.read(), b.read())
        entry2, _ = self.export_preset("tiny-bert", name="tiny-bert-given", seed="99")
        self.assertEqual(entry, entry2)
        self.assertEqual(sorted(n for n in os.listdir(self.repo) if n.startswith(".")), [],
                         "no staging or backup folders may remain")

    def test_large_model_weights_go_to_one_external_data_file(self):
        # bge-reranker-large is over protobuf's 2 GiB limit; the same path is taken here by
        # lowering the threshold for a tiny model.
        cfg = crossencoder.PRESETS["tiny-xlmr"]
        model = crossencoder.build_model(cfg, seed=4)
        folder = os.path.join(self.tmp.name, "external", "1")
        os.makedirs(folder)
        path = os.path.join(folder, "model.onnx")
        saved = export_model._EXTERNAL_DATA_BYTES
        export_model._EXTERNAL_DATA_BYTES = 0
        try:
            export_model.export_onnx(model, cfg, path)
        finally:
            export_model._EXTERNAL_DATA_BYTES = saved
        self.assertEqual(sorted(os.listdir(folder)), ["model.onnx", "model.onnx.data"])
        self.assertLess(os.path.getsize(path), os.path.getsize(path + ".data"))
        ref = os.path.join(self.tmp.name, "external-reference.json")
        export_model.write_reference(ref, model, cfg, export_model.random_cases(cfg, 8, 2, 40))
        result = verify(path, ref)
        self.assertEqual(result.returncode, 0, result.stdout)

    def test_failed_verification_leaves_repository_untouched(self):
        repo = os.path.join(self.tmp.name, "untouched")
        proc = subprocess.run([sys.executable, os.path.join(TOOLS, "export_model.py"), "--preset", "tiny-bert",
                               "--repository", repo, "--tide-binary", "/bin/false"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("verify-model", proc.stderr)
        self.assertEqual(os.listdir(repo), [])

    def save_hf_checkpoint(self, preset: str, folder: str, seed: int, extra_key: str = None, drop_key: str = None):
        cfg = crossencoder.PRESETS[preset]
        model = crossencoder.build_model(cfg, seed=seed)
        # Trained weights are not near zero: widen them so the comparison below means something.
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(seed)) * 0.05)
        state = dict(model.state_dict())
        prefix = "bert" if cfg.model_type == crossencoder.BERT else "roberta"
        # Older HF versions store this buffer; the loader must accept it.
        state[f"{prefix}.embeddings.position_ids"] = torch.arange(cfg.max_position_embeddings)[None, :]
        if extra_key:
            state[extra_key] = torch.zeros(1)
        if drop_key:
            del state[drop_key]
        os.makedirs(folder)
        torch.save(state, os.path.join(folder, "pytorch_model.bin"))
        with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg.to_hf_dict(), f)
        return model

    def test_hf_checkpoint_export_keeps_the_weights(self):
        for preset in ("tiny-bert", "tiny-xlmr"):
            with self.subTest(preset=preset):
                folder = os.path.join(self.tmp.name, f"hf-{preset}")
                original = self.save_hf_checkpoint(preset, folder, seed=11)
                given = os.path.join(folder, "tokenizer.json")
                make_wordpiece_tokenizer.write_tokenizer(given, 300, "bert" if preset == "tiny-bert" else "xlmr")
                ref = os.path.join(self.tmp.name, f"hf-{preset}-reference.json")
                proc = run_export("--checkpoint", folder, "--repository", self.repo, "--reference-out", ref,
                                  "--verify-cases", "3")
                self.assertEqual(proc.returncode, 0, proc.stderr)
                entry = os.path.join(self.repo, f"hf-{preset}")
                self.check_entry(entry, crossencoder.PRESETS[preset])
                with open(given, "rb") as a, open(os.path.join(entry, "tokenizer.json"), "rb") as b:
                    self.assertEqual(a.read(), b.read())
                cfg = crossencoder.PRESETS[preset]
                with open(ref, encoding="utf-8") as f:
                    cases = json.load(f)["cases"]
                for case in cases:
                    inputs = {k: torch.tensor(v, dtype=torch.int64) for k, v in case["inputs"].items()}
                    expected = export_model.run_model(original, cfg, inputs)
                    torch.testing.assert_close(torch.tensor(case["logits"]), expected, rtol=0, atol=1e-6)
                spread = max(x for c in cases for r in c["logits"] for x in r) - \
                    min(x for c in cases for r in c["logits"] for x in r)
                self.assertGreater(spread, 1e-2)

    def test_checkpoint_with_wrong_keys_is_rejected_with_their_names(self):
        folder = os.path.join(self.tmp.name, "hf-bad")
        self.save_hf_checkpoint("tiny-bert", folder, seed=1, extra_key="bert.encoder.layer.9.output.dense.weight",
                                drop_key="bert.pooler.dense.bias")
        proc = run_export("--checkpoint", folder, "--repository", self.repo)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("missing keys: bert.pooler.dense.bias", proc.stderr)
        self.assertIn("unexpected keys: bert.encoder.layer.9.output.dense.weight", proc.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.repo, "hf-bad")))


class _RunsCodeWhenUnpickled:
    """A pickled object whose unpickling calls open(marker, "w"): what a hostile checkpoint does."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


class UntrustedCheckpointTest(unittest.TestCase):
    """pytorch_model.bin is unpickled with weights_only=True: a file naming code is refused, unrun."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.marker = os.path.join(self.tmp.name, "pwned")

    def tearDown(self):
        self.tmp.cleanup()

    def test_pickle_that_runs_code_is_refused_and_nothing_runs(self):
        for name, save in (("zip", lambda obj, path: torch.save(obj, path)),
                           ("legacy", lambda obj, path: torch.save(obj, path, _use_new_zipfile_serialization=False))):
            with self.subTest(format=name):
                weights = os.path.join(self.tmp.name, f"{name}.bin")
                save({"bert.embeddings.word_embeddings.weight": _RunsCodeWhenUnpickled(self.marker)}, weights)
                with self.assertRaises(crossencoder.CheckpointError) as caught:
                    export_model.load_plain_tensors(weights)
                message = str(caught.exception)
                self.assertIn(weights, message)
                self.assertIn("only plain tensors are accepted", message)
                self.assertIn("needs code to load", message)
                self.assertIn("model.safetensors", message)
                self.assertFalse(os.path.exists(self.marker), "unpickling ran the checkpoint's code")

    def test_plain_state_dict_loads(self):
        weights = os.path.join(self.tmp.name, "plain.bin")
        torch.save({"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)}, weights)
        state = export_model.load_plain_tensors(weights)
        torch.testing.assert_close(state["w"], torch.arange(6, dtype=torch.float32).reshape(2, 3))


if __name__ == "__main__":
    unittest.main(verbosity=2)
