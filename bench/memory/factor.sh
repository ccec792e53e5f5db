#!/usr/bin/env bash
# The memory one request costs per body byte (for --request-memory-factor): peak VmRSS growth of a
# fresh `tide serve` (minilm-l6 at max_sequence_length 512) while it parses and tokenizes one
# request of the heaviest valid kinds, sampled every 2 ms:
#   ints     KServe input_ids + attention_mask + token_type_ids, [1000, 512] each, flat JSON (3 MB)
#   nested   the same as nested JSON arrays
#   rerank   /rerank with 1000 documents of 7.5 KB (7.5 MB)
# Each request has x-timeout-ms 3000 (inference of 1000 x 512 tokens would take minutes; the peak
# is reached while parsing and tokenizing).
# usage: bench/memory/factor.sh   (after `make models`); output: bench/results/memory-factor.txt
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-bench/results/memory-factor.txt}
echo "# bench/memory/factor.sh   ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores)" > "$OUT"
repo=$(mktemp -d); server=""
trap 'kill $server 2>/dev/null || true; rm -rf "$repo"' EXIT
mkdir -p $repo/m/1
ln -s $(pwd)/models/minilm-l6/1/model.onnx $repo/m/1/model.onnx; ln -s $(pwd)/models/minilm-l6/tokenizer.json $repo/m/tokenizer.json
printf 'name: "m"\nbackend: "onnxruntime"\nmax_batch_size: 64\ninstance_group [{ count: 1, kind: KIND_CPU }]\nparameters { key: "max_sequence_length" value { string_value: "512" } }\n' > $repo/m/config.pbtxt
TIDE=${TIDE:-build/tide}; source scripts/lib/tide_server.sh
for kind in ints nested rerank; do
start_tide $repo/server.log --model-repository $repo --log-level warn
/usr/bin/python3 - $port $server $kind <<'PY' | tee -a "$OUT"
import http.client, json, sys, time
port, pid, kind = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def st(k):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith(k): return int(l.split()[1]) / 1024
if kind == "ints":
    t = lambda n: {"name": n, "shape": [1000, 512], "datatype": "INT64", "data": [0] * 512000}
    body = json.dumps({"inputs": [t("input_ids"), t("attention_mask"), t("token_type_ids")]}, separators=(",", ":"))
    path = "/v2/models/m/infer"
elif kind == "nested":
    t = lambda n: {"name": n, "shape": [1000, 512], "datatype": "INT64", "data": [[0] * 512] * 1000}
    body = json.dumps({"inputs": [t("input_ids"), t("attention_mask"), t("token_type_ids")]}, separators=(",", ":"))
    path = "/v2/models/m/infer"
else:
    body = json.dumps({"query": "q", "texts": [("panda " * 1250)] * 1000})
    path = "/rerank"
import threading
before = st("VmRSS"); peakv = [before]; done = [False]
def poll():
    while not done[0]:
        peakv[0] = max(peakv[0], st("VmRSS")); time.sleep(0.002)
th = threading.Thread(target=poll); th.start()
c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
c.request("POST", path, body.encode(), {"Content-Type": "application/json", "x-timeout-ms": "3000"})
r = c.getresponse(); r.read()
time.sleep(0.5); done[0] = True; th.join()
peak = peakv[0]
print(f"{kind}: body {len(body)/1e6:.2f} MB, status {r.status}, VmRSS {before:.0f} -> {peak:.0f} MiB, "
      f"growth {peak-before:.0f} MiB = {(peak-before)*1048576/len(body):.1f} x body")
PY
kill $server; wait $server 2>/dev/null || true
done
