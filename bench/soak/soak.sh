#!/usr/bin/env bash
# Soak test (not part of CI, nor of `make bench`: it runs for 30 minutes): open-loop Poisson load at FACTOR x the server's measured
# capacity for DURATION seconds on the default model (minilm-l6) with a bounded queue, a deadline
# and a circuit breaker, sampling the server's RSS every 10 s. Reports RSS over time (CSV plus
# first/min/max/last), counts of success / shed (429, 503) / timeout (504) / degraded (BM25), and the
# P99 of admitted requests. Memory must stay flat.
# usage: bench/soak/soak.sh [DURATION_S=1800] [FACTOR=2]     (after `make models`)
# environment:
#   HOSTILE_SHARE=0.1  mix in hostile requests (bench/soak/hostile.py: oversized KServe shapes, 8 MB
#                      BYTES tensors of 2M strings, bad token_type_ids, pipelined-and-disconnect,
#                      silent connections) as this share of all arrivals, beside the innocent load;
#                      the summary then reports their outcomes and whether any innocent request failed
#   HOSTILE_RATE=2     the same mix at a fixed rate (requests/s) instead of a share
#   RSS_INTERVAL_S=10  RSS sampling period;  CAPACITY_S=60  length of the capacity measurement
#   RATE=0.3           offer this many innocent requests/s instead of FACTOR x a measured capacity
#                      (skips the measurement: on a machine shared with builds, the breaker can open
#                      while capacity is measured, and BM25's fast answers then inflate it)
# output: bench/results/soak-<UTC date>/ (rss.csv, capacity.json, soak.json, summary.txt[, hostile.json])
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION=${1:-1800}
FACTOR=${2:-2}
HOSTILE_SHARE=${HOSTILE_SHARE:-0}
HOSTILE_RATE=${HOSTILE_RATE:-}
RSS_INTERVAL_S=${RSS_INTERVAL_S:-10}
CAPACITY_S=${CAPACITY_S:-60}
BUILD=${BUILD_DIR:-build}
MODELS=${TIDE_MODEL_REPOSITORY:-models}
TIDE="$BUILD/tide"
[ -x "$TIDE" ] || { echo "soak: build $TIDE first (make build)" >&2; exit 2; }
[ -f "$MODELS/minilm-l6/1/model.onnx" ] || { echo "soak: run make models first" >&2; exit 2; }

out="bench/results/soak-$(date -u +%Y%m%dT%H%MZ)"
mkdir -p "$out"
repo=$(mktemp -d)
server=""
trap 'kill $server 2>/dev/null || true; rm -rf "$repo"' EXIT
mkdir -p "$repo/minilm-l6/1"
ln -s "$(pwd)/$MODELS/minilm-l6/1/model.onnx" "$repo/minilm-l6/1/model.onnx"
ln -s "$(pwd)/$MODELS/minilm-l6/tokenizer.json" "$repo/minilm-l6/tokenizer.json"
cat > "$repo/minilm-l6/config.pbtxt" <<'CONFIG'
name: "minilm-l6"
backend: "onnxruntime"
max_batch_size: 32
dynamic_batching {
  max_queue_delay_microseconds: 2000
  default_queue_policy { max_queue_size: 512 }
}
instance_group [{ count: 2, kind: KIND_CPU }]
parameters { key: "intra_op_threads" value { string_value: "1" } }
parameters { key: "max_sequence_length" value { string_value: "512" } }
parameters { key: "breaker_p99_ms" value { string_value: "8000" } }
parameters { key: "breaker_window_s" value { string_value: "60" } }
parameters { key: "breaker_min_samples" value { string_value: "10" } }
parameters { key: "breaker_queue_fullness" value { string_value: "0.9" } }
parameters { key: "breaker_open_s" value { string_value: "5" } }
CONFIG

source scripts/lib/tide_server.sh
log="$out/server.log"
start_tide "$log" --model-repository "$repo" --default-timeout-ms 30000 --log-level info
common=(--url "$url" --tokenizer "$MODELS/minilm-l6/tokenizer.json" --documents 16 --timeout-ms 60000)

if [ -n "${RATE:-}" ]; then
  qps="(not measured: RATE=$RATE)"
  rate=$RATE
else
echo "soak: measuring capacity (closed loop, 2 clients: each request spreads over both instances; ${CAPACITY_S} s)"
"$TIDE" bench "${common[@]}" --concurrency 2 --warmup 15s --duration "${CAPACITY_S}s" --json "$out/capacity.json" >/dev/null
qps=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["runs"][0]["qps"])' "$out/capacity.json")
rate=$(/usr/bin/python3 -c "print(round($qps * $FACTOR, 3))")
if /usr/bin/python3 -c "import sys; sys.exit(0 if $qps > 0 else 1)"; then :; else
  echo "soak: no request completed while measuring capacity (machine too loaded?); see $out/capacity.json" >&2
  exit 1
fi
fi
echo "soak: capacity $qps requests/s; offering $rate requests/s (x$FACTOR, Poisson) for $DURATION s"

echo "elapsed_s,rss_kib" > "$out/rss.csv"
start=$(date +%s)
(
  while kill -0 $server 2>/dev/null; do
    echo "$(( $(date +%s) - start )),$(awk '/VmRSS/{print $2}' /proc/$server/status)" >> "$out/rss.csv"
    sleep "$RSS_INTERVAL_S"
  done
) &
sampler=$!
hostile=""
if [ -n "$HOSTILE_RATE" ] || /usr/bin/python3 -c "import sys; sys.exit(0 if $HOSTILE_SHARE > 0 else 1)"; then
  hostile_rate=${HOSTILE_RATE:-$(/usr/bin/python3 -c "print(round($rate * $HOSTILE_SHARE / (1 - $HOSTILE_SHARE), 3))")}
  echo "soak: hostile mix: $hostile_rate requests/s (HOSTILE_RATE=${HOSTILE_RATE:-} HOSTILE_SHARE=$HOSTILE_SHARE)"
  # Starts with the innocent load's warm-up, ends with it.
  /usr/bin/python3 bench/soak/hostile.py "$port" minilm-l6 "$hostile_rate" "$(( DURATION + 5 ))" > "$out/hostile.json" &
  hostile=$!
fi
"$TIDE" bench "${common[@]}" --request-rate "$rate" --arrivals poisson --warmup 5s --duration "${DURATION}s" \
  --max-connections 256 --json "$out/soak.json" | tee "$out/bench.txt"
[ -n "$hostile" ] && wait "$hostile"
kill $sampler 2>/dev/null || true
curl -s "$url/metrics" > "$out/metrics.txt" || true

/usr/bin/python3 - "$out" <<'REPORT' | tee "$out/summary.txt"
import csv, json, re, sys
out = sys.argv[1]
run = json.load(open(f"{out}/soak.json"))["runs"][0]
rss = [int(r["rss_kib"]) for r in csv.DictReader(open(f"{out}/rss.csv")) if r["rss_kib"]]
metrics = open(f"{out}/metrics.txt").read()
degraded = sum(float(v) for v in re.findall(r'^tide_degraded_responses_total\{[^}]*\} (\S+)$', metrics, re.M))
errors = run["errors"]
shed = sum(n for k, n in errors.items() if "429" in k or "503" in k)
timeouts = sum(n for k, n in errors.items() if "504" in k)
print(f"offered {run['request_rate']} requests/s for {run['measured_seconds']:.0f} s; sent {run['sent']}")
print(f"success {run['completed']} (of which degraded/BM25 {degraded:.0f}); shed {shed}; timeout {timeouts}; "
      f"other errors {run['error_count'] - shed - timeouts} {errors}")
print(f"P99 of admitted requests {run['latency_ms']['p99']:.0f} ms (p50 {run['latency_ms']['p50']:.0f} ms)")
if rss:
    print(f"server RSS (MiB): first {rss[0]/1024:.0f}, min {min(rss)/1024:.0f}, max {max(rss)/1024:.0f}, "
          f"last {rss[-1]/1024:.0f} over {len(rss)} samples")
import os
if os.path.exists(f"{out}/hostile.json"):
    h = json.load(open(f"{out}/hostile.json"))
    print(f"hostile mix at {h['rate']} requests/s: " + "; ".join(f"{k} {v}" for k, v in h["results"].items())
          + f"; skipped (no free hostile worker) {h['skipped_no_worker']}")
    failed = run["error_count"] - shed
    print(f"innocent requests failed (errors other than 429/503 shedding): {failed}"
          + (" -- NONE" if failed == 0 else f" {errors}"))
REPORT
