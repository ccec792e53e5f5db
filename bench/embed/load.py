#!/usr/bin/python3
"""Embedding load against a running tide and the PyTorch reference in this process.

  load.py URL PRESET DURATION_S CONCURRENCY

Two workloads: batches of 32 short texts (a document-indexing client) and single queries, each
closed loop at CONCURRENCY clients for DURATION_S against POST URL/embed; then the same batches
through the PyTorch model of the same preset and seed (tools/biencoder.py, what a prototype
server would run) on the token ids tide's own /tokenize gives, for DURATION_S, with TORCH_THREADS
torch threads (default 1: on the shared 2-core machine, 2 threads measured 2.5x slower than 1 per
batch of 32 under load, OpenMP's threads waiting on each other). Prints one line per run: texts/s, p50 and p99 latency (ms), and
the ratio tide / PyTorch of each workload's texts/s.
"""

import json
import os
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))

import torch  # noqa: E402

import biencoder  # noqa: E402

WORDS = ("the river flows past a quiet town near green hills where pandas eat bamboo and people walk "
         "along old roads to markets full of fruit bread fish and stories").split()


def text(i: int) -> str:
    n = 8 + i % 9  # 8..16 words: short texts
    return " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(n))


def post(url: str, body) -> bytes:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return r.read()


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100.0 * len(values)))] if values else float("nan")


def closed_loop(url: str, batch: int, duration: float, concurrency: int):
    latencies, lock, stop = [], threading.Lock(), time.monotonic() + duration

    def client(c: int):
        i = c * 100000
        while time.monotonic() < stop:
            body = {"inputs": [text(i + k) for k in range(batch)]}
            t0 = time.monotonic()
            post(url + "/embed", body)
            with lock:
                latencies.append(time.monotonic() - t0)
            i += batch

    start = time.monotonic()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    ms = [x * 1000 for x in latencies]
    return len(latencies) * batch / elapsed, percentile(ms, 50), percentile(ms, 99)


def reference(url: str, preset: str, batch: int, duration: float):
    cfg = biencoder.PRESETS[preset]
    model = biencoder.build_model(cfg, seed=int(os.environ.get("SEED", "20240611")))
    torch.set_num_threads(int(os.environ.get("TORCH_THREADS", "1")))
    texts = [text(k) for k in range(batch)]
    rows = [[t["id"] for t in row] for row in json.loads(post(url + "/tokenize", {"inputs": texts}))]
    seq = max(len(r) for r in rows)
    ids = torch.zeros(batch, seq, dtype=torch.int64)
    mask = torch.zeros(batch, seq, dtype=torch.int64)
    for b, r in enumerate(rows):
        ids[b, :len(r)] = torch.tensor(r)
        mask[b, :len(r)] = 1
    latencies, stop = [], time.monotonic() + duration
    start = time.monotonic()
    with torch.no_grad():
        while time.monotonic() < stop:
            t0 = time.monotonic()
            torch.nn.functional.normalize(model(ids, mask, torch.zeros_like(ids)), dim=1)
            latencies.append(time.monotonic() - t0)
    elapsed = time.monotonic() - start
    ms = [x * 1000 for x in latencies]
    return len(latencies) * batch / elapsed, percentile(ms, 50), percentile(ms, 99)


def main() -> int:
    url, preset, duration, concurrency = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    closed_loop(url, 32, 2.0, concurrency)  # warm-up
    results = {}
    print("# run                      texts/s   p50_ms   p99_ms")
    for name, batch in (("batch32", 32), ("single", 1)):
        tps, p50, p99 = closed_loop(url, batch, duration, concurrency)
        results[name] = tps
        print(f"tide {name:<8} c={concurrency:<3}      {tps:9.1f} {p50:8.1f} {p99:8.1f}", flush=True)
        ref_tps, ref50, ref99 = reference(url, preset, batch, duration)
        print(f"pytorch {name:<8} in-process  {ref_tps:9.1f} {ref50:8.1f} {ref99:8.1f}", flush=True)
        print(f"ratio tide/pytorch {name}: texts/s {tps / ref_tps:.3g}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
