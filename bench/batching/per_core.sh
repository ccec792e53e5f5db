#!/usr/bin/env bash
# Per-core accounting of one row of bench/run_all (issue #30 item 2: is tide's gap to a peer per pair
# or per core?): starts ROW (bench/peers/start.sh: tide-batch, tide-int8, node, ...) on MODEL, warms
# it for 15 s, then runs CLIENTS closed-loop clients x DOCS SciFact-length documents for DURATION s
# and prints pairs/s, the server's CPU seconds over the window (so pairs per CPU-second), and for
# tide rows the window's inference-stage seconds, batches and real / padded tokens from /metrics.
# usage: [MODEL=models/minilm-l6] [ROW=tide-batch] [CLIENTS=2] [DOCS=1] [DURATION=60]
#        [TIDE_INSTANCES=N] [TIDE_PARAMETERS="k=v;..."] [BUILD_DIR=build] bash bench/batching/per_core.sh
# Run it quiet (nothing else running): the CPU share is the point.
set -euo pipefail
cd "$(dirname "$0")/../.."
MODEL=${MODEL:-models/minilm-l6} ROW=${ROW:-tide-batch} CLIENTS=${CLIENTS:-2} DOCS=${DOCS:-1} DURATION=${DURATION:-60}
BUILD=${BUILD_DIR:-build}
TIDE="$BUILD/tide"
work=$(mktemp -d /tmp/tide-per-core-XXXXXX)
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
health=/v2/health/ready; case "$ROW" in tide-*) ;; *) health=/health ;; esac
BUILD_DIR="$BUILD" MODEL="$MODEL" setsid bench/peers/start.sh "$ROW" "$port" "$work" > "$work/server.log" 2>&1 &
starter=$!
trap 'kill -- -"$starter" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1200); do curl -sf -o /dev/null "http://127.0.0.1:$port$health" && break; sleep 0.5; done
curl -sf -o /dev/null "http://127.0.0.1:$port$health" || { tail -5 "$work/server.log" >&2; exit 1; }
bench=(--url "http://127.0.0.1:$port" --endpoint rerank --tokenizer "$MODEL/tokenizer.json" --documents "$DOCS"
       --doc-tokens scifact --request-pool 256 --seed 42 --timeout-ms 600000 --concurrency "$CLIENTS" --no-scrape-metrics)
"$TIDE" bench "${bench[@]}" --warmup 15s --duration 5s > "$work/warm.txt" 2>&1
curl -s "http://127.0.0.1:$port/metrics" > "$work/m0.txt" || true
# The server's process tree's CPU seconds, as bench/run_all measures a row's.
cpu() { /usr/bin/python3 bench/peers/proctree.py cpu "$starter"; }
c0=$(cpu); t0=$(date +%s.%N)
"$TIDE" bench "${bench[@]}" --warmup 0s --duration "${DURATION}s" --json "$work/run.json" > "$work/run.txt" 2>&1
c1=$(cpu); t1=$(date +%s.%N)
curl -s "http://127.0.0.1:$port/metrics" > "$work/m1.txt" || true
pps=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["runs"][0]["pairs_per_s"])' "$work/run.json")
echo "# bench/batching/per_core.sh: $ROW on $(basename "$MODEL")${TIDE_INSTANCES:+, $TIDE_INSTANCES instance(s)}${TIDE_PARAMETERS:+, $TIDE_PARAMETERS}; $CLIENTS clients x $DOCS docs, ${DURATION} s; load $(cut -d' ' -f1-3 /proc/loadavg); git $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
awk -v pps="$pps" -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" 'BEGIN {
  wall = t1 - t0; cpu = c1 - c0
  printf "pairs/s %.3f, server CPU %.1f s in %.1f s (%.2f cores), %.3f pairs per CPU-second, %.1f CPU-ms per pair\n",
         pps, cpu, wall, cpu / wall, pps * wall / cpu, 1000 * cpu / (pps * wall) }'
# Counters over the window (tide rows only).
delta() { # metric name prefix (first series)
  local a b; a=$(grep -m1 "^$1" "$work/m0.txt" | awk '{print $2}'); b=$(grep -m1 "^$1" "$work/m1.txt" | awk '{print $2}')
  [ -n "$a" ] && [ -n "$b" ] && awk -v a="$a" -v b="$b" 'BEGIN{printf "%.4f", b - a}'
}
inf=$(delta 'tide_stage_duration_seconds_sum{.*stage="inference"' || true)
if [ -n "$inf" ]; then
  batches=$(delta 'tide_batch_size_count' || true) real=$(delta 'tide_batch_real_tokens_total' || true) padded=$(delta 'tide_batch_padded_tokens_total' || true)
  awk -v inf="$inf" -v n="$batches" -v r="$real" -v p="$padded" 'BEGIN {
    printf "window: %d batches, inference %.1f s (%.1f ms per batch), %.1f real / %.1f padded tokens per batch, padding %.3f\n",
           n, inf, 1000 * inf / n, r / n, p / n, p / r }'
fi
