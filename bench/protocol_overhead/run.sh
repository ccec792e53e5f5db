#!/usr/bin/env bash
# Issue 14 benchmark, two parts against one server, written to bench/results/protocol_overhead.txt:
# 1. per-request latency and overhead (client total - server inference) of one client sending the
#    same pairs as HTTP TEI JSON, HTTP KServe JSON, HTTP KServe binary tensors, gRPC KServe (raw
#    contents) and gRPC tei.v1 Rerank, at 1 and 16 documents, interleaved in one run
#    (protocol_overhead_bench);
# 2. `tide bench` closed loop over HTTP /rerank, gRPC tei.v1 Rerank and gRPC KServe ModelInfer
#    (text tensors), at 1 and 16 SciFact-like documents and CONCURRENCY clients: throughput, p50
#    and p99 with ratios against HTTP /rerank of the same size, measured in the same run.
# Usage: bench/protocol_overhead/run.sh [--rounds N]   (after `make models`; DURATION=10s and
# CONCURRENCY=1 by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
MODELS=${TIDE_MODEL_REPOSITORY:-models}
DURATION=${DURATION:-10s}
CONCURRENCY=${CONCURRENCY:-1}
MODEL=${MODEL:-minilm-l6}
cmake --build "$BUILD" --target tide protocol_overhead_bench >/dev/null
TIDE="$BUILD/tide"
source scripts/lib/tide_server.sh
server=""
grpc_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
log=$(mktemp); work=$(mktemp -d); trap 'kill $server 2>/dev/null; rm -rf "$log" "$work"' EXIT
start_tide "$log" --model-repository "$MODELS" --grpc-port "$grpc_port" --log-level warn
mkdir -p bench/results
{ echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); model $MODEL (random weights), one client";
  "$BUILD/bench/protocol_overhead_bench" --port "$port" --grpc-port "$grpc_port" --model "$MODEL" "$@"
  echo
  echo "# tide bench, closed loop c=$CONCURRENCY, $DURATION after 2s warm-up, SciFact-like lengths; load $(cut -d' ' -f1-3 /proc/loadavg)"
  for docs in 1 16; do
    for mode in "http rerank" "grpc rerank" "grpc kserve"; do
      set -- $mode
      if [ "$1" = http ]; then target=(--url "$url"); else target=(--protocol grpc --url "grpc://127.0.0.1:$grpc_port"); fi
      echo "\$ tide bench ${target[*]} --endpoint $2 --model $MODEL --documents $docs --concurrency $CONCURRENCY --warmup 2s --duration $DURATION" >&2
      "$TIDE" bench "${target[@]}" --endpoint "$2" --model "$MODEL" --documents "$docs" \
        --tokenizer "$MODELS/$MODEL/tokenizer.json" --concurrency "$CONCURRENCY" --warmup 2s --duration "$DURATION" \
        --json "$work/$1-$2-$docs.json" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
    done
  done
  python3 - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
print(f"{'protocol':<8} {'endpoint':<8} {'docs':>4} {'req/s':>8} {'p50 ms':>9} {'p99 ms':>9} {'errors':>6} "
      f"{'server tok/queue/inf ms':>24}  vs http rerank: req/s, p50")
for docs in (1, 16):
    ref = None
    for proto, ep in (("http", "rerank"), ("grpc", "rerank"), ("grpc", "kserve")):
        run = json.load(open(os.path.join(work, f"{proto}-{ep}-{docs}.json")))["runs"][0]
        st = run["server_stages_ms"]
        split = "/".join(f"{st[s]['mean_ms']:.2f}" if s in st else "-" for s in ("tokenize", "queue", "inference"))
        if ref is None:
            ref = run
        ratio = (f"{run['qps'] / ref['qps']:.3f}x, {run['latency_ms']['p50'] / ref['latency_ms']['p50']:.3f}x"
                 if ref["qps"] > 0 and ref["latency_ms"]["p50"] > 0 else "-")
        print(f"{proto:<8} {ep:<8} {docs:>4} {run['qps']:>8.2f} {run['latency_ms']['p50']:>9.2f} "
              f"{run['latency_ms']['p99']:>9.2f} {run['error_count']:>6} {split:>24}  {ratio}")
PY
} | tee bench/results/protocol_overhead.txt
