"""The prototype peer: what a research team ships first. FastAPI + uvicorn + PyTorch FP32, a plain
synchronous `def` endpoint (FastAPI runs it in its thread pool), one uvicorn worker.

usage: /usr/bin/python3 bench/peers/prototype_server.py --port PORT [--preset minilm-l6 --seed 20240611
                                                        --tokenizer models/minilm-l6/tokenizer.json]
The model is rebuilt from the export preset and seed with tools/crossencoder.py, so it has the same
weights as the exported entry (models/minilm-l6, or bge-reranker-base from tools/export_model.py
--preset bge-reranker-base with the same --seed); bench/peers/check_scores.py compares its scores
with tide's. BERT presets get input_ids, attention_mask and token_type_ids; XLM-RoBERTa presets
input_ids (padded with the model's pad_token_id, from which the model derives position ids) and
attention_mask, as their ONNX exports do.
POST /rerank {"query", "texts", "raw_scores"?} -> [{"index", "score"}] sorted by score (TEI's shape);
GET /health. Prints the BLAS library PyTorch loaded and "prototype: listening on ..." when ready.
"""
import argparse
import os
import sys
from typing import List

import torch
import uvicorn
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, HERE)
import crossencoder  # noqa: E402
from bert_tokenizer import BertTokenizer  # noqa: E402


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


class RerankRequest(BaseModel):
    query: str
    texts: List[str]
    raw_scores: bool = False


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--preset", default="minilm-l6")
    p.add_argument("--seed", type=int, default=20240611)
    p.add_argument("--tokenizer", default=os.path.join(ROOT, "models", "minilm-l6", "tokenizer.json"))
    p.add_argument("--max-length", type=int, default=None,
                   help="truncate pairs to this many tokens (default: 512, or less where the preset's position "
                        "table is shorter: the max_sequence_length tools/export_model.py writes into config.pbtxt)")
    args = p.parse_args()

    threads = len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    cfg = crossencoder.PRESETS[args.preset]
    model = crossencoder.build_model(cfg, seed=args.seed)
    if args.max_length is None:
        args.max_length = min(512, cfg.max_sequence_length)
    model.eval()
    tokenizer = BertTokenizer(args.tokenizer)
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
        encoded = [tokenizer.encode_pair(req.query, text, args.max_length) for text in req.texts]
        longest = max(len(e["input_ids"]) for e in encoded)
        pad = lambda key, v=0: torch.tensor([e[key] + [v] * (longest - len(e[key])) for e in encoded],  # noqa: E731
                                            dtype=torch.long)
        inputs = [pad("input_ids", cfg.pad_token_id), pad("attention_mask")]
        if cfg.uses_token_type_ids:
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
