#!/usr/bin/env bash
# Starts one benchmark peer in the foreground on 127.0.0.1:PORT (it replaces this shell, so the
# caller's PID is the server's), every one serving the same model with TEI's request format
# (POST /rerank {"query", "texts", "raw_scores"?} -> [{"index", "score"}]):
#   prototype     FastAPI + uvicorn + PyTorch FP32 (bench/peers/prototype_server.py); the weights are
#                 rebuilt from the export preset and seed (tools/crossencoder.py, tools/decoder.py; a
#                 decoder's prompt from MODEL's config.pbtxt)
#   node          Node.js + onnxruntime-node, one session (bench/peers/node_server.js)
#   tide-nobatch  tide serve, max_batch_size 1 and no dynamic_batching: every pair runs alone
#   tide-batch    tide serve with the model entry's own config.pbtxt (dynamic batching, FP32)
#                 (tide rows run with --default-timeout-ms 0: no deadline, as the other peers)
#   tide-int8     the same config, model quantized by `tide quantize --int8` (or MODEL_INT8's entry)
#   llama-f32     llama.cpp through node-llama-cpp@3.22.1 (bench/peers/llama_server.js), one ranking
#                 context, the same weights as GGUF F32 (tools/export_gguf.py: PRESET rebuilt with SEED,
#                 MODEL's tokenizer.json), written once into GGUF_DIR
#   llama-q8      the same, GGUF Q8_0 (ggml's 8-bit blocks of 32 with an fp16 scale)
# usage: bench/peers/start.sh PEER PORT WORKDIR
#   WORKDIR: a scratch folder for the tide model repositories (and the INT8 model, made once).
# env: BUILD_DIR (build), MODEL (models/minilm-l6), PRESET (minilm-l6), SEED (20240611: the export
#      default, so the prototype's weights are the exported ones), MODEL_INT8 (an entry already
#      quantized, e.g. tools/export_model.py --int8's <name>-int8: tide-int8 serves its model.onnx
#      instead of quantizing MODEL into WORKDIR at start-up), GGUF_DIR (WORKDIR: where the llama rows'
#      GGUF files are written once and then reused; a folder outside the repository keeps them between
#      runs, e.g. bge-reranker-base's 1.1 GB F32 file), LLAMA_THREADS (the llama rows' threads; default
#      node-llama-cpp's cpuMathCores, see llama_server.js), TIDE_INSTANCES (the tide rows' instance
#      count, written into the entry's instance_group; default the entry's own), TIDE_PARAMETERS
#      ("key=value;key=value": model parameters appended to the tide rows' config.pbtxt, e.g.
#      TIDE_PARAMETERS="batch_saturation_tokens=400").
# An embedding entry (config.pbtxt task "embed", a tools/biencoder.py PRESET) is served with TEI's
# POST /embed {"inputs": [...]} -> [[float, ...], ...] instead, by the prototype, node and tide rows.
# Readiness: tide answers GET /v2/health/ready, the others GET /health.
set -euo pipefail
cd "$(dirname "$0")/../.."
peer=${1:?usage: start.sh PEER PORT WORKDIR}
port=${2:?usage: start.sh PEER PORT WORKDIR}
work=${3:?usage: start.sh PEER PORT WORKDIR}
BUILD=${BUILD_DIR:-build}
MODEL=${MODEL:-models/minilm-l6}
PRESET=${PRESET:-minilm-l6}
SEED=${SEED:-20240611}
TIDE="$BUILD/tide"
name=$(basename "$MODEL")
mkdir -p "$work"
work=$(cd "$work" && pwd)
model_abs=$(cd "$MODEL" && pwd)

# A one-model repository in $work/$1 whose config is the entry's, passed through the sed script $2.
tide_repo() {
  local repo="$work/$1" onnx=$3
  rm -rf "$repo"
  mkdir -p "$repo/$name"
  if [ -f "$onnx.data" ]; then
    # External data (a decoder's 2.4 GB): ONNX Runtime refuses a data file outside the model's own
    # folder, so the version folder itself is the link.
    ln -s "$(dirname "$onnx")" "$repo/$name/1"
  else
    mkdir -p "$repo/$name/1"
    ln -s "$onnx" "$repo/$name/1/model.onnx"
  fi
  ln -s "$model_abs/tokenizer.json" "$repo/$name/tokenizer.json"
  sed -e "$2" "$model_abs/config.pbtxt" > "$repo/$name/config.pbtxt"
  echo "$repo"
}

# Removes the dynamic_batching { ... } block (nested braces included) and sets max_batch_size 1.
no_batching() {
  /usr/bin/python3 - "$1" <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
start = text.find("dynamic_batching")
if start >= 0:
    depth, i = 0, text.index("{", start)
    while True:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
        if depth == 0:
            break
    text = text[:start] + text[i:]
text, n = re.subn(r"max_batch_size:\s*\d+", "max_batch_size: 1", text)
if n != 1:
    sys.exit(f"{path}: no max_batch_size to set")
open(path, "w").write(text)
PY
}

case "$peer" in
  prototype)
    exec /usr/bin/python3 bench/peers/prototype_server.py --port "$port" --preset "$PRESET" --seed "$SEED" \
      --tokenizer "$MODEL/tokenizer.json" --config "$MODEL/config.pbtxt"
    ;;
  node)
    exec node bench/peers/node_server.js --port "$port" --model "$MODEL"
    ;;
  tide-nobatch|tide-batch|tide-int8)
    [ -x "$TIDE" ] || { echo "start: $TIDE not built" >&2; exit 2; }
    onnx="$model_abs/1/model.onnx"
    if [ "$peer" = tide-int8 ] && [ -n "${MODEL_INT8:-}" ]; then
      onnx="$(cd "$MODEL_INT8" && pwd)/1/model.onnx"
    elif [ "$peer" = tide-int8 ]; then
      onnx="$work/model-int8.onnx"
      if [ ! -f "$onnx" ]; then
        echo "start: $TIDE quantize --int8 $MODEL/1/model.onnx"
        "$TIDE" quantize --int8 "$model_abs/1/model.onnx" "$onnx.tmp" >&2
        mv "$onnx.tmp" "$onnx"
      fi
    fi
    instances=""
    if [ -n "${TIDE_INSTANCES:-}" ]; then
      grep -q "^ *count: *[0-9]" "$model_abs/config.pbtxt" ||
        { echo "start: TIDE_INSTANCES: $MODEL/config.pbtxt has no instance_group count to set" >&2; exit 2; }
      instances="/instance_group/,/]/ s/count: *[0-9]*/count: $TIDE_INSTANCES/"
    fi
    repo=$(tide_repo "$peer" "$instances" "$onnx")
    [ "$peer" = tide-nobatch ] && no_batching "$repo/$name/config.pbtxt"
    if [ -n "${TIDE_PARAMETERS:-}" ]; then
      IFS=';' read -ra params <<< "$TIDE_PARAMETERS"
      for kv in "${params[@]}"; do
        [[ "$kv" == *=* ]] || { echo "start: TIDE_PARAMETERS: '$kv' is not key=value" >&2; exit 2; }
        printf '\nparameters {\n  key: "%s"\n  value { string_value: "%s" }\n}\n' "${kv%%=*}" "${kv#*=}" \
          >> "$repo/$name/config.pbtxt"
      done
    fi
    echo "start: $peer config:"
    sed 's/^/  /' "$repo/$name/config.pbtxt"
    # No server-side deadline (tide's default is 30 s): the other peers have none, and a saturated
    # closed loop must be measured, not shed.
    exec "$TIDE" serve --model-repository "$repo" --host 127.0.0.1 --port "$port" --log-level warn \
      --default-timeout-ms 0
    ;;
  llama-f32|llama-q8)
    type=f32
    [ "$peer" = llama-q8 ] && type=q8_0
    gguf_dir=${GGUF_DIR:-$work}
    mkdir -p "$gguf_dir"
    # The file's name says what it was written from, so a changed preset, seed or tokenizer makes a new one.
    tok_hash=$(sha256sum "$MODEL/tokenizer.json" tools/export_gguf.py tools/gguf_writer.py tools/crossencoder.py |
      sha256sum | cut -c1-12)
    gguf="$gguf_dir/$PRESET-seed$SEED-$tok_hash-$type.gguf"
    if [ ! -f "$gguf" ]; then
      # (the log names the file, not the folder: run_all keeps this log in its results)
      echo "start: tools/export_gguf.py --preset $PRESET --seed $SEED --type $type -> $(basename "$gguf")"
      /usr/bin/python3 tools/export_gguf.py --preset "$PRESET" --seed "$SEED" --tokenizer "$MODEL/tokenizer.json" \
        --type "$type" --output "$gguf.tmp" 2>&1 | sed "s|$gguf_dir/||g" >&2
      mv "$gguf.tmp" "$gguf"
    else
      echo "start: $(basename "$gguf") already written"
    fi
    exec node bench/peers/llama_server.js --port "$port" --gguf "$gguf" --model "$MODEL" \
      ${LLAMA_THREADS:+--threads "$LLAMA_THREADS"}
    ;;
  *)
    echo "start: unknown peer '$peer' (prototype, node, tide-nobatch, tide-batch, tide-int8, llama-f32, llama-q8)" >&2
    exit 2
    ;;
esac
