#!/usr/bin/env bash
# Server overhead of two tide binaries in one run (issue 12 item 8): alternates them, ROUNDS
# times each, with the same bench client and model, so both see the same machine load.
# Usage: bench/server_overhead/compare_binaries.sh BASE_TIDE NEW_TIDE [server_overhead_bench flags]
#   e.g. bench/server_overhead/compare_binaries.sh /work/main/build/tide build/tide --iterations 30
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
MODELS=${TIDE_MODEL_REPOSITORY:-models}
ROUNDS=${ROUNDS:-2}
base=$1 new=$2; shift 2
source bench/lib/tide_server.sh
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
  for TIDE in "$base" "$new"; do
    log=$(mktemp); server=""
    start_tide "$log" --model-repository "$MODELS" --log-level warn
    echo "## round $round: $TIDE"
    "$BUILD/bench/server_overhead_bench" --port "$port" --model-dir "$MODELS/minilm-l6" "$@"
    kill "$server"; wait "$server" 2>/dev/null; rm -f "$log"
  done
done
