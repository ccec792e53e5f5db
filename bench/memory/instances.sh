#!/usr/bin/env bash
# Resident memory of `tide serve` with instance_group count 1, 2 and 4, with the
# instances sharing one copy of the weights (parameter share_weights "true", the default) and
# without (share_weights "false"), in alternating rounds.
# For each configuration: start tide serve on a copy of the model entry (model and tokenizer
# symlinked; config.pbtxt with the count and share_weights set), wait until it listens (every
# instance loaded and warmed up), send WARM_REQUESTS rerank requests of DOCS documents, then read
# VmRSS (and VmHWM) from /proc/<pid>/status. Every figure is a ratio against the 1-instance
# configuration measured in the same round.
# usage: bench/memory/instances.sh [ROUNDS]   (after `make models`; BUILD_DIR=build,
#        MODEL=models/minilm-l6, COUNTS="1 2 4"; writes bench/results/shared-weights.txt)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-2}
BUILD=${BUILD_DIR:-build}
MODEL=${MODEL:-models/minilm-l6}
COUNTS=${COUNTS:-1 2 4}
WARM_REQUESTS=${WARM_REQUESTS:-4}
DOCS=${DOCS:-8}
TIDE="$BUILD/tide"
[ -x "$TIDE" ] || { echo "instances.sh: build $TIDE first" >&2; exit 2; }
[ -f "$MODEL/1/model.onnx" ] || { echo "instances.sh: $MODEL missing (make models)" >&2; exit 2; }
source scripts/lib/tide_server.sh
work=$(mktemp -d /tmp/tide-instances-XXXXXX)
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
name=$(basename "$MODEL")
src=$(cd "$MODEL" && pwd)

# make_repo DIR COUNT SHARE: a repository with one model, $name, served COUNT times.
make_repo() {
  local dir=$1 count=$2 share=$3
  mkdir -p "$dir/$name/1"
  ln -sf "$src/1/model.onnx" "$dir/$name/1/model.onnx"
  for f in "$src"/*; do [ -f "$f" ] && [ "$(basename "$f")" != config.pbtxt ] && ln -sf "$f" "$dir/$name/"; done
  /usr/bin/python3 - "$src/config.pbtxt" "$dir/$name/config.pbtxt" "$count" "$share" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
text, n = re.subn(r"count:\s*\d+", "count: " + sys.argv[3], text)
if n == 0:
    text += "\ninstance_group [ { count: %s kind: KIND_CPU } ]\n" % sys.argv[3]
text += '\nparameters {\n  key: "share_weights"\n  value { string_value: "%s" }\n}\n' % sys.argv[4]
open(sys.argv[2], "w").write(text)
PY
}

body='{"query": "what is the boiling point of water at sea level", "texts": ['
for i in $(seq "$DOCS"); do
  body+="\"Document $i: water boils at one hundred degrees Celsius at standard atmospheric pressure, and the boiling point falls as altitude rises because the air pressure is lower.\""
  [ "$i" -lt "$DOCS" ] && body+=", "
done
body+=']}'

# measure COUNT SHARE -> prints "rss_kib hwm_kib"
measure() {
  local count=$1 share=$2 dir="$work/repo-$1-$2"
  rm -rf "$dir"
  make_repo "$dir" "$count" "$share"
  start_tide "$work/serve-$count-$share.log" --model-repository "$dir"
  rss_after_warmup "$work/serve-$count-$share.log" "$body" "$WARM_REQUESTS"
}

out=bench/results/shared-weights.txt
mkdir -p bench/results
declare -A rss hwm
{
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  echo "# bench/memory/instances.sh $ROUNDS   (model $MODEL, $(du -Lh "$MODEL/1/model.onnx" | cut -f1) on disk; counts $COUNTS; $WARM_REQUESTS warm-up requests of $DOCS documents)"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out"
for round in $(seq "$ROUNDS"); do
  for count in $COUNTS; do
    for share in true false; do
      read -r r h < <(measure "$count" "$share")
      rss[$round,$count,$share]=$r
      hwm[$round,$count,$share]=$h
      printf "round %d: count %d share_weights %-5s VmRSS %7.1f MiB  VmHWM %7.1f MiB\n" "$round" "$count" "$share" \
        "$(echo "$r / 1024" | bc -l)" "$(echo "$h / 1024" | bc -l)" | tee -a "$out"
    done
  done
done
{
  echo
  echo "ratios (VmRSS after warm-up; each against count 1 of the same round and sharing setting):"
  first=$(echo "$COUNTS" | awk '{print $1}')
  for round in $(seq "$ROUNDS"); do
    for share in true false; do
      line="  round $round share_weights $share:"
      for count in $COUNTS; do
        line+=$(printf "  %dx %.3f" "$count" "$(echo "${rss[$round,$count,$share]} / ${rss[$round,$first,$share]}" | bc -l)")
      done
      echo "$line"
    done
    line="  round $round shared / not shared at the same count:"
    for count in $COUNTS; do
      line+=$(printf "  %dx %.3f" "$count" "$(echo "${rss[$round,$count,true]} / ${rss[$round,$count,false]}" | bc -l)")
    done
    echo "$line"
  done
  echo "  target: 2 instances (shared) <= 1.25 x 1 instance"
  echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee -a "$out"
