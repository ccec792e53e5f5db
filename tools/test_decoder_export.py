#!/usr/bin/python3
"""Tests of the decoder-only reranker export (tools/decoder.py, tools/export_model.py).

Run: /usr/bin/python3 tools/test_decoder_export.py  (from the repository root; registered with CTest
as tools_decoder_export). The model tests need only PyTorch; the export tests also need the tide
binary ($TIDE_BINARY, else $TIDE_BINARY_DIR/tide, else build/tide) with `verify-model` (they fail
without it) and the real Qwen3 tokenizer.json in ../shared/assets/tokenizers/qwen3 (they skip,
saying so, when it is absent).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest
from typing import Dict

TOOLS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TOOLS)
sys.path.insert(0, TOOLS)

import torch  # noqa: E402

import crossencoder  # noqa: E402
import decoder  # noqa: E402
import export_model  # noqa: E402
import test_safetensors  # noqa: E402
import test_export  # noqa: E402
from test_export import verify, verify_model_problem  # noqa: E402

QWEN3_TOKENIZER = os.path.join("..", "shared", "assets", "tokenizers", "qwen3", "tokenizer.json")
# Folder tests use a vocabulary just large enough for the Qwen3 tokenizer's "yes" (9693): fast.
SMALL_VOCAB = 10000


def qwen3_tokenizer() -> str:
    return os.path.join(ROOT, QWEN3_TOKENIZER)


def run_export(*args: str) -> subprocess.CompletedProcess:
    return test_export.run_export("--quiet", *args)


def small(preset: str, **changes) -> decoder.DecoderConfig:
    return dataclasses.replace(decoder.PRESETS[preset], vocab_size=SMALL_VOCAB, **changes)


def widen(model: torch.nn.Module, seed: int) -> None:
    """Perturbs every weight, so a loader that drops or swaps one changes the output."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.02)


def write_hf_folder(folder: str, model: torch.nn.Module, cfg: decoder.DecoderConfig, tokenizer: str = None,
                    shards: int = 1, extra: Dict[str, torch.Tensor] = None) -> None:
    """An HF checkpoint folder: config.json, model.safetensors (or shards + index), tokenizer.json."""
    os.makedirs(folder)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    state.update(extra or {})
    if shards == 1:
        test_safetensors.write_safetensors(os.path.join(folder, "model.safetensors"), state)
    else:
        test_safetensors.write_sharded(folder, state, shards)
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg.to_hf_dict(), f)
    if tokenizer:
        with open(tokenizer, "rb") as src, open(os.path.join(folder, "tokenizer.json"), "wb") as dst:
            dst.write(src.read())


# ---- an independent reference: one unpadded row, written the plain way --------------------------

def naive_hidden(state: Dict[str, torch.Tensor], cfg: decoder.DecoderConfig, ids: torch.Tensor) -> torch.Tensor:
    """The final-norm hidden state of the last token of ONE unpadded sequence [n], straight from an
    HF state dict: positions 0..n-1, a triangular mask, K/V heads repeated per query head."""
    def rms(x, w):
        return w * (x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + cfg.rms_norm_eps))

    def linear(x, name):
        y = x @ state[name + ".weight"].t()
        return y + state[name + ".bias"] if name + ".bias" in state else y

    n, d = ids.shape[0], cfg.head_dim
    half = d // 2
    inv = [1.0 / (cfg.rope_theta ** (2 * i / d)) for i in range(half)]
    angles = torch.tensor([[p * f for f in inv] for p in range(n)], dtype=torch.float64).to(torch.float32)
    cos, sin = torch.cos(angles), torch.sin(angles)

    def rope(x):  # x [n, d]: rotate pairs (i, i + d/2)
        a, b = x[:, :half], x[:, half:]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)

    x = state["model.embed_tokens.weight"][ids]
    group = cfg.num_attention_heads // cfg.num_key_value_heads
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        h = rms(x, state[p + "input_layernorm.weight"])
        q = linear(h, p + "self_attn.q_proj").view(n, cfg.num_attention_heads, d)
        k = linear(h, p + "self_attn.k_proj").view(n, cfg.num_key_value_heads, d)
        v = linear(h, p + "self_attn.v_proj").view(n, cfg.num_key_value_heads, d)
        heads = []
        for head in range(cfg.num_attention_heads):
            qh, kh, vh = q[:, head], k[:, head // group], v[:, head // group]
            if cfg.family == decoder.QWEN3:
                qh = rms(qh, state[p + "self_attn.q_norm.weight"])
                kh = rms(kh, state[p + "self_attn.k_norm.weight"])
            scores = rope(qh) @ rope(kh).t() / math.sqrt(d)
            scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
            heads.append(torch.softmax(scores, dim=-1) @ vh)
        x = x + linear(torch.cat(heads, dim=-1), p + "self_attn.o_proj")
        h = rms(x, state[p + "post_attention_layernorm.weight"])
        gate, up = linear(h, p + "mlp.gate_proj"), linear(h, p + "mlp.up_proj")
        x = x + linear(gate * torch.sigmoid(gate) * up, p + "mlp.down_proj")
    return rms(x[-1], state["model.norm.weight"])


def random_batch(cfg: decoder.DecoderConfig, lengths, seed: int, left: bool = False):
    g = torch.Generator().manual_seed(seed)
    seq = max(lengths)
    ids = torch.full((len(lengths), seq), 7, dtype=torch.int64)  # padding ids are arbitrary: masked
    mask = torch.zeros((len(lengths), seq), dtype=torch.int64)
    for row, n in enumerate(lengths):
        span = slice(seq - n, seq) if left else slice(0, n)
        ids[row, span] = torch.randint(0, cfg.vocab_size, (n,), generator=g)
        mask[row, span] = 1
    return ids, mask


class DecoderModelTest(unittest.TestCase):
    def check_against_naive(self, preset: str, attention_bias: bool = False):
        cfg = small(preset, attention_bias=attention_bias)
        lm = decoder.build_causal_lm(cfg, seed=5)
        model = decoder.yes_no_reranker(lm, 11, 12)
        state = dict(lm.state_dict())
        head = lm.head_weight()
        checked = 0
        for left in (False, True):
            ids, mask = random_batch(cfg, [9, 1, 23, 16], seed=6 + left, left=left)
            with torch.no_grad():
                batch = model(ids, mask)
                for row in range(ids.shape[0]):
                    real = ids[row][mask[row].bool()]
                    h = naive_hidden(state, cfg, real)
                    want = (head[11] - head[12]) @ h
                    self.assertLessEqual(abs(float(batch[row, 0]) - float(want)), 1e-5, f"{preset} row {row}")
                    alone = model(real[None, :], torch.ones(1, real.shape[0], dtype=torch.int64))
                    self.assertLessEqual(abs(float(alone[0, 0]) - float(batch[row, 0])), 1e-5)
                    checked += 1
        self.assertEqual(checked, 8)
        spread = float(batch.max() - batch.min())
        self.assertGreater(spread, 1e-3, "random weights must give distinguishable scores")

    def test_qwen3_batch_matches_a_naive_per_row_reference(self):
        self.check_against_naive("qwen3-tiny")

    def test_qwen3_with_attention_bias_matches_the_naive_reference(self):
        self.check_against_naive("qwen3-tiny", attention_bias=True)

    def test_qwen2_batch_matches_a_naive_per_row_reference(self):
        self.check_against_naive("qwen2-tiny")

    def test_yes_no_head_is_the_two_way_softmax_of_the_full_lm_head(self):
        for tie in (True, False):
            with self.subTest(tie_word_embeddings=tie):
                cfg = small("qwen3-tiny", tie_word_embeddings=tie)
                lm = decoder.build_causal_lm(cfg, seed=8)
                widen(lm, 9)
                yes, no = 9693, 2152
                reranker = decoder.yes_no_reranker(lm, yes, no)
                ids, mask = random_batch(cfg, [5, 12, 3], seed=10)
                with torch.no_grad():
                    full = lm(ids, mask)  # [b, vocab] at the last real token
                    one = reranker(ids, mask)
                self.assertEqual(tuple(full.shape), (3, SMALL_VOCAB))
                self.assertEqual(tuple(one.shape), (3, 1))
                two_way = torch.softmax(full[:, [no, yes]], dim=-1)[:, 1]
                torch.testing.assert_close(torch.sigmoid(one[:, 0]), two_way, rtol=0, atol=1e-6)
                self.assertFalse(any(p.shape[0] == SMALL_VOCAB for n, p in reranker.named_parameters()
                                     if n != "model.embed_tokens.weight"), "the reranker must not hold the LM head")

    def test_parameter_names_are_hf_names(self):
        qwen3 = decoder.build_causal_lm(decoder.PRESETS["qwen3-tiny"], seed=0).state_dict()
        for key in ("model.embed_tokens.weight", "model.norm.weight", "model.layers.0.input_layernorm.weight",
                    "model.layers.1.post_attention_layernorm.weight", "model.layers.0.self_attn.q_proj.weight",
                    "model.layers.0.self_attn.k_norm.weight", "model.layers.0.self_attn.q_norm.weight",
                    "model.layers.1.self_attn.o_proj.weight", "model.layers.1.mlp.gate_proj.weight",
                    "model.layers.1.mlp.up_proj.weight", "model.layers.1.mlp.down_proj.weight"):
            self.assertIn(key, qwen3)
        self.assertNotIn("lm_head.weight", qwen3, "tied embeddings: no separate head")
        self.assertNotIn("model.layers.0.self_attn.q_proj.bias", qwen3)
        self.assertEqual(tuple(qwen3["model.layers.0.self_attn.k_proj.weight"].shape), (2 * 32, 64))
        self.assertEqual(tuple(qwen3["model.layers.0.self_attn.q_norm.weight"].shape), (32,))
        qwen2 = decoder.build_reranker(decoder.PRESETS["qwen2-tiny"], seed=0).state_dict()
        self.assertIn("model.layers.0.self_attn.q_proj.bias", qwen2)
        self.assertNotIn("model.layers.0.self_attn.o_proj.bias", qwen2)
        self.assertNotIn("model.layers.0.self_attn.q_norm.weight", qwen2)
        self.assertEqual(tuple(qwen2["score.weight"].shape), (1, 64))
        untied = decoder.build_causal_lm(dataclasses.replace(decoder.PRESETS["qwen3-tiny"], tie_word_embeddings=False))
        self.assertIn("lm_head.weight", untied.state_dict())

    def test_state_dict_loading_is_strict(self):
        cfg = small("qwen3-tiny")
        source = decoder.build_causal_lm(cfg, seed=1)
        widen(source, 2)
        state = dict(source.state_dict())
        # Accepted extras: a tied checkpoint's lm_head copy and the rotary buffer some versions store.
        state["lm_head.weight"] = state["model.embed_tokens.weight"].clone()
        state["model.rotary_emb.inv_freq"] = torch.zeros(16)
        target = decoder.build_causal_lm(cfg, seed=3)
        decoder.load_hf_state_dict(target, {k: v.to(torch.bfloat16) if k.endswith("norm.weight") else v
                                            for k, v in state.items()})
        for k, v in source.state_dict().items():
            atol = 1e-2 if k.endswith("norm.weight") else 0
            torch.testing.assert_close(target.state_dict()[k], v, rtol=0, atol=atol)
        bad = dict(state)
        del bad["model.layers.1.self_attn.k_norm.weight"]
        bad["model.layers.2.mlp.up_proj.weight"] = torch.zeros(1)
        bad["model.norm.weight"] = torch.zeros(3)
        with self.assertRaises(crossencoder.CheckpointError) as caught:
            decoder.load_hf_state_dict(target, bad)
        message = str(caught.exception)
        self.assertIn("missing keys: model.layers.1.self_attn.k_norm.weight", message)
        self.assertIn("unexpected keys: model.layers.2.mlp.up_proj.weight", message)
        self.assertIn("model.norm.weight: checkpoint (3,) vs model (64,)", message)
        # A Qwen2 checkpoint does not load into a Qwen3 model (no q_norm, extra biases).
        qwen2 = decoder.build_causal_lm(small("qwen2-tiny", head_dim=32), seed=1).state_dict()
        with self.assertRaisesRegex(crossencoder.CheckpointError, r"missing keys: .*q_norm.*unexpected keys: .*bias"):
            decoder.load_hf_state_dict(target, qwen2)

    def test_config_from_hf_dict(self):
        qwen3_reranker = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151669,
                          "hidden_size": 1024, "num_hidden_layers": 28, "num_attention_heads": 16,
                          "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 3072,
                          "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "rope_theta": 1000000,
                          "rope_scaling": None, "tie_word_embeddings": True, "hidden_act": "silu",
                          "attention_bias": False, "use_sliding_window": False}
        cfg = decoder.DecoderConfig.from_hf_dict(qwen3_reranker)
        self.assertEqual((cfg.family, cfg.kind, cfg.head_dim, cfg.num_key_value_heads, cfg.vocab_size),
                         (decoder.QWEN3, decoder.CAUSAL_LM, 128, 8, 151669))
        self.assertEqual(decoder.DecoderConfig.from_hf_dict(cfg.to_hf_dict()), cfg)
        mxbai = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
                 "num_attention_heads": 14, "num_key_value_heads": 2, "num_hidden_layers": 24,
                 "intermediate_size": 4864, "tie_word_embeddings": True, "rope_theta": 1000000.0}
        cfg = decoder.DecoderConfig.from_hf_dict(mxbai)
        self.assertEqual((cfg.family, cfg.head_dim), (decoder.QWEN2, 64))
        p = decoder.PRESETS
        self.assertEqual((p["mxbai-rerank-base-v2"].hidden_size, p["mxbai-rerank-base-v2"].num_hidden_layers,
                          p["mxbai-rerank-base-v2"].head_dim), (896, 24, 64))
        self.assertEqual((p["qwen3-reranker-0.6b"].num_hidden_layers, p["qwen3-reranker-0.6b"].hidden_size,
                          p["qwen3-reranker-0.6b"].num_attention_heads, p["qwen3-reranker-0.6b"].intermediate_size),
                         (28, 1024, 16, 3072))
        for changes, message in (({"architectures": ["LlamaForCausalLM"], "model_type": "llama"},
                                  "LlamaForCausalLM.*is not a supported decoder"),
                                 ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "rope_scaling"),
                                 ({"use_sliding_window": True}, "use_sliding_window"),
                                 ({"hidden_act": "gelu"}, "hidden_act"),
                                 ({"num_key_value_heads": 5}, "not a multiple of num_key_value_heads")):
            with self.subTest(changes=changes):
                with self.assertRaisesRegex(crossencoder.CheckpointError, message):
                    decoder.DecoderConfig.from_hf_dict({**qwen3_reranker, **changes})

    def test_rerank_token_ids_from_the_real_qwen3_tokenizer(self):
        if not os.path.isfile(qwen3_tokenizer()):
            self.skipTest(f"{QWEN3_TOKENIZER} not found (shared assets absent)")
        with open(qwen3_tokenizer(), encoding="utf-8") as f:
            tok = json.load(f)
        for text, want in (("yes", 9693), ("no", 2152), ("1", 16), ("0", 15), (" yes", 9834),
                           ("<|im_end|>", 151645)):
            self.assertEqual(decoder.token_id(tok, text, "tokenizer.json"), want, text)
        for text in ("yes no", "Rerankerzzqx", ""):
            with self.assertRaisesRegex(crossencoder.CheckpointError, f"the rerank token {text!r} is not one token"):
                decoder.token_id(tok, text, "tokenizer.json")


class PromptParameterTest(unittest.TestCase):
    def test_qwen3_template_is_the_model_cards_format(self):
        # Qwen3-Reranker's model card: prefix + "<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {doc}" + suffix.
        prefix = ("<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
                  "Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n")
        suffix = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
        template = export_model.QWEN3_RERANKER_TEMPLATE
        self.assertEqual(template, prefix + "<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}" + suffix)
        self.assertEqual(export_model.QWEN3_RERANKER_INSTRUCTION,
                         "Given a web search query, retrieve relevant passages that answer the query")
        for slot in ("{instruction}", "{query}", "{document}"):
            self.assertEqual(template.count(slot), 1)
        mxbai = export_model.MXBAI_RERANK_V2_TEMPLATE
        self.assertEqual((mxbai.count("{query}"), mxbai.count("{document}"), mxbai.count("{instruction}")), (1, 1, 0))
        self.assertTrue(mxbai.endswith("\nRelevance:<|im_end|>\n<|im_start|>assistant\n"))

    def test_config_pbtxt_strings_unescape_to_the_parameters(self):
        from google.protobuf import text_encoding  # protobuf's own text-format unescaping
        for family, preset in ((decoder.QWEN3, "qwen3-tiny"), (decoder.QWEN2, "qwen2-tiny")):
            cfg = decoder.PRESETS[preset]
            text = export_model.decoder_config_pbtxt("m", cfg, export_model.EntryOptions())
            params = {}
            for key, literal in __import__("re").findall(r'key: "(\w+)"\n  value \{ string_value: "((?:[^"\\]|\\.)*)" \}',
                                                         text):
                params[key] = text_encoding.CUnescape(literal).decode("utf-8")
            want = dict(export_model.decoder_prompt(cfg))
            self.assertEqual(params["prompt_template"], want["prompt_template"], family)
            self.assertEqual(params.get("default_instruction"), want.get("default_instruction"), family)
            self.assertEqual((params["task"], params["score_activation"], params["max_sequence_length"]),
                             ("rerank", "sigmoid", "8192"))
            self.assertIn("dims: [ 1 ]", text)
        odd = "a\\b\"c\nd\te\x01f é"
        self.assertEqual(text_encoding.CUnescape(export_model.pbtxt_string(odd)[1:-1]).decode("utf-8"), odd)


class DecoderExportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="tide-decoder-export-test-")
        cls.repo = os.path.join(cls.tmp.name, "models")
        cls.verify_problem = verify_model_problem()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def setUp(self):
        if self.verify_problem:
            self.fail(self.verify_problem)
        if not os.path.isfile(qwen3_tokenizer()):
            self.skipTest(f"{QWEN3_TOKENIZER} not found (shared assets absent)")

    def read_reference(self, path: str):
        with open(path, encoding="utf-8") as f:
            return json.load(f)["cases"]

    def test_tiny_presets_export_and_verify(self):
        import onnx
        for preset in ("qwen3-tiny", "qwen2-tiny"):
            with self.subTest(preset=preset):
                ref = os.path.join(self.tmp.name, f"{preset}.json")
                proc = run_export("--preset", preset, "--repository", self.repo, "--tokenizer", qwen3_tokenizer(),
                                  "--reference-out", ref, "--verify-cases", "3", "--verify-max-length", "40")
                self.assertEqual(proc.returncode, 0, proc.stderr)
                entry = os.path.join(self.repo, preset)
                self.assertEqual(sorted(os.listdir(entry)), ["1", "config.pbtxt", "tokenizer.json"])
                with open(os.path.join(entry, "config.pbtxt"), encoding="utf-8") as f:
                    text = f.read()
                for key, value in (("task", "rerank"), ("score_activation", "sigmoid"),
                                   ("max_sequence_length", "8192"), ("tokenizer", "tokenizer.json")):
                    self.assertIn(f'key: "{key}"\n  value {{ string_value: "{value}" }}', text)
                self.assertIn('key: "prompt_template"', text)
                # Two small warm-up shapes, not every bucket up to 8192 tokens (half an hour for 0.6B).
                self.assertEqual(text.count('name: "prefill_'), len(export_model.DECODER_WARMUP_SHAPES))
                self.assertEqual('key: "default_instruction"' in text, preset == "qwen3-tiny")
                model = onnx.load(os.path.join(entry, "1", "model.onnx"))
                self.assertEqual(sorted(i.name for i in model.graph.input), ["attention_mask", "input_ids"])
                for i in model.graph.input:
                    self.assertEqual(i.type.tensor_type.elem_type, onnx.TensorProto.INT64)
                    self.assertTrue(all(d.dim_param for d in i.type.tensor_type.shape.dim), i.name)
                (out,) = model.graph.output
                self.assertEqual((out.name, out.type.tensor_type.elem_type), ("logits", onnx.TensorProto.FLOAT))
                self.assertEqual(out.type.tensor_type.shape.dim[1].dim_value, 1)
                # No [*, vocab] projection in the graph: the only vocabulary-sized tensor is the embedding.
                vocab_sized = [t.name for t in model.graph.initializer if vocab_sized_dims(t)]
                self.assertEqual(len(vocab_sized), 1, vocab_sized)
                cases = self.read_reference(ref)
                padded = sum(1 for c in cases for row in c["inputs"]["attention_mask"] if 0 in row)
                self.assertGreater(padded, 0, "the reference must contain padded rows")
                # A perturbed reference fails: the check compares something.
                cases[-1]["logits"][0][0] += 1e-3
                bad = os.path.join(self.tmp.name, f"{preset}-bad.json")
                with open(bad, "w", encoding="utf-8") as f:
                    json.dump({"cases": cases}, f)
                self.assertNotEqual(verify(os.path.join(entry, "1", "model.onnx"), bad).returncode, 0)

    def test_causal_lm_folder_needs_task_rerank_then_keeps_its_weights(self):
        cfg = small("qwen3-tiny", tie_word_embeddings=False)
        lm = decoder.build_causal_lm(cfg, seed=21)
        widen(lm, 22)
        folder = os.path.join(self.tmp.name, "qwen3-causal")
        write_hf_folder(folder, lm, cfg, qwen3_tokenizer(), shards=2)
        proc = run_export("--checkpoint", folder, "--repository", self.repo)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("Qwen3ForCausalLM is a causal language model", proc.stderr)
        self.assertIn("pass --task rerank", proc.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.repo, "qwen3-causal")))

        ref = os.path.join(self.tmp.name, "qwen3-causal.json")
        proc = run_export("--checkpoint", folder, "--repository", self.repo, "--task", "rerank", "--reference-out", ref,
                          "--verify-cases", "3", "--verify-max-length", "40")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        full_head = lm.lm_head.weight.detach()
        for case in self.read_reference(ref):
            ids = torch.tensor(case["inputs"]["input_ids"])
            mask = torch.tensor(case["inputs"]["attention_mask"])
            with torch.no_grad():
                want = lm(ids, mask)[:, 9693] - lm(ids, mask)[:, 2152]
            torch.testing.assert_close(torch.tensor(case["logits"])[:, 0], want, rtol=0, atol=1e-5)
        self.assertTrue(torch.any(full_head[9693] != lm.model.embed_tokens.weight[9693]), "untied head must be used")

        # Other tokens: mxbai-rerank-v2 style "1"/"0"; and a text that is not one token is named.
        ref10 = os.path.join(self.tmp.name, "qwen3-causal-10.json")
        proc = run_export("--checkpoint", folder, "--repository", self.repo, "--name", "q10", "--task", "rerank",
                          "--rerank-tokens", "1,0", "--reference-out", ref10, "--verify-cases", "1")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        case = self.read_reference(ref10)[0]
        with torch.no_grad():
            full = lm(torch.tensor(case["inputs"]["input_ids"]), torch.tensor(case["inputs"]["attention_mask"]))
        torch.testing.assert_close(torch.tensor(case["logits"])[:, 0], full[:, 16] - full[:, 15], rtol=0, atol=1e-5)
        proc = run_export("--checkpoint", folder, "--repository", self.repo, "--name", "bad", "--task", "rerank",
                          "--rerank-tokens", "Rerankerzzqx,no")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("the rerank token 'Rerankerzzqx' is not one token", proc.stderr)

    def test_sequence_classification_folder_needs_no_flag(self):
        cfg = small("qwen2-tiny", kind=decoder.SEQUENCE_CLASSIFICATION)
        model = decoder.build_reranker(cfg, seed=31)
        widen(model, 32)
        folder = os.path.join(self.tmp.name, "qwen2-seq-cls")
        # HF's seq-cls config.json of mxbai-rerank-base-v2-seq lists two labels; the head has one row.
        write_hf_folder(folder, model, cfg, qwen3_tokenizer())
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
            hf = json.load(f)
        hf.pop("num_labels")
        hf["id2label"] = {"0": "0", "1": "1"}
        with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
            json.dump(hf, f)
        ref = os.path.join(self.tmp.name, "qwen2-seq-cls.json")
        proc = run_export("--checkpoint", folder, "--repository", self.repo, "--reference-out", ref,
                          "--verify-cases", "3", "--verify-max-length", "40")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        for case in self.read_reference(ref):
            with torch.no_grad():
                want = model(torch.tensor(case["inputs"]["input_ids"]), torch.tensor(case["inputs"]["attention_mask"]))
            torch.testing.assert_close(torch.tensor(case["logits"]), want, rtol=0, atol=1e-5)
        proc = run_export("--checkpoint", folder, "--repository", self.repo, "--name", "x", "--rerank-tokens", "yes,no")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("--rerank-tokens is for a CausalLM folder", proc.stderr)

    def test_refusals(self):
        llama = os.path.join(self.tmp.name, "llama")
        os.makedirs(llama)
        with open(os.path.join(llama, "config.json"), "w", encoding="utf-8") as f:
            json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}, f)
        test_safetensors.write_safetensors(os.path.join(llama, "model.safetensors"), {"w": torch.zeros(2)})
        proc = run_export("--checkpoint", llama, "--repository", self.repo, "--task", "rerank")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("['LlamaForCausalLM'] (model_type 'llama') is not a supported decoder", proc.stderr)
        self.assertIn("Qwen3ForCausalLM", proc.stderr)

        proc = run_export("--preset", "qwen3-tiny", "--repository", self.repo, "--name", "no-tokenizer")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("--preset qwen3-tiny needs --tokenizer", proc.stderr)
        self.assertIn(QWEN3_TOKENIZER.replace(os.sep, "/"), proc.stderr)

        proc = run_export("--preset", "tiny-bert", "--repository", self.repo, "--name", "bert-tokens",
                          "--rerank-tokens", "yes,no")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("--rerank-tokens is for a decoder CausalLM folder", proc.stderr)
        self.assertEqual(sorted(n for n in os.listdir(self.repo) if n in ("no-tokenizer", "bert-tokens", "llama")), [])

    def test_large_decoder_weights_go_to_one_external_data_file(self):
        cfg = small("qwen3-tiny")
        model = decoder.yes_no_reranker(decoder.build_causal_lm(cfg, seed=41), 9693, 2152)
        folder = os.path.join(self.tmp.name, "external", "1")
        os.makedirs(folder)
        path = os.path.join(folder, "model.onnx")
        saved = export_model._EXTERNAL_DATA_BYTES
        export_model._EXTERNAL_DATA_BYTES = 0
        try:
            export_model.export_onnx(model, model.config, path)
        finally:
            export_model._EXTERNAL_DATA_BYTES = saved
        self.assertEqual(sorted(os.listdir(folder)), ["model.onnx", "model.onnx.data"])
        ref = os.path.join(self.tmp.name, "external.json")
        export_model.write_reference(ref, model, model.config, export_model.random_cases(model.config, 8, 2, 30))
        result = verify(path, ref)
        self.assertEqual(result.returncode, 0, result.stdout)


def vocab_sized_dims(tensor) -> bool:
    return any(d in (SMALL_VOCAB, 151936) for d in tensor.dims)


if __name__ == "__main__":
    unittest.main(verbosity=2)
