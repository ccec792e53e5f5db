#!/usr/bin/env bash
# Before/after server overhead on the same machine in one run: alternates two tide binaries (BASE,
# NEW), each serving the same model repository, under the same server_overhead_bench client.
# Usage: bench/server_overhead/compare.sh BASE_TIDE NEW_TIDE [ROUNDS=2] [bench flags...]
# Writes bench/results/server_overhead-compare-<UTC time>.txt (the command line is its first line).
set -euo pipefail
cd "$(dirname "$0")/../.."
BASE=$1 NEW=$2 ROUNDS=${3:-2}
shift 2; [ $# -gt 0 ] && shift
BUILD=${BUILD_DIR:-build}
MODELS=${TIDE_MODEL_REPOSITORY:-models}
cmake --build "$BUILD" --target server_overhead_bench >/dev/null
source scripts/lib/tide_server.sh
server=""
log=$(mktemp); trap 'kill $server 2>/dev/null; rm -f "$log"' EXIT
mkdir -p bench/results
out=bench/results/server_overhead-compare-$(date -u +%Y%m%dT%H%MZ).txt
{ echo "# bench/server_overhead/compare.sh $BASE $NEW $ROUNDS $*"
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
  for round in $(seq "$ROUNDS"); do
    for which in BASE NEW; do
      TIDE=${!which}
      # The bench holds its connection idle while it times ONNX Runtime directly: no idle timeout.
      start_tide "$log" --model-repository "$MODELS" --log-level warn --idle-timeout-ms 3600000
      echo "## round $round $which ($TIDE), load $(cut -d' ' -f1-3 /proc/loadavg)"
      "$BUILD/bench/server_overhead_bench" --port "$port" --model-dir "$MODELS/minilm-l6" "$@"
      echo
      kill "$server"; wait "$server" 2>/dev/null || true
    done
  done; } | tee "$out"
