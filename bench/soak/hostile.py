#!/usr/bin/python3
"""Hostile traffic for bench/soak/soak.sh (HOSTILE_SHARE): RATE requests/s for SECONDS seconds, drawn
at random from a mix of abusive requests, sent beside the innocent load. Each runs on a worker thread
(at most WORKERS at once; an arrival that finds none free is skipped and counted). Kinds:
  kserve_rows     KServe input_ids of shape [100000, 1] (586 KB): must be 422 at once
  bytes2m         8 MB KServe BYTES tensor of 2,000,000 one-byte strings: must be refused (413/422)
  bad_type_ids    token_type_ids outside the model's type vocabulary: must be 4xx
  pipeline_close  3 pipelined /rerank requests, then the connection closed without reading
  silent          a connection that sends half a request line and then nothing for 5 s
Prints one JSON object: per kind, the statuses seen ("sent" for the fire-and-forget kinds)."""
import json, random, socket, sys, threading, time

host, port, model = "127.0.0.1", int(sys.argv[1]), sys.argv[2]
rate, seconds, workers = float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]) if len(sys.argv) > 5 else 8

def request(path, body, extra=""):
    return (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body

rows = ",".join(["101"] * 100000)
BODIES = {
    "kserve_rows": request(f"/v2/models/{model}/infer",
                           ('{"inputs":[{"name":"input_ids","shape":[100000,1],"datatype":"INT64","data":[%s]}]}' % rows).encode()),
    "bytes2m": request(f"/v2/models/{model}/infer",
                       ('{"inputs":[{"name":"text","shape":[2000000],"datatype":"BYTES","data":[%s]}]}'
                        % ",".join(['"a"'] * 2000000)).encode()),
    "bad_type_ids": request(f"/v2/models/{model}/infer", json.dumps({"inputs": [
        {"name": "input_ids", "shape": [1, 4], "datatype": "INT64", "data": [101, 7592, 2088, 102]},
        {"name": "attention_mask", "shape": [1, 4], "datatype": "INT64", "data": [1, 1, 1, 1]},
        {"name": "token_type_ids", "shape": [1, 4], "datatype": "INT64", "data": [0, 7, -3, 99999]}]}).encode()),
}
small = json.dumps({"query": "panda", "texts": ["bamboo forest", "city"]}).encode()

def status_of(sock):
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            return "closed"
        data += chunk
    return data.split(b" ", 2)[1].decode()

def one(kind):
    s = socket.create_connection((host, port), timeout=60)
    try:
        if kind in BODIES:
            s.sendall(BODIES[kind])
            return status_of(s)
        if kind == "pipeline_close":
            s.sendall(request("/rerank", small) * 3)
            return "sent"
        if kind == "silent":
            s.sendall(b"POST /rerank HT")
            time.sleep(5)
            return "sent"
    finally:
        s.close()

kinds = ["kserve_rows", "bytes2m", "bad_type_ids", "pipeline_close", "silent"]
results, lock = {k: {} for k in kinds}, threading.Lock()
slots = threading.Semaphore(workers)
skipped = 0

def run(kind):
    try:
        key = one(kind)
    except Exception as e:  # noqa: BLE001 - a transport error is an outcome too
        key = type(e).__name__
    finally:
        slots.release()
    with lock:
        results[kind][key] = results[kind].get(key, 0) + 1

end = time.time() + seconds
threads = []
while time.time() < end:
    time.sleep(random.expovariate(rate))
    if not slots.acquire(blocking=False):
        skipped += 1
        continue
    t = threading.Thread(target=run, args=(random.choice(kinds),), daemon=True)
    t.start()
    threads.append(t)
for t in threads:
    t.join(timeout=120)
print(json.dumps({"rate": rate, "seconds": seconds, "skipped_no_worker": skipped, "results": results}))
