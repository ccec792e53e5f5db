#!/usr/bin/env bash
# Single-thread tokens/s of tide vs HF's Rust tokenizer (Node binding) on the same pairs, for
# WordPiece (bert-base-uncased) and Unigram (t5-small-unigram), and the ratio tide/reference.
# usage: bench/tokenizer/run.sh [BUILD_DIR] [SECONDS]    (run from the repository root)
set -euo pipefail
BUILD_DIR="${1:-${BUILD_DIR:-build}}"
SECONDS_PER_SIDE="${2:-3}"
BENCH="$BUILD_DIR/bench/tokenizer_bench"
ASSETS="../shared/assets/tokenizers"
if [[ ! -x "$BENCH" ]]; then
  echo "missing $BENCH: cmake --build $BUILD_DIR --target tokenizer_bench" >&2
  exit 2
fi
if [[ ! -d "$ASSETS" ]]; then
  echo "skipped: $ASSETS is absent" >&2
  exit 0
fi
export TOKENIZERS_PARALLELISM=false
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for name in bert-base-uncased:WordPiece t5-small-unigram:Unigram; do
  dir="${name%%:*}"
  model="${name##*:}"
  json="$ASSETS/$dir/tokenizer.json"
  tide_line="$(taskset -c 0 "$BENCH" --tokenizer "$json" --seconds "$SECONDS_PER_SIDE" --write-corpus "$tmp/pairs.jsonl" 2>/dev/null || "$BENCH" --tokenizer "$json" --seconds "$SECONDS_PER_SIDE" --write-corpus "$tmp/pairs.jsonl")"
  ref_line="$(node bench/tokenizer/reference_bench.js "$json" "$tmp/pairs.jsonl" "$SECONDS_PER_SIDE")"
  tide_tps="$(awk '{print $2}' <<<"$tide_line")"
  ref_tps="$(awk '{print $2}' <<<"$ref_line")"
  echo "$model ($dir): $tide_line"
  echo "$model ($dir): $ref_line"
  awk -v a="$tide_tps" -v b="$ref_tps" -v m="$model" 'BEGIN { printf "%s ratio tide/reference: %.2fx\n", m, a / b }'
done
