#!/usr/bin/python3
"""Burst load for bench/memory/burst.sh: CLIENTS threads send one kind of heavy request for SECONDS
seconds (each on its own keep-alive connection; after a 429/503 a client waits Retry-After) while the server's VmRSS is sampled every 0.5 s; then
RSS is sampled for SETTLE seconds more. Prints one JSON object: statuses, rss samples (MiB)."""
import http.client, json, sys, threading, time

def body_for(kind):
    if kind == "bytes2m":  # 2,000,000 one-byte strings: 8 MB
        data = "[" + ",".join(['"a"'] * 2000000) + "]"
        return "/v2/models/m/infer", '{"inputs":[{"name":"text","shape":[2000000],"datatype":"BYTES","data":%s}]}' % data
    if kind == "rerank100":  # valid and heavy: 100 documents of ~75 KB (7.5 MB; 100 rows to score)
        words = ["panda", "bamboo", "forest", "mountain", "river", "eats", "sleeps"]
        docs = []
        for i in range(100):
            d, w, n = [], i, 0
            while n < 75000:
                d.append(words[w % 7]); n += len(words[w % 7]) + 1; w += 1
            docs.append(" ".join(d))
        return "/rerank", json.dumps({"query": "where do pandas live", "texts": docs, "truncate": True})
    raise SystemExit("unknown kind " + kind)

def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return -1

def main():
    port, pid, kind, clients, seconds, settle = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
    path, body = body_for(kind)
    body = body.encode()
    statuses, lock = {}, threading.Lock()
    end = time.time() + seconds
    def client():
        conn = None
        while time.time() < end:
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=120)
                conn.request("POST", path, body, {"Content-Type": "application/json"})
                r = conn.getresponse(); r.read()
                key = str(r.status)
                if r.status in (429, 503):  # as a well-behaved client does: honour Retry-After
                    time.sleep(float(r.getheader("retry-after", "1")))
                if r.getheader("connection", "").lower() == "close":
                    conn.close(); conn = None
            except Exception as e:  # noqa: BLE001 - count transport errors by type
                key = type(e).__name__
                conn = None
            with lock:
                statuses[key] = statuses.get(key, 0) + 1
    samples = []
    t0 = time.time()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads: t.start()
    while any(t.is_alive() for t in threads):
        samples.append((round(time.time() - t0, 1), round(rss_mib(pid))))
        time.sleep(0.5)
    for t in threads: t.join()
    burst_end = time.time() - t0
    while time.time() - t0 < burst_end + settle:
        samples.append((round(time.time() - t0, 1), round(rss_mib(pid))))
        time.sleep(0.5)
    print(json.dumps({"kind": kind, "clients": clients, "seconds": seconds, "statuses": statuses,
                      "rss_peak_mib": max(s[1] for s in samples), "rss_after_mib": samples[-1][1],
                      "burst_end_s": round(burst_end, 1), "rss_mib": samples}))

main()
