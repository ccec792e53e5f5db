#!/usr/bin/env bash
# Issue 3 benchmark: single-client latency of a 16-document rerank request, split into stages,
# and the server's overhead against a direct ONNX Runtime call on the same batch, in one run.
# Usage: bench/server_overhead/run.sh   (after `make models`; writes bench/results/server_overhead.txt)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
MODELS=${TIDE_MODEL_REPOSITORY:-models}
cmake --build "$BUILD" --target tide server_overhead_bench >/dev/null
log=$(mktemp); trap 'kill $pid 2>/dev/null; rm -f "$log"' EXIT
"$BUILD/tide" serve --model-repository "$MODELS" --port 0 --log-level warn >"$log" &
pid=$!
for _ in $(seq 3000); do grep -q "listening on" "$log" && break; kill -0 $pid 2>/dev/null || { cat "$log"; exit 1; }; sleep 0.1; done
grep -q "listening on" "$log" || { echo "server did not start in 300 s" >&2; cat "$log"; exit 1; }
port=$(grep -o 'listening on http://[^ ]*' "$log" | sed 's/.*://')
mkdir -p bench/results
{ echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)";
  "$BUILD/bench/server_overhead_bench" --port "$port" --model-dir "$MODELS/minilm-l6" "$@"; } | tee bench/results/server_overhead.txt
