#!/usr/bin/env bash
# Embedding throughput: batches of 32 short texts and single queries on POST /embed, closed loop
# at CONCURRENCY for DURATION_S each, against the all-MiniLM-L6-v2-shaped preset (seeded random
# weights: the real architecture and cost), and the same batches through the preset's PyTorch model
# in one process (the prototype-style reference, same weights, measured in the same run). Prints
# texts/s, p50, p99 per run and the ratio tide / PyTorch per workload (bench/embed/load.py).
# usage: bench/embed/run.sh   (BUILD_DIR=build, PRESET=all-minilm-l6-v2, DURATION_S=20, CONCURRENCY=4,
#        TORCH_THREADS=1 for the reference)
# Writes bench/results/embed-<UTC time>.txt (the command line is its first line).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
PRESET=${PRESET:-all-minilm-l6-v2}
DURATION_S=${DURATION_S:-20}
CONCURRENCY=${CONCURRENCY:-4}
TIDE="$BUILD/tide"
[ -x "$TIDE" ] || { echo "embed/run.sh: build $TIDE first" >&2; exit 2; }
source scripts/lib/tide_server.sh
work=$(mktemp -d /tmp/tide-embed-bench-XXXXXX)
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p bench/results
out=bench/results/embed-$(date -u +%Y%m%dT%H%MZ).txt
/usr/bin/python3 tools/export_model.py --preset "$PRESET" --repository "$work/models" --tide-binary "$TIDE" --quiet
start_tide "$work/tide.log" --model-repository "$work/models" --log-level warn
{ echo "# bench/embed/run.sh  (PRESET=$PRESET DURATION_S=$DURATION_S CONCURRENCY=$CONCURRENCY TORCH_THREADS=${TORCH_THREADS:-1})"
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
  /usr/bin/python3 bench/embed/load.py "$url" "$PRESET" "$DURATION_S" "$CONCURRENCY"
  echo "# tide RSS after the runs: $(awk '/^VmRSS:/{print $2}' "/proc/$server/status") KiB"; } | tee "$out"
