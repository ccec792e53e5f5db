#!/usr/bin/env bash
# Raw engine ms/run before and after transformer graph fusion (tide optimize / graph_fusion=auto),
# FP32 and INT8, 1 and 2 intra-op threads, batch 1 x 352 and 4 x 256 (bench/fusion/fusion_bench.cc).
# Unfused and fused sessions alternate in the same process; the speedup column is unfused / fused.
#
#   bench/fusion/run.sh [BUILD_DIR] [MODEL]        (defaults: build, models/minilm-l6/1/model.onnx)
#   ROUNDS=9 ITERS=4 bench/fusion/run.sh           (more rounds: steadier medians, longer run; default 5 x 2, ~45 s)
#   SMOKE=1 bench/fusion/run.sh                    (one round of one run: checks the script works)
#
# Writes the table to stdout and to bench/results/fusion.txt (OUT=... to change; SMOKE writes nowhere).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
MODEL=${2:-models/minilm-l6/1/model.onnx}
ROUNDS=${ROUNDS:-5}
ITERS=${ITERS:-2}
OUT=${OUT:-bench/results/fusion.txt}
if [[ -n "${SMOKE:-}" ]]; then ROUNDS=1; ITERS=1; OUT=/dev/null; fi
cmake --build "$BUILD" --target fusion_bench >/dev/null
{
  echo "# bench/fusion/run.sh $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'))"
  echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  "$BUILD/bench/fusion_bench" --model "$MODEL" --threads 1,2 --shapes 1x352,4x256 --precisions fp32,int8 \
    --rounds "$ROUNDS" --iters "$ITERS"
  echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT"
