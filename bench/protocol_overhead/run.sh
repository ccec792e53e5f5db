#!/usr/bin/env bash
# Issue 14 benchmark: per-request latency and overhead (client total - server inference) of one
# client sending the same pairs as HTTP TEI JSON, HTTP KServe JSON, HTTP KServe binary tensors,
# gRPC KServe (raw contents) and gRPC tei.v1 Rerank, at 1 and 16 documents, interleaved in one run.
# Usage: bench/protocol_overhead/run.sh [--rounds N]   (after `make models`; writes
# bench/results/protocol_overhead.txt)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
MODELS=${TIDE_MODEL_REPOSITORY:-models}
cmake --build "$BUILD" --target tide protocol_overhead_bench >/dev/null
TIDE="$BUILD/tide"
source bench/lib/tide_server.sh
server=""
grpc_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
log=$(mktemp); trap 'kill $server 2>/dev/null; rm -f "$log"' EXIT
start_tide "$log" --model-repository "$MODELS" --grpc-port "$grpc_port" --log-level warn
mkdir -p bench/results
{ echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); model minilm-l6 (random weights), one client";
  "$BUILD/bench/protocol_overhead_bench" --port "$port" --grpc-port "$grpc_port" "$@"; } | tee bench/results/protocol_overhead.txt
