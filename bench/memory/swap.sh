#!/usr/bin/env bash
# Memory during a hot swap: `tide serve --model-control-mode poll` serves
# minilm-l6 (2 instances, as `make models` writes it) as version 1 of model m; a copy of it is then
# moved in as version 2, which loads and warms up beside version 1, takes over, and version 1 is
# unloaded. RSS is sampled every 0.1 s from before the swap until 5 s after it, while one client
# sends /rerank requests in a loop (each answer's status is counted).
# usage: bench/memory/swap.sh   (after `make models`)
# output: bench/results/memory-swap.txt (the command, RSS before / peak / after, the controller's
#         log lines, the answers' statuses)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
MODELS=${TIDE_MODEL_REPOSITORY:-models}
TIDE=${TIDE:-$BUILD/tide}
OUT=${OUT:-bench/results/memory-swap.txt}
[ -x "$TIDE" ] || { echo "swap: build $TIDE first (make build)" >&2; exit 2; }
[ -f "$MODELS/minilm-l6/1/model.onnx" ] || { echo "swap: run make models first" >&2; exit 2; }
source scripts/lib/tide_server.sh

work=$(mktemp -d)
server=""
client=""
trap 'kill $client 2>/dev/null || true; kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
repo=$work/repo
mkdir -p "$repo/m/1" "$work/staged/2"
ln -s "$(pwd)/$MODELS/minilm-l6/1/model.onnx" "$repo/m/1/model.onnx"
ln -s "$(pwd)/$MODELS/minilm-l6/1/model.onnx" "$work/staged/2/model.onnx"
cp "$MODELS/minilm-l6/tokenizer.json" "$repo/m/"
sed 's/^name: .*/name: "m"/' "$MODELS/minilm-l6/config.pbtxt" >"$repo/m/config.pbtxt"

start_tide "$work/tide.log" --model-repository "$repo" --model-control-mode poll --repository-poll-secs 1
rss() { awk '/^VmRSS/ {print int($2/1024)}' "/proc/$server/status"; }
( while true; do curl -s -o /dev/null -w '%{http_code}\n' "$url/rerank" \
    -d '{"query": "what is a panda?", "texts": ["a bear", "a city", "a river"]}' || echo 000; done ) >"$work/codes" &
client=$!
sleep 2
before=$(rss)
peak=$before
mv "$work/staged/2" "$repo/m/2"
swapped=""
for _ in $(seq 1200); do  # up to 120 s
  r=$(rss); [ "$r" -gt "$peak" ] && peak=$r
  if [ -z "$swapped" ] && grep -q 'version 1: unloaded' "$work/tide.log"; then swapped=$(date +%s); fi
  if [ -n "$swapped" ] && [ $(( $(date +%s) - swapped )) -ge 5 ]; then break; fi
  sleep 0.1
done
after=$(rss)
kill $client 2>/dev/null || true
wait $client 2>/dev/null || true
client=""
{
  echo "# bench/memory/swap.sh ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores; tide $(git rev-parse --short HEAD))"
  echo "# minilm-l6 (FP32, 2 instances, intra_op_threads 1) hot-swapped from version 1 to version 2 in poll mode"
  echo "rss_mib before=$before peak=$peak after=$after (5 s after version 1 was unloaded)"
  grep -E 'version [12]: (loaded|reloaded|unloading|unloaded)' "$work/tide.log" | sed 's/^[^ ]* //'
  echo "answers during the run (status count):"
  sort "$work/codes" | uniq -c
} | tee "$OUT"
