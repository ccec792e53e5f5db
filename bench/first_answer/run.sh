#!/usr/bin/env bash
# A newcomer's first `make run`: the time from a fresh clone of this repository to the first rerank
# answer, with no compiler cache (CCACHE_DISABLE=1), on this machine as it is (Debian packages
# already installed; bootstrap still fetches the ONNX Runtime SDK and builds, exports, loads).
# Prints the phases from the files' times: bootstrap + configure, build of the tide binary, the
# default model's export, load (fusion + warm-up) to "listening", and the first answer.
# Run it with nothing else running (minutes of 2 cores). Output: bench/results/first-answer-<UTC>.txt
#
#   bash bench/first_answer/run.sh [PORT]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
PORT=${1:-18911}
WORK=$(mktemp -d)
trap 'pkill -f "tide serve --model-repository models --host 127.0.0.1 --port $PORT" 2>/dev/null || true; rm -rf "$WORK"' EXIT
git clone -q "$ROOT" "$WORK/tide"
cd "$WORK/tide"
start=$(date +%s.%N)
( CCACHE_DISABLE=1 make run PORT="$PORT" > "$WORK/run.log" 2>&1 ) &
body='{"query":"what is a panda?","texts":["The giant panda is a bear.","Paris is in France."]}'
until curl -sf "http://127.0.0.1:$PORT/rerank" -H 'Content-Type: application/json' -d "$body" > "$WORK/answer.json"; do
  sleep 1
done
end=$(date +%s.%N)
at() { date -d "$(stat -c '%y' "$1")" +%s.%N; }
out="$ROOT/bench/results/first-answer-$(date -u +%Y%m%dT%H%MZ).txt"
{
  echo "# bash bench/first_answer/run.sh  (commit $(git rev-parse --short HEAD), $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg))"
  printf 'bootstrap + configure   %6.0f s\n' "$(echo "$(at build/CMakeCache.txt) - $start" | bc)"
  printf 'build (tide target)     %6.0f s\n' "$(echo "$(at build/tide) - $(at build/CMakeCache.txt)" | bc)"
  printf 'default model export    %6.0f s\n' "$(echo "$(at models/minilm-l6/config.pbtxt) - $(at build/tide)" | bc)"
  printf 'load + first answer     %6.0f s\n' "$(echo "$end - $(at models/minilm-l6/config.pbtxt)" | bc)"
  printf 'first answer after      %6.0f s (target: 600 s)\n' "$(echo "$end - $start" | bc)"
  echo "answer: $(cat "$WORK/answer.json")"
} | tee "$out"
