#!/usr/bin/env python3
"""Closed-loop rerank clients for the multi-replica tests (bench/replicas/run.sh).

Each of --clients threads keeps one keep-alive connection to --url and sends POST /rerank back to
back until --stop-file exists. Every response is checked: status 200, a JSON list holding each
document index exactly once with a float score. Anything else (another status, a bad body, a
connection error or timeout) is an error; the client then reconnects and goes on.

Writes one line per request to --out: send time (Unix seconds), latency (ms), outcome
("ok" or the error), and prints a summary. Documents per request are --docs, or drawn from
--skew "small:large:share_large" (e.g. 2:48:0.2) for skewed request sizes.
"""
import argparse, http.client, json, os, random, threading, time, urllib.parse

WORDS = ("panda bear bamboo forest china mountain river city paris france tower museum art history "
         "science energy protein cell virus vaccine climate ocean ice carbon solar wind engine car "
         "road train station market price bank money trade law court judge music piano guitar").split()

def make_body(rng, docs, doc_words):
    q = " ".join(rng.choice(WORDS) for _ in range(6))
    texts = [" ".join(rng.choice(WORDS) for _ in range(doc_words)) for _ in range(docs)]
    return json.dumps({"query": q, "texts": texts}).encode()

def check(status, body, docs):
    if status != 200:
        return f"http_{status}"
    try:
        r = json.loads(body)
        idx = sorted(x["index"] for x in r)
        if idx != list(range(docs)) or not all(isinstance(x["score"], float) for x in r):
            return "bad_body"
    except Exception:
        return "bad_json"
    return "ok"

def worker(args, host, port, path, seed, lines, lock):
    rng = random.Random(seed)
    conn = None
    while not os.path.exists(args.stop_file):
        if args.skew:
            small, large, share = args.skew.split(":")
            docs = int(large) if rng.random() < float(share) else int(small)
        else:
            docs = args.docs
        body = make_body(rng, docs, args.doc_words)
        wall, start = time.time(), time.monotonic()
        try:
            if conn is None:
                conn = http.client.HTTPConnection(host, port, timeout=args.timeout)
            conn.request("POST", path, body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            outcome = check(resp.status, data, docs)
            if resp.getheader("Connection", "").lower() == "close":
                conn.close(); conn = None
        except Exception as e:  # connection reset, refused, timeout, ...
            outcome = "conn_" + type(e).__name__
            try:
                conn.close()
            except Exception:
                pass
            conn = None
        end = time.monotonic()
        with lock:
            lines.append(f"{wall:.4f} {1000 * (end - start):.2f} {outcome} {docs}\n")
        if outcome != "ok" and args.backoff_ms > 0:
            time.sleep(args.backoff_ms / 1000)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--docs", type=int, default=8)
    ap.add_argument("--doc-words", type=int, default=24)
    ap.add_argument("--skew", default="")
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--stop-file", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--backoff-ms", type=float, default=10, help="pause after an error (0: none)")
    args = ap.parse_args()
    u = urllib.parse.urlparse(args.url)
    lines, lock = [], threading.Lock()
    threads = [threading.Thread(target=worker, args=(args, u.hostname, u.port, u.path or "/rerank",
                                                     args.seed * 1000 + i, lines, lock), daemon=True)
               for i in range(args.clients)]
    for t in threads: t.start()
    with open(args.out, "w") as f:
        while any(t.is_alive() for t in threads):
            time.sleep(0.5)
            with lock:
                chunk, lines[:] = lines[:], []
            f.writelines(chunk); f.flush()
        f.writelines(lines)

if __name__ == "__main__":
    main()
