#!/usr/bin/env bash
# One model parameter, two values, same binary: alternating rounds of `tide serve` on MODEL with
# parameters { key: PARAM value: A } then B (an empty value: the parameter left unset), each under a
# closed loop of CLIENTS clients x DOCS SciFact-length documents (tide bench) for DURATION s after
# WARMUP s; prints pairs/s and the server's padding ratio (tide_padding_ratio) of each and B / A per
# round. Run it on a quiet machine.
# usage: PARAM=sequence_buckets A= B=16,32,48 bash bench/batching/param_ab.sh [ROUNDS]
#        (MODEL=models/minilm-l6 CLIENTS=16 DOCS=1 DOC_TOKENS=scifact WARMUP=5 DURATION=30 BUILD_DIR=build;
#         COUNT=N: instance_group count N in both arms, else the entry's)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-3}
BUILD=${BUILD_DIR:-build}
MODEL=${MODEL:-models/minilm-l6}
PARAM=${PARAM:?PARAM=name of a model parameter}
A=${A-} B=${B-}
CLIENTS=${CLIENTS:-16} DOCS=${DOCS:-1} DOC_TOKENS=${DOC_TOKENS:-scifact} WARMUP=${WARMUP:-5} DURATION=${DURATION:-30} COUNT=${COUNT:-}
TIDE="$BUILD/tide"
source scripts/lib/tide_server.sh
work=$(mktemp -d /tmp/tide-param-ab-XXXXXX)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
name=$(basename "$MODEL")
src=$(cd "$MODEL" && pwd)
echo "# bench/batching/param_ab.sh $ROUNDS: $PARAM A='${A}' B='${B}' ($name${COUNT:+, count $COUNT}, $CLIENTS clients x $DOCS docs of $DOC_TOKENS tokens, ${WARMUP}+${DURATION} s); load $(cut -d' ' -f1-3 /proc/loadavg); git $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
for round in $(seq "$ROUNDS"); do
  declare -A pps=()
  for arm in A B; do
    value=${!arm}
    dir="$work/repo-$arm"
    rm -rf "$dir"; mkdir -p "$dir/$name"
    ln -s "$src/1" "$dir/$name/1"
    for f in "$src"/*; do [ -f "$f" ] && [ "$(basename "$f")" != config.pbtxt ] && ln -s "$f" "$dir/$name/"; done
    if [ -n "$COUNT" ]; then
      sed -E "s/count: *[0-9]+/count: $COUNT/" "$src/config.pbtxt" > "$dir/$name/config.pbtxt"
    else
      cp "$src/config.pbtxt" "$dir/$name/config.pbtxt"
    fi
    [ -n "$value" ] && printf '\nparameters {\n  key: "%s"\n  value { string_value: "%s" }\n}\n' "$PARAM" "$value" >> "$dir/$name/config.pbtxt"
    start_tide "$work/serve.log" --model-repository "$dir"
    "$TIDE" bench --url "$url" --endpoint rerank --tokenizer "$MODEL/tokenizer.json" --documents "$DOCS" \
      --doc-tokens "$DOC_TOKENS" --request-pool 64 --seed 42 --concurrency "$CLIENTS" --warmup "${WARMUP}s" \
      --duration "${DURATION}s" --json "$work/run.json" > "$work/run.txt" 2>&1
    pps[$arm]=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["runs"][0]["pairs_per_s"])' "$work/run.json")
    # The server's padding over the whole arm (warm-up included): padded / real tokens run.
    padding=$(curl -s "$url/metrics" | awk '/^tide_padding_ratio\{/ && !seen {print $2; seen = 1}' || true)
    kill "$server"; wait "$server" 2>/dev/null || true; server=""
    echo "round $round: $arm ($PARAM='${value}'): ${pps[$arm]} pairs/s, padding ratio ${padding:-?} (load $(cut -d' ' -f1 /proc/loadavg))"
  done
  echo "round $round: B / A pairs/s: $(echo "${pps[B]} / ${pps[A]}" | bc -l | cut -c1-5)"
done
