#!/usr/bin/env bash
# Companion of instances.sh: does sharing weights (and the Env's CPU arena) cost throughput?
# Alternating rounds of `tide serve` with instance_group count COUNT, share_weights true then
# false, each under a closed loop of CLIENTS clients (tide bench) for DURATION s after WARMUP s;
# prints pairs/s of each and the ratio shared / not shared per round.
# usage: bench/memory/throughput_ab.sh [ROUNDS]   (COUNT=2 CLIENTS=8 DOCS=4 WARMUP=5 DURATION=20)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-2}
BUILD=${BUILD_DIR:-build}
MODEL=${MODEL:-models/minilm-l6}
COUNT=${COUNT:-2} CLIENTS=${CLIENTS:-8} DOCS=${DOCS:-4} WARMUP=${WARMUP:-5} DURATION=${DURATION:-20}
TIDE="$BUILD/tide"
source scripts/lib/tide_server.sh
work=$(mktemp -d /tmp/tide-ab-XXXXXX)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
name=$(basename "$MODEL")
src=$(cd "$MODEL" && pwd)
echo "# bench/memory/throughput_ab.sh $ROUNDS (count $COUNT, $CLIENTS clients, $DOCS docs, ${WARMUP}+${DURATION} s); load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
  declare -A pps=()
  for share in true false; do
    dir="$work/repo-$share"
    rm -rf "$dir"; mkdir -p "$dir/$name/1"
    ln -s "$src/1/model.onnx" "$dir/$name/1/model.onnx"
    for f in "$src"/*; do [ -f "$f" ] && [ "$(basename "$f")" != config.pbtxt ] && ln -s "$f" "$dir/$name/"; done
    sed -E "s/count: *[0-9]+/count: $COUNT/" "$src/config.pbtxt" > "$dir/$name/config.pbtxt"
    printf '\nparameters {\n  key: "share_weights"\n  value { string_value: "%s" }\n}\n' "$share" >> "$dir/$name/config.pbtxt"
    start_tide "$work/serve.log" --model-repository "$dir"
    "$TIDE" bench --url "$url" --endpoint rerank --tokenizer "$MODEL/tokenizer.json" --documents "$DOCS" \
      --doc-tokens scifact --request-pool 64 --seed 42 --concurrency "$CLIENTS" --warmup "${WARMUP}s" \
      --duration "${DURATION}s" --json "$work/run.json" > "$work/run.txt" 2>&1
    pps[$share]=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["runs"][0]["pairs_per_s"])' "$work/run.json")
    kill "$server"; wait "$server" 2>/dev/null || true; server=""
    echo "round $round: share_weights $share: ${pps[$share]} pairs/s (load $(cut -d' ' -f1 /proc/loadavg))"
  done
  echo "round $round: shared / not shared pairs/s: $(echo "${pps[true]} / ${pps[false]}" | bc -l | cut -c1-5)"
done
