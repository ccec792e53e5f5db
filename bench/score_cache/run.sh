#!/usr/bin/env bash
# The per-pair score cache under a RAG-like workload, where popular queries come
# back with the same candidates: a pool of POOL distinct rerank requests (1 query + DOCS
# SciFact-length documents each), sent with Zipf(S) popularity by `tide bench`
# (--request-popularity zipf:S), closed loop at CONCURRENCY, for DURATION, against the same
# model with the cache off and on (--score-cache-bytes CACHE_BYTES), in alternating rounds.
# Prints pairs/s and p99 per run and the ratios cache-on / cache-off of the same round.
# usage: bench/score_cache/run.sh [ROUNDS]   (after `make models`; BUILD_DIR=build, MODELS=models,
#        POOL=32 DOCS=16 S=1.1 CONCURRENCY=2 DURATION=60s CACHE_BYTES=268435456)
# Writes bench/results/score-cache-<UTC time>.txt (the command line is its first line).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-1}
BUILD=${BUILD_DIR:-build}
MODELS=${MODELS:-models}
POOL=${POOL:-32} DOCS=${DOCS:-16} S=${S:-1.1} CONCURRENCY=${CONCURRENCY:-2} DURATION=${DURATION:-60s}
CACHE_BYTES=${CACHE_BYTES:-268435456}
TIDE="$BUILD/tide"
[ -x "$TIDE" ] || { echo "score_cache/run.sh: build $TIDE first" >&2; exit 2; }
source scripts/lib/tide_server.sh
work=$(mktemp -d /tmp/tide-score-cache-XXXXXX)
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p bench/results
out=bench/results/score-cache-$(date -u +%Y%m%dT%H%MZ).txt

# run LABEL [serve flags...]: one server, one bench run; prints "LABEL pairs_per_s p99_ms".
run() {
  local label=$1
  shift
  start_tide "$work/tide.log" --model-repository "$MODELS" --log-level warn "$@"
  "$TIDE" bench --url "$url" --endpoint rerank --tokenizer "$MODELS/minilm-l6/tokenizer.json" \
    --documents "$DOCS" --request-pool "$POOL" --request-popularity "zipf:$S" --concurrency "$CONCURRENCY" \
    --warmup 5s --duration "$DURATION" --json "$work/$label.json" >/dev/null 2>"$work/bench.err" ||
    { cat "$work/bench.err" >&2; exit 1; }
  local hits
  hits=$(curl -s "$url/metrics" | awk '/^tide_score_cache_hits_total/ {h+=$2} /^tide_score_cache_misses_total/ {m+=$2}
    END {if (h + m > 0) printf "%.1f%%", 100 * h / (h + m); else printf "-"}')
  kill "$server"; wait "$server" 2>/dev/null || true; server=""
  /usr/bin/python3 - "$work/$label.json" "$label" "$hits" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
print(f"{sys.argv[2]} {run['pairs_per_s']:.1f} {run['latency_ms']['p99']:.1f} {run['latency_ms']['p50']:.1f} {sys.argv[3]}")
PY
}

{ echo "# bench/score_cache/run.sh $ROUNDS  (POOL=$POOL DOCS=$DOCS S=$S CONCURRENCY=$CONCURRENCY DURATION=$DURATION CACHE_BYTES=$CACHE_BYTES)"
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# run        pairs/s   p99_ms   p50_ms   cache_hit_ratio"
  for round in $(seq "$ROUNDS"); do
    off=$(run off)
    on=$(run on --score-cache-bytes "$CACHE_BYTES")
    echo "round $round $off"
    echo "round $round $on"
    echo "$off $on" | awk -v r="$round" '{printf "round %s ratio on/off: pairs/s %.3gx, p99 %.3gx\n", r, $7 / $2, $8 / $3}'
  done; } | tee "$out"
