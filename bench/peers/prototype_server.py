"""The prototype peer: what a research team ships first. FastAPI + uvicorn + PyTorch FP32, a plain
synchronous `def` endpoint (FastAPI runs it in its thread pool), one uvicorn worker.

usage: /usr/bin/python3 bench/peers/prototype_server.py --port PORT [--preset minilm-l6 --seed 20240611
                                                        --tokenizer models/minilm-l6/tokenizer.json]
The model is rebuilt from the export preset and seed with tools/crossencoder.py, so it has the same
weights as the exported entry (models/minilm-l6, or bge-reranker-base from tools/export_model.py
--preset bge-reranker-base with the same --seed); bench/peers/check_scores.py compares its scores
with tide's. BERT presets get input_ids, attention_mask and token_type_ids; XLM-RoBERTa presets
input_ids (padded with the model's pad_token_id, from which the model derives position ids) and
attention_mask, as their ONNX exports do. Decoder presets (tools/decoder.py: qwen3-reranker-0.6b,
mxbai-rerank-base-v2, ...) rebuild the CausalLM with the seed, reduce its head to the yes/no logit
difference as the export does, render each pair with the entry's prompt_template and
default_instruction (read from --config, the entry's config.pbtxt), tokenize the whole prompt with
bench/peers/bpe_tokenizer.py and score the last real token (right padding); a prompt over
max_sequence_length loses document tokens, as tide's truncation does.
POST /rerank {"query", "texts", "raw_scores"?} -> [{"index", "score"}] sorted by score (TEI's shape);
GET /health. Embedding presets (tools/biencoder.py: all-minilm-l6-v2, bge-base-en-v1.5, ...) serve
POST /embed {"inputs": string | [string], "normalize"?} -> [[float, ...], ...] (TEI's shape) instead:
each text encoded [CLS] text [SEP] (<s> text </s> for XLM-R) truncated at max_sequence_length, the
preset's pooling (in the model, as the export has it), then L2-normalized as the preset says (a
request's "normalize" wins), as tide does. Prints the BLAS library PyTorch loaded and "prototype: listening on ..." when ready.
"""
import argparse
import json
import os
import sys
from typing import List, Optional, Union

import torch
import uvicorn
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, HERE)
import biencoder  # noqa: E402
import crossencoder  # noqa: E402
import decoder  # noqa: E402
from bert_tokenizer import BertTokenizer  # noqa: E402
from bpe_tokenizer import BpeTokenizer  # noqa: E402


def blas_libraries() -> List[str]:
    """Shared libraries mapped into this process that provide BLAS (after a matmul ran)."""
    torch.ones(64, 64) @ torch.ones(64, 64)
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            name = os.path.basename(path)
            if any(k in name for k in ("blas", "mkl", "lapack")):
                libs.add(os.path.realpath(path))
    return sorted(libs)


class EmbedRequest(BaseModel):
    inputs: Union[str, List[str]]
    normalize: Optional[bool] = None


class RerankRequest(BaseModel):
    query: str
    texts: List[str]
    raw_scores: bool = False


def config_parameters(path: str):
    """The string parameters of a config.pbtxt (protobuf text format: C escapes, UTF-8 bytes)."""
    import re
    text = open(path, encoding="utf-8").read()
    out = {}
    for key, value in re.findall(r'key:\s*"([^"]+)"\s*value\s*\{\s*string_value:\s*"((?:[^"\\]|\\.)*)"', text):
        out[key] = value.encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1").decode("utf-8")
    return out


class DecoderPrompts:
    """(query, document) -> token ids of the entry's rendered prompt, at most max_length."""

    def __init__(self, tokenizer_path: str, config_path: str):
        params = config_parameters(config_path)
        self.template = params["prompt_template"]
        self.instruction = params.get("default_instruction", "")
        self.max_length = int(params.get("max_sequence_length", "8192"))
        self.tokenizer = BpeTokenizer(tokenizer_path)

    def fill(self, text: str, **slots) -> str:
        out = text.replace("{{", "\0").replace("}}", "\1")
        for k, v in slots.items():
            out = out.replace("{" + k + "}", v.replace("{", "\2").replace("}", "\3"))
        return out.replace("\0", "{").replace("\1", "}").replace("\2", "{").replace("\3", "}")

    def encode(self, query: str, document: str):
        ids = self.tokenizer.encode(self.fill(self.template, instruction=self.instruction, query=query,
                                              document=document))
        if len(ids) <= self.max_length:
            return ids
        head, tail = self.template.split("{document}", 1)
        head_ids = self.tokenizer.encode(self.fill(head, instruction=self.instruction, query=query))
        tail_ids = self.tokenizer.encode(self.fill(tail))
        room = max(0, self.max_length - len(head_ids) - len(tail_ids))
        return head_ids + self.tokenizer.encode(document)[:room] + tail_ids


def serve_embeddings(args):
    """The embedding prototype: POST /embed with the preset's seeded bi-encoder."""
    cfg = biencoder.PRESETS[args.preset]
    model = biencoder.build_model(cfg, seed=args.seed)
    model.eval()
    max_length = args.max_length or cfg.max_sequence_length
    tokenizer = BertTokenizer(args.tokenizer)
    pad_id = cfg.pad_token_id

    def encode(text: str) -> List[int]:
        # [CLS] text [SEP] and <s> text </s> alike: one start and one end token around the text.
        return [tokenizer.cls_id] + tokenizer.encode_text(text)[:max(0, max_length - 2)] + [tokenizer.sep_id]

    print(f"prototype: torch {torch.__version__}, {torch.get_num_threads()} threads, BLAS "
          f"{', '.join(blas_libraries()) or 'none mapped'}; embeddings ({args.preset}, {cfg.pooling} pooling)",
          flush=True)
    app = FastAPI()

    @app.get("/health")
    def health():
        return {"status": "ok"}

    @app.post("/embed")
    def embed(req: EmbedRequest):
        texts = [req.inputs] if isinstance(req.inputs, str) else req.inputs
        if not texts:
            raise HTTPException(status_code=422, detail="inputs must not be empty")
        encoded = [encode(t) for t in texts]
        longest = max(len(e) for e in encoded)
        ids = torch.tensor([e + [pad_id] * (longest - len(e)) for e in encoded], dtype=torch.long)
        mask = torch.tensor([[1] * len(e) + [0] * (longest - len(e)) for e in encoded], dtype=torch.long)
        with torch.inference_mode():
            vectors = model(ids, mask, torch.zeros_like(ids))
            if cfg.normalize if req.normalize is None else req.normalize:
                vectors = torch.nn.functional.normalize(vectors, dim=1)
        return vectors.tolist()

    print(f"prototype: listening on http://{args.host}:{args.port}", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, workers=1, log_level="warning", access_log=False)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--preset", default="minilm-l6")
    p.add_argument("--seed", type=int, default=20240611)
    p.add_argument("--tokenizer", default=os.path.join(ROOT, "models", "minilm-l6", "tokenizer.json"))
    p.add_argument("--config", help="decoder presets: the entry's config.pbtxt (prompt_template, default_instruction)")
    p.add_argument("--max-length", type=int, default=None,
                   help="truncate pairs to this many tokens (default: 512, or less where the preset's position "
                        "table is shorter: the max_sequence_length tools/export_model.py writes into config.pbtxt)")
    args = p.parse_args()

    threads = len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    if args.preset in biencoder.PRESETS:
        return serve_embeddings(args)
    if args.preset in decoder.PRESETS:
        cfg = decoder.PRESETS[args.preset]
        lm = decoder.build_causal_lm(cfg, seed=args.seed)
        with open(args.tokenizer, encoding="utf-8") as f:
            spec = json.load(f)
        yes, no = decoder.PRESET_RERANK_TOKENS[args.preset]
        model = decoder.yes_no_reranker(lm, decoder.token_id(spec, yes, args.tokenizer),
                                        decoder.token_id(spec, no, args.tokenizer))
        if not args.config:
            sys.exit("prototype: a decoder preset needs --config (the entry's config.pbtxt: its prompt)")
        prompts = DecoderPrompts(args.tokenizer, args.config)
        encode = lambda q, d: {"input_ids": (ids := prompts.encode(q, d)), "attention_mask": [1] * len(ids)}  # noqa: E731
        pad_id, type_ids = 0, False
    else:
        cfg = crossencoder.PRESETS[args.preset]
        model = crossencoder.build_model(cfg, seed=args.seed)
        if args.max_length is None:
            args.max_length = min(512, cfg.max_sequence_length)
        tokenizer = BertTokenizer(args.tokenizer)
        encode = lambda q, d: tokenizer.encode_pair(q, d, args.max_length)  # noqa: E731
        pad_id, type_ids = cfg.pad_token_id, cfg.uses_token_type_ids
    model.eval()
    print(f"prototype: torch {torch.__version__}, {torch.get_num_threads()} threads, BLAS "
          f"{', '.join(blas_libraries()) or 'none mapped'}", flush=True)

    app = FastAPI()

    @app.get("/health")
    def health():
        return {"status": "ok"}

    @app.post("/rerank")
    def rerank(req: RerankRequest):
        if not req.texts:
            raise HTTPException(status_code=422, detail="texts must not be empty")
        encoded = [encode(req.query, text) for text in req.texts]
        longest = max(len(e["input_ids"]) for e in encoded)
        pad = lambda key, v=0: torch.tensor([e[key] + [v] * (longest - len(e[key])) for e in encoded],  # noqa: E731
                                            dtype=torch.long)
        inputs = [pad("input_ids", pad_id), pad("attention_mask")]
        if type_ids:
            inputs.append(pad("token_type_ids"))
        with torch.inference_mode():
            logits = model(*inputs)[:, -1]
            scores = logits if req.raw_scores else torch.sigmoid(logits)
        results = [{"index": i, "score": float(s)} for i, s in enumerate(scores.tolist())]
        results.sort(key=lambda r: -r["score"])
        return results

    print(f"prototype: listening on http://{args.host}:{args.port}", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, workers=1, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
