#!/usr/bin/env bash
# Quantization benchmark, one run:
#  1. the fidelity table of `tide eval` (INT8 and FP16 variants against FP32 on the same seeded
#     rerank requests: score differences, Spearman/Kendall per query, top-1/top-10 agreement,
#     NDCG@10, next to pairs/s and memory) for minilm-l6 and for the third-party DistilBERT export;
#  2. INT8 vs FP32 pairs/s through one `tide serve` holding both entries, at saturation, same load
#     (alternating rounds), with the ratio (server_throughput.py).
# Writes nothing into the repository; everything goes to stdout.
#
#   bench/quantize/run.sh                  # full run: about 8-10 min on an idle 2-core machine
#   SMOKE=1 bench/quantize/run.sh          # 1-2 min: proves the script works, numbers mean nothing
#   TIDE_BINARY=build-q/tide QUERIES=4 SECONDS_PER_ROUND=10 bench/quantize/run.sh
#   BEFORE_BINARY=/tmp/tide-old bench/quantize/run.sh   # also serves FP32 and INT8 fused by an older
#                                  # tide (`tide optimize`): before/after ratios in the same run
#   SKIP_FIDELITY=1 bench/quantize/run.sh                # the server part only
#
# Settings (environment): TIDE_BINARY (build/tide), MODELS (models), THREADS (1 intra-op thread for
# tide eval), QUERIES (5 queries x 16-100 documents, ~290 pairs of ~345 tokens: minilm-l6 at ~1.2 s
# per pair over its five variants on one core), MIN_DOCS (16), MAX_DOCS (100), MAX_LENGTH (512
# tokens per pair, for tide eval and the served models), SHARED_QUERIES (40, the DistilBERT export
# is ~100x cheaper), SECONDS_PER_ROUND (30), ROUNDS (2 per model), CLIENTS (4), DOCS (16 documents
# per request), MEAN_WORDS (150 words, ~300 tokens per pair with the query).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [[ ${SMOKE:-0} == 1 ]]; then
  : "${QUERIES:=1}" "${MIN_DOCS:=4}" "${MAX_DOCS:=4}" "${MAX_LENGTH:=128}" "${SHARED_QUERIES:=2}"
  : "${SECONDS_PER_ROUND:=4}" "${ROUNDS:=1}" "${CLIENTS:=2}" "${DOCS:=4}" "${MEAN_WORDS:=40}"
fi
TIDE=${TIDE_BINARY:-build/tide}
MODELS=${MODELS:-models}
THREADS=${THREADS:-1}
QUERIES=${QUERIES:-5}
MIN_DOCS=${MIN_DOCS:-16}
MAX_DOCS=${MAX_DOCS:-100}
MAX_LENGTH=${MAX_LENGTH:-512}
SHARED_QUERIES=${SHARED_QUERIES:-40}
SECONDS_PER_ROUND=${SECONDS_PER_ROUND:-30}
ROUNDS=${ROUNDS:-2}
CLIENTS=${CLIENTS:-4}
DOCS=${DOCS:-16}
MEAN_WORDS=${MEAN_WORDS:-150}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

fp32="$MODELS/minilm-l6/1/model.onnx"
[[ -x $TIDE ]] || { echo "run: $TIDE absent (build it, or set TIDE_BINARY)" >&2; exit 2; }
[[ -f $fp32 ]] || { echo "run: $fp32 absent (make models)" >&2; exit 2; }
echo "# bench/quantize/run.sh, $(date -u +%FT%TZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)${BEFORE_BINARY:+, BEFORE_BINARY=$(basename "$BEFORE_BINARY")}"
echo "# TIDE_BINARY=$TIDE QUERIES=$QUERIES MIN_DOCS=$MIN_DOCS MAX_DOCS=$MAX_DOCS MAX_LENGTH=$MAX_LENGTH THREADS=$THREADS SHARED_QUERIES=$SHARED_QUERIES" \
  "SECONDS_PER_ROUND=$SECONDS_PER_ROUND ROUNDS=$ROUNDS CLIENTS=$CLIENTS DOCS=$DOCS MEAN_WORDS=$MEAN_WORDS"

"$TIDE" quantize --int8 "$fp32" "$WORK/int8.onnx"
"$TIDE" quantize --int8 --per-channel "$fp32" "$WORK/int8-pc.onnx"
"$TIDE" quantize --fp16 "$fp32" "$WORK/fp16.onnx"
"$TIDE" quantize --fp16 --fp16-mode weights "$fp32" "$WORK/fp16w.onnx"
# The graphs tide serve runs (graph_fusion = auto fuses them at load the same way).
"$TIDE" optimize "$fp32" "$WORK/fp32-fused.onnx" | tail -1
"$TIDE" optimize "$WORK/int8.onnx" "$WORK/int8-fused.onnx" | tail -1
if [[ ${SKIP_FIDELITY:-0} != 1 ]]; then
echo
echo "## minilm-l6 (default model, random weights), direct ONNX Runtime, $THREADS intra-op thread(s)"
echo
"$TIDE" eval --model "$fp32" --queries "$QUERIES" --min-docs "$MIN_DOCS" --max-docs "$MAX_DOCS" \
  --max-length "$MAX_LENGTH" --threads "$THREADS" \
  --variant fp32-fused="$WORK/fp32-fused.onnx" \
  --variant int8="$WORK/int8.onnx" --variant int8-fused="$WORK/int8-fused.onnx" \
  --variant int8-per-channel="$WORK/int8-pc.onnx" \
  --variant fp16-matmul="$WORK/fp16.onnx" --variant fp16-weights="$WORK/fp16w.onnx"
echo "(${SECONDS}s so far)"
fi

shared=../shared/assets/models/tiny-distilbert-classification/model.onnx
if [[ ${SKIP_FIDELITY:-0} == 1 ]]; then
  :
elif [[ -f $shared ]]; then
  "$TIDE" quantize --int8 "$shared" "$WORK/d-int8.onnx"
  "$TIDE" quantize --int8 --per-channel "$shared" "$WORK/d-int8-pc.onnx"
  "$TIDE" quantize --fp16 "$shared" "$WORK/d-fp16.onnx"
  echo
  echo "## tiny-distilbert-classification (third-party export, 2 layers, hidden size 2: ranking columns are noise)"
  echo
  "$TIDE" eval --model "$shared" --queries "$SHARED_QUERIES" --min-docs "$MIN_DOCS" --max-docs "$MAX_DOCS" \
    --max-length "$MAX_LENGTH" --threads "$THREADS" --variant int8="$WORK/d-int8.onnx" --variant int8-per-channel="$WORK/d-int8-pc.onnx" \
    --variant fp16-matmul="$WORK/d-fp16.onnx"
  echo "(${SECONDS}s so far)"
else
  echo "run: $shared absent: third-party fidelity table skipped" >&2
fi

# Through the server: one repository with both entries, the layout `tools/export_model.py --int8`
# writes (<name> and <name>-int8, same config and tokenizer).
repo="$WORK/repo"
mkdir -p "$repo/minilm-l6/1" "$repo/minilm-l6-int8/1"
ln -s "$(realpath "$fp32")" "$repo/minilm-l6/1/model.onnx"
cp "$WORK/int8.onnx" "$repo/minilm-l6-int8/1/model.onnx"
entries="minilm-l6 minilm-l6-int8"
models=""
ratios=()
if [[ -n ${BEFORE_BINARY:-} ]]; then
  # Fused by the older binary: the server finds them already fused and serves them as they are.
  mkdir -p "$repo/minilm-l6-before/1" "$repo/minilm-l6-int8-before/1"
  "$BEFORE_BINARY" optimize "$fp32" "$repo/minilm-l6-before/1/model.onnx" | tail -1
  "$BEFORE_BINARY" optimize "$WORK/int8.onnx" "$repo/minilm-l6-int8-before/1/model.onnx" | tail -1
  entries="$entries minilm-l6-before minilm-l6-int8-before"
  models="--models minilm-l6-before,minilm-l6-int8-before,minilm-l6,minilm-l6-int8"
  ratios=(--ratio minilm-l6-int8-before/minilm-l6-before --ratio minilm-l6/minilm-l6-before
          --ratio minilm-l6-int8/minilm-l6-int8-before)
fi
for entry in $entries; do
  cp "$MODELS/minilm-l6/tokenizer.json" "$repo/$entry/"
  sed -e "s/^name: \"minilm-l6\"/name: \"$entry\"/" \
    -e "/key: \"max_sequence_length\"/{n;s/string_value: \"[0-9]*\"/string_value: \"$MAX_LENGTH\"/}" \
    "$MODELS/minilm-l6/config.pbtxt" > "$repo/$entry/config.pbtxt"
done
echo
echo "## INT8 vs FP32 through tide serve (closed loop, $CLIENTS clients, POST /v1/rerank, $DOCS documents per request)"
echo
/usr/bin/python3 bench/quantize/server_throughput.py --tide "$TIDE" --repository "$repo" --seconds "$SECONDS_PER_ROUND" \
  --rounds "$ROUNDS" --clients "$CLIENTS" --docs "$DOCS" --mean-words "$MEAN_WORDS" $models "${ratios[@]}"
echo "(total ${SECONDS}s, load average at end $(cut -d' ' -f1-3 /proc/loadavg))"
