#!/usr/bin/env bash
# The shared weights in an unnamed file whose pages leave the process (model parameter weights_file,
# the default) against the same weights in anonymous memory (weights_file "false"), same binary,
# alternating rounds: VmHWM during the load, VmRSS after warm-up (bench/memory/load_timeline.py).
#
# usage: bash bench/memory/weights_file.sh [ROUNDS]   (env MODEL=models/minilm-l6, BUILD_DIR=build)
#   bge: MODEL=$BENCH_MODELS/bge-reranker-base bash bench/memory/weights_file.sh 1
# The "false" entry is a copy of MODEL's folder (version folders linked, not copied) whose
# config.pbtxt gains parameters { key: "weights_file" value { string_value: "false" } }.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS="${1:-2}"
MODEL="${MODEL:-models/minilm-l6}"
TIDE="${BUILD_DIR:-build}/tide"
[[ -x "$TIDE" ]] || { echo "weights_file.sh: $TIDE not built (make build)" >&2; exit 2; }
[[ -f "$MODEL/config.pbtxt" ]] || { echo "weights_file.sh: $MODEL is not a model entry" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
name="$(basename "$MODEL")"
anon="$work/$name"
mkdir -p "$anon"
for f in "$MODEL"/*; do ln -s "$(realpath "$f")" "$anon/$(basename "$f")"; done
rm "$anon/config.pbtxt"
{ cat "$MODEL/config.pbtxt"; printf '\nparameters {\n  key: "weights_file"\n  value { string_value: "false" }\n}\n'; } \
  > "$anon/config.pbtxt"
echo "# bench/memory/weights_file.sh $ROUNDS (MODEL=$MODEL, $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
for ((r = 1; r <= ROUNDS; r++)); do
  for variant in file memory; do
    dir="$MODEL"
    [[ "$variant" == memory ]] && dir="$anon"
    out="$(/usr/bin/python3 bench/memory/load_timeline.py "$dir" --tide "$TIDE" 2>&1)"
    printf 'round %d weights_file=%-6s %s\n' "$r" "$([[ $variant == file ]] && echo true || echo false)" \
      "$(grep -E '^after ' <<<"$out")"
  done
done
