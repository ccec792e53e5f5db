#!/usr/bin/env bash
# The server at saturation (50 closed-loop clients, realistic rerank lengths)
# against the raw engine's best on the same pairs, instance layouts 1x2 vs 2x1, and length-sorted
# batching vs first-in-first-out, in one run.
# Usage: bench/batching/run.sh [batching_bench flags]   (after `make models`;
#        writes bench/results/batching.txt; BUILD_DIR picks the build folder, default build)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
MODELS=${TIDE_MODEL_REPOSITORY:-models}
cmake --build "$BUILD" --target tide batching_bench >/dev/null
# (batching_bench measures the FP32 / INT8 ceilings itself, at the start and the end: --roofline-s)
mkdir -p bench/results
{ echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)";
  echo "# bench/batching/run.sh $*";
  "$BUILD/bench/batching_bench" --tide "$BUILD/tide" --model-dir "$MODELS/minilm-l6" "$@"; } | tee bench/results/batching.txt
