#!/usr/bin/env bash
# Resident memory of `tide serve` before and after the fused graph moved out of the process
# (serving/model_loader.cc: an unnamed file in TMPDIR instead of a std::string held for the model's
# lifetime). Two binaries serve the same model entry, in alternating rounds: start, wait until it
# listens (loaded, fused, warmed up), send WARM_REQUESTS rerank requests of DOCS documents, read
# VmRSS / VmHWM from /proc/<pid>/status. Prints each figure and NEW / OLD per round.
# usage: OLD_TIDE=path/to/old/tide bash bench/memory/fused_graph.sh [ROUNDS]
#        (NEW_TIDE=build/tide, MODEL=models/minilm-l6 or a bge entry from `make bench-models`)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-2}
OLD=${OLD_TIDE:?set OLD_TIDE to the binary to compare against}
NEW=${NEW_TIDE:-build/tide}
MODEL=${MODEL:-models/minilm-l6}
WARM_REQUESTS=${WARM_REQUESTS:-4}
DOCS=${DOCS:-8}
source scripts/lib/tide_server.sh
work=$(mktemp -d /tmp/tide-fused-graph-XXXXXX)
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/repo"
ln -s "$(cd "$MODEL" && pwd)" "$work/repo/$(basename "$MODEL")"
body='{"query": "what is the boiling point of water at sea level", "texts": ['
for i in $(seq "$DOCS"); do
  body+="\"Document $i: water boils at one hundred degrees Celsius at standard atmospheric pressure.\""
  [ "$i" -lt "$DOCS" ] && body+=", "
done
body+=']}'
measure() {  # BINARY -> "rss_kib hwm_kib"
  TIDE=$1
  start_tide "$work/serve.log" --model-repository "$work/repo"
  grep -q "graph fusion:" "$work/serve.log" || echo "fused_graph.sh: note: $1 did not fuse $MODEL" >&2
  rss_after_warmup "$work/serve.log" "$body" "$WARM_REQUESTS"
}
echo "# $(date -u +%Y-%m-%dT%H:%MZ) bench/memory/fused_graph.sh $ROUNDS (model $MODEL, $(du -Lh "$MODEL/1/model.onnx" | cut -f1) on disk; old $OLD, new $NEW); load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
  read -r ro ho < <(measure "$OLD")
  read -r rn hn < <(measure "$NEW")
  printf "round %d: old VmRSS %7.1f MiB VmHWM %7.1f MiB | new VmRSS %7.1f MiB VmHWM %7.1f MiB | new/old RSS %.3f HWM %.3f\n" \
    "$round" "$(echo "$ro/1024" | bc -l)" "$(echo "$ho/1024" | bc -l)" "$(echo "$rn/1024" | bc -l)" \
    "$(echo "$hn/1024" | bc -l)" "$(echo "$rn/$ro" | bc -l)" "$(echo "$hn/$ho" | bc -l)"
done
