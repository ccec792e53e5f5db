#!/usr/bin/env bash
# Quantization benchmark: fidelity + direct ONNX Runtime speed (`tide eval`) and INT8 vs FP32
# pairs/s through `tide serve` at saturation (server_throughput.py). Writes nothing into the
# repository except bench/quantize/results*.md when asked (RESULTS=1).
#
#   bench/quantize/run.sh                      # TIDE_BINARY=build/tide, MODELS=models
#   TIDE_BINARY=build-q/tide QUERIES=40 SECONDS_PER_ROUND=20 bench/quantize/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
TIDE=${TIDE_BINARY:-build/tide}
MODELS=${MODELS:-models}
QUERIES=${QUERIES:-40}
THREADS=${THREADS:-1}
SECONDS_PER_ROUND=${SECONDS_PER_ROUND:-20}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

fp32="$MODELS/minilm-l6/1/model.onnx"
[[ -f $fp32 ]] || { echo "run: $fp32 absent (make models)" >&2; exit 2; }
"$TIDE" quantize --int8 "$fp32" "$WORK/int8.onnx"
"$TIDE" quantize --int8 --per-channel "$fp32" "$WORK/int8-pc.onnx"
"$TIDE" quantize --int8 --reduce-range "$fp32" "$WORK/int8-rr.onnx"
"$TIDE" quantize --int8 --format onnx "$fp32" "$WORK/int8-onnx.onnx"
"$TIDE" quantize --fp16 --fp16-mode weights "$fp32" "$WORK/fp16w.onnx"
echo "## minilm-l6 (default model, random weights), direct ONNX Runtime, $THREADS thread(s)"
"$TIDE" eval --model "$fp32" --queries "$QUERIES" --threads "$THREADS" \
  --variant int8="$WORK/int8.onnx" --variant int8-per-channel="$WORK/int8-pc.onnx" \
  --variant int8-reduce-range="$WORK/int8-rr.onnx" --variant int8-onnx-ops="$WORK/int8-onnx.onnx" \
  --variant fp16-weights="$WORK/fp16w.onnx"

shared=../shared/assets/models/tiny-distilbert-classification/model.onnx
if [[ -f $shared ]]; then
  "$TIDE" quantize --int8 "$shared" "$WORK/d-int8.onnx"
  "$TIDE" quantize --int8 --per-channel "$shared" "$WORK/d-int8-pc.onnx"
  "$TIDE" quantize --fp16 --fp16-mode weights "$shared" "$WORK/d-fp16w.onnx"
  echo "## tiny-distilbert-classification (third-party export, 2 layers, hidden 2), direct ONNX Runtime"
  "$TIDE" eval --model "$shared" --queries "$QUERIES" --threads "$THREADS" \
    --variant int8="$WORK/d-int8.onnx" --variant int8-per-channel="$WORK/d-int8-pc.onnx" \
    --variant fp16-weights="$WORK/d-fp16w.onnx"
fi

# Through the server: one repository with both entries, same load, alternating rounds.
repo="$WORK/repo"
mkdir -p "$repo"
cp -r "$MODELS/minilm-l6" "$repo/minilm-l6"
mkdir -p "$repo/minilm-l6-int8/1"
cp "$WORK/int8.onnx" "$repo/minilm-l6-int8/1/model.onnx"
cp "$MODELS/minilm-l6/tokenizer.json" "$repo/minilm-l6-int8/"
sed 's/^name: "minilm-l6"/name: "minilm-l6-int8"/' "$MODELS/minilm-l6/config.pbtxt" > "$repo/minilm-l6-int8/config.pbtxt"
echo "## through tide serve (closed loop, /v1/rerank, 32 documents per request)"
/usr/bin/python3 bench/quantize/server_throughput.py --tide "$TIDE" --repository "$repo" --seconds "$SECONDS_PER_ROUND"
