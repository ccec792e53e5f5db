#!/usr/bin/env bash
# Memory after a burst: RSS of `tide serve` while CLIENTS clients send heavy
# requests for SECONDS seconds, and SETTLE seconds after, sampled every 0.5 s. Three runs, each on a
# fresh server (model minilm-l6 capped at max_sequence_length 32, so inference stays cheap and the
# burst measures parsing and tokenization):
#   bytes2m             8 MB KServe BYTES tensors of 2,000,000 one-byte strings (hostile; refused)
#   rerank100           7.5 MB /rerank requests with 100 documents of 75 KB (valid), malloc_trim on
#                       (the default)
#   rerank100-notrim    the same with --malloc-trim-above-bytes 0
# usage: bench/memory/burst.sh [CLIENTS=8] [SECONDS=30] [SETTLE=10]   (after `make models`)
#        TIDE=/path/to/other/tide OUT=... ONLY_BYTES2M=1 bench/memory/burst.sh ...  (e.g. the binary before
#        the fix, which knows no --malloc-trim-above-bytes: the bytes2m run only)
# output: bench/results/memory-burst.txt (summary lines and the command) and the JSON per run next to it.
set -euo pipefail
cd "$(dirname "$0")/../.."
CLIENTS=${1:-8}
SECONDS_=${2:-30}
SETTLE=${3:-10}
BUILD=${BUILD_DIR:-build}
MODELS=${TIDE_MODEL_REPOSITORY:-models}
TIDE=${TIDE:-$BUILD/tide}
OUT=${OUT:-bench/results/memory-burst.txt}
[ -x "$TIDE" ] || { echo "burst: build $TIDE first (make build)" >&2; exit 2; }
[ -f "$MODELS/minilm-l6/1/model.onnx" ] || { echo "burst: run make models first" >&2; exit 2; }

repo=$(mktemp -d)
server=""
trap 'kill $server 2>/dev/null || true; rm -rf "$repo"' EXIT
mkdir -p "$repo/m/1"
ln -s "$(pwd)/$MODELS/minilm-l6/1/model.onnx" "$repo/m/1/model.onnx"
ln -s "$(pwd)/$MODELS/minilm-l6/tokenizer.json" "$repo/m/tokenizer.json"
cat > "$repo/m/config.pbtxt" <<'CONFIG'
name: "m"
backend: "onnxruntime"
max_batch_size: 64
dynamic_batching { max_queue_delay_microseconds: 2000 }
instance_group [{ count: 1, kind: KIND_CPU }]
parameters { key: "max_sequence_length" value { string_value: "32" } }
CONFIG

source scripts/lib/tide_server.sh
{
  echo "# bench/memory/burst.sh $CLIENTS $SECONDS_ $SETTLE   ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, tide: $TIDE)"
  echo "# RSS MiB: before the burst / peak / ${SETTLE} s after it; statuses of the burst's requests"
} > "$OUT"
run() {
  local name=$1 kind=$2
  shift 2
  start_tide "$repo/server.log" --model-repository "$repo" --log-level warn "$@"
  sleep 1
  local before
  before=$(awk '/VmRSS/{print int($2/1024)}' /proc/$server/status)
  /usr/bin/python3 bench/memory/burst_client.py "$port" "$server" "$kind" "$CLIENTS" "$SECONDS_" "$SETTLE" \
    > "${OUT%.txt}-$name.json"
  /usr/bin/python3 - "$name" "$before" "${OUT%.txt}-$name.json" "$*" <<'PY' | tee -a "$OUT"
import json, sys
name, before, path, flags = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
r = json.load(open(path))
print(f"{name:18s} before {before:>5} peak {r['rss_peak_mib']:>5} after {r['rss_after_mib']:>5}  "
      f"statuses {r['statuses']}  flags [{flags}]")
PY
  kill $server; wait $server 2>/dev/null || true
  server=""
}
[ -n "${ONLY_BYTES2M:-}" ] && { run bytes2m bytes2m; exit 0; }
run bytes2m bytes2m
run rerank100 rerank100
run rerank100-notrim rerank100 --malloc-trim-above-bytes 0
