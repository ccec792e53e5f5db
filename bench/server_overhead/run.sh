#!/usr/bin/env bash
# Single-client latency of a 16-document rerank request, split into stages,
# and the server's overhead against a direct ONNX Runtime call on the same batch, in one run.
# Usage: bench/server_overhead/run.sh   (after `make models`; writes bench/results/server_overhead.txt)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
MODELS=${TIDE_MODEL_REPOSITORY:-models}
cmake --build "$BUILD" --target tide server_overhead_bench >/dev/null
TIDE="$BUILD/tide"
source scripts/lib/tide_server.sh
server=""
log=$(mktemp); trap 'kill $server 2>/dev/null; rm -f "$log"' EXIT
start_tide "$log" --model-repository "$MODELS" --log-level warn
mkdir -p bench/results
{ echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)";
  "$BUILD/bench/server_overhead_bench" --port "$port" --model-dir "$MODELS/minilm-l6" "$@"; } | tee bench/results/server_overhead.txt
