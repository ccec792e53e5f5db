#!/usr/bin/python3
"""INT8 vs FP32 pairs/s through `tide serve` at saturation (closed loop, same load for both).

Starts one `tide serve` over a repository that holds both entries (e.g. minilm-l6 and
minilm-l6-int8), then drives POST /v1/rerank with `--clients` concurrent keep-alive clients, each
sending one query with `--docs` documents of SciFact-like length (words drawn from a word list,
seeded), alternating the model per round (fp32, int8, fp32, int8, ...) so that background load on a
shared machine hits both alike. Prints per round pairs/s, the mean tokens per pair (from the
responses' usage.total_tokens), how many cores the server process kept busy (from /proc: near
the core count means saturated) and pairs per second of the server's CPU time (what the server
does with the CPU it actually gets: steadier than pairs/s on a loaded machine), then the
INT8/FP32 ratio of the mean rates. `--models A,B,C` serves more entries (alternating in that
order) and `--ratio X/Y` prints more ratios, e.g. the same models before and after a change.
Standard library only (no PyPI here).
"""
import argparse
import http.client
import json
import os
import random
import re
import subprocess
import sys
import threading
import time


def documents(words, rng, n, mean_words):
    out = []
    for _ in range(n):
        k = max(8, int(rng.lognormvariate(0, 0.36) * mean_words))
        out.append(" ".join(rng.choice(words) for _ in range(k)) + ".")
    return out


def cpu_seconds(pid):
    """User + system CPU seconds the process has used (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drive(port, model, bodies, clients, seconds):
    """Closed loop: `clients` connections each send the next request as soon as the last answers.
    Returns (pairs/s, errors, tokens per pair) over the round, including the in-flight tail."""
    done = [0] * clients
    errors = [0] * clients
    tokens = [0] * clients
    stop = time.monotonic() + seconds

    def client(i):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        j = i
        while time.monotonic() < stop:
            body = bodies[j % len(bodies)]
            j += clients
            conn.request("POST", "/v1/rerank", body=body[1], headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            if resp.status == 200:
                done[i] += body[0]
                tokens[i] += json.loads(data).get("usage", {}).get("total_tokens", 0)
            else:
                errors[i] += 1
        conn.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    return sum(done) / elapsed, sum(errors), sum(tokens) / max(1, sum(done))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tide", default="build/tide")
    p.add_argument("--repository", required=True)
    p.add_argument("--fp32", default="minilm-l6")
    p.add_argument("--int8", default="minilm-l6-int8")
    p.add_argument("--models", default="", help="comma-separated entries to alternate (default: --fp32,--int8)")
    p.add_argument("--ratio", action="append", default=[], help="X/Y: also print entry X's rates over entry Y's")
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--docs", type=int, default=16, help="documents per request")
    p.add_argument("--mean-words", type=int, default=150, help="mean words per document (~300 tokens per pair)")
    p.add_argument("--seconds", type=float, default=30, help="per round")
    p.add_argument("--rounds", type=int, default=2, help="rounds per model, alternating")
    p.add_argument("--words", default="/usr/share/dict/words")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()

    rng = random.Random(args.seed)
    with open(args.words, encoding="utf-8", errors="ignore") as f:
        words = [w.strip().lower() for w in f if re.fullmatch(r"[A-Za-z]{2,12}", w.strip())]
    requests = []
    for _ in range(64):
        query = " ".join(rng.choice(words) for _ in range(rng.randint(8, 20))) + "?"
        requests.append((query, documents(words, rng, args.docs, args.mean_words)))

    started = time.monotonic()
    # No deadline (the default is 30 s): a saturated closed loop is measured, not shed.
    server = subprocess.Popen([args.tide, "serve", "--model-repository", args.repository, "--port", "0",
                               "--default-timeout-ms", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        port = None
        for line in server.stdout:
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                port = int(m.group(1))
                break
        if port is None:
            sys.exit("tide serve did not start")
        print(f"tide serve ready after {time.monotonic() - started:.0f} s (loading and warming up both models)", flush=True)
        models = [m for m in args.models.split(",") if m] or [args.fp32, args.int8]
        results = {m: [] for m in models}        # pairs/s per round
        per_cpu = {m: [] for m in models}        # pairs per server CPU-second per round
        for model in models:  # warm-up, not counted
            body = json.dumps({"model": model, "query": requests[0][0], "documents": requests[0][1]})
            drive(port, model, [(args.docs, body)], 1, 0.1)
        errors_total = 0
        for r in range(args.rounds):
            for model in models:
                bodies = [(args.docs, json.dumps({"model": model, "query": q, "documents": d})) for q, d in requests]
                cpu0, t0 = cpu_seconds(server.pid), time.monotonic()
                rate, errors, tokens = drive(port, model, bodies, args.clients, args.seconds)
                elapsed = time.monotonic() - t0
                cpu = cpu_seconds(server.pid) - cpu0
                cores = cpu / elapsed
                results[model].append(rate)
                per_cpu[model].append(rate * elapsed / cpu if cpu > 0 else 0.0)
                errors_total += errors
                print(f"round {r + 1} {model}: {rate:.1f} pairs/s, {tokens:.0f} tokens per pair, "
                      f"server busy {cores:.2f} of {os.cpu_count()} cores, {per_cpu[model][-1]:.2f} pairs per "
                      f"server CPU-s ({errors} errors)", flush=True)
        invalid = f" ({errors_total} errors: the ratio is not valid)" if errors_total else ""
        mean = {m: sum(v) / len(v) for m, v in results.items()}
        mean_cpu = {m: sum(v) / len(v) for m, v in per_cpu.items()}
        for m in models:
            print(f"{m}: {mean[m]:.1f} pairs/s, {mean_cpu[m]:.2f} pairs per server CPU-s")
        ratios = list(args.ratio)
        if args.fp32 in results and args.int8 in results:
            print(f"fp32 {mean[args.fp32]:.1f} pairs/s, int8 {mean[args.int8]:.1f} pairs/s, "
                  f"int8/fp32 = {mean[args.int8] / mean[args.fp32]:.2f}x" + invalid)
            ratios.insert(0, f"{args.int8}/{args.fp32}")
        for ratio in ratios:
            x, y = ratio.split("/", 1)
            if x not in results or y not in results:
                sys.exit(f"--ratio {ratio}: both entries must be among --models")
            print(f"{x}/{y} = {mean[x] / mean[y]:.2f}x pairs/s, {mean_cpu[x] / mean_cpu[y]:.2f}x pairs per server CPU-s"
                  + invalid)
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
