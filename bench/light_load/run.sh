#!/usr/bin/env bash
# Light-load latency of tide's thread layouts against the best peer, in one run.
#
# Servers, all started once and measured in turn (an idle server costs no CPU: no spinning):
#   fixed      tide serve, thread_layout "fixed": every batch on its instance's intra_op_threads
#              (the model entry's 2 instances x 1 thread: a lone request gets one core)
#   adaptive   tide serve, thread_layout "adaptive": a batch that starts with nothing else running
#              or queued runs on a second session with count x intra_op_threads threads
#   node       Node.js + onnxruntime-node, one session at its defaults (bench/peers/node_server.js),
#              the best peer at light load in bench/run_all (open-loop P99 292 ms vs the prototype's 6 s)
# For each request shape (1 query + 1 document, 1 query + 16 documents; SciFact lengths):
#   1. capacity: a closed loop of --clients clients per server, --rounds rounds in alternating order;
#      saturation throughput adaptive / fixed is the "within 3% of today's" check;
#   2. open loop, Poisson arrivals at 10%, 30% and 70% of the node peer's measured capacity (the
#      best peer; the fixed layout's when node is missing), each point on every server in turn,
#      order rotated per round; P50 / P99 from each request's intended send time.
# Prints (and writes bench/results/light_load-<UTC stamp>.txt) per shape and load: every server's
# P50 / P99 and requests measured, adaptive / best peer and adaptive / fixed ratios, and the load
# average. On a shared machine the ratios within one round are what to read.
#
# usage: bench/light_load/run.sh [--short] [--rounds N] [--duration S] [--clients N]
#                                [--shapes 1,16] [--fractions 0.1,0.3,0.7] [--servers fixed,adaptive,node]
#                                [--inference-nice N]
#   closed loops of an N-document shape run --duration x min(4, max(1, N/4)) seconds (16 documents:
#   4x), so a window still completes several requests;
#   --inference-nice N: passed to both tide servers (default: tide's own, 10). On a machine shared
#   with other work, tide's inference threads at nice 10 get less CPU than the Node peer's at nice
#   0; --inference-nice 0 compares the layouts on equal terms there.
#   --short: 1 round, 10 s closed loops (1 document), open-loop points of at least 15 s / 12 requests (~6 min)
#   default: 2 rounds, 30 s closed loops, open-loop points of at least 30 s / 40 requests (a 10%
#   point of the 16-document shape is capped at 240 s)
# env: BUILD_DIR (build), MODEL (models/minilm-l6), TIDE_NODE_ORT (onnxruntime-node module; default
#      third_party/peers/node, installed by bench/peers/setup.sh)
set -uo pipefail
cd "$(dirname "$0")/../.."

ROUNDS=2 DURATION=30 WARMUP=5 CLIENTS=8 SHAPES=1,16 FRACTIONS=0.1,0.3,0.7 SERVERS=fixed,adaptive,node
MIN_OPEN_S=30 MIN_OPEN_REQUESTS=40 MAX_OPEN_S=240 NICE=()
ARGS="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    --short) ROUNDS=1 DURATION=10 WARMUP=3 MIN_OPEN_S=15 MIN_OPEN_REQUESTS=12 MAX_OPEN_S=60; shift ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --shapes) SHAPES=$2; shift 2 ;;
    --fractions) FRACTIONS=$2; shift 2 ;;
    --servers) SERVERS=$2; shift 2 ;;
    --inference-nice) NICE=(--inference-nice "$2"); shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "light_load: unknown flag $1 (--help)" >&2; exit 2 ;;
  esac
done
BUILD=${BUILD_DIR:-build}
MODEL=${MODEL:-models/minilm-l6}
TIDE="$BUILD/tide"
PY=/usr/bin/python3
[ -x "$TIDE" ] || { echo "light_load: build $TIDE first" >&2; exit 2; }
IFS=, read -r -a servers <<< "$SERVERS"
IFS=, read -r -a shapes <<< "$SHAPES"
IFS=, read -r -a fractions <<< "$FRACTIONS"

stamp=$(date -u +%Y%m%dT%H%MZ)
out="bench/results/light_load-$stamp"
mkdir -p "$out"
work=$(mktemp -d /tmp/tide-light-load-XXXXXX)
declare -A pid port
cleanup() {
  for s in "${!pid[@]}"; do kill -TERM -- "-${pid[$s]}" 2>/dev/null || kill -TERM "${pid[$s]}" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# A one-model repository whose config is the entry's plus parameters { thread_layout: $2 }.
tide_repo() {
  local repo="$work/$1" name model_abs
  name=$(basename "$MODEL"); model_abs=$(cd "$MODEL" && pwd)
  mkdir -p "$repo/$name/1"
  ln -s "$model_abs/1/model.onnx" "$repo/$name/1/model.onnx"
  ln -s "$model_abs/tokenizer.json" "$repo/$name/tokenizer.json"
  grep -v thread_layout "$model_abs/config.pbtxt" > "$repo/$name/config.pbtxt"
  printf 'parameters {\n  key: "thread_layout"\n  value { string_value: "%s" }\n}\n' "$2" >> "$repo/$name/config.pbtxt"
  echo "$repo"
}

{
  echo "# bench/light_load/run.sh${ARGS:+ $ARGS}"
  echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ), git $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo '+dirty'), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), model $(basename "$MODEL")"
  echo "# load average at start: $(loadavg)"
} > "$out/header.txt"
cat "$out/header.txt"

for s in "${servers[@]}"; do
  port[$s]=$(free_port)
  case "$s" in
    fixed|adaptive)
      repo=$(tide_repo "$s" "$s")
      setsid "$TIDE" serve --model-repository "$repo" --host 127.0.0.1 --port "${port[$s]}" --log-level warn \
        --default-timeout-ms 0 "${NICE[@]}" > "$out/$s-server.log" 2>&1 &
      ;;
    node)
      [ -n "${TIDE_NODE_ORT:-}" ] && export TIDE_NODE_ORT
      setsid node bench/peers/node_server.js --port "${port[$s]}" --model "$MODEL" > "$out/$s-server.log" 2>&1 &
      ;;
    *) echo "light_load: unknown server $s (fixed, adaptive, node)" >&2; exit 2 ;;
  esac
  pid[$s]=$!
done
for s in "${servers[@]}"; do
  case "$s" in node) health=/health ;; *) health=/v2/health/ready ;; esac
  for _ in $(seq 1500); do
    curl -sf -o /dev/null "http://127.0.0.1:${port[$s]}$health" && break
    kill -0 "${pid[$s]}" 2>/dev/null || break
    sleep 0.2
  done
  curl -sf -o /dev/null "http://127.0.0.1:${port[$s]}$health" ||
    { echo "light_load: $s did not start: $(tail -2 "$out/$s-server.log")" >&2; exit 1; }
done
echo "light_load: servers ready: $(for s in "${servers[@]}"; do printf '%s:%s ' "$s" "${port[$s]}"; done)(load $(loadavg))"

# bench SERVER SHAPE LABEL ARGS...: one tide bench run; JSON in $out/raw/SHAPE-LABEL-SERVER.json.
mkdir -p "$out/raw"
bench() {
  local s=$1 shape=$2 label=$3; shift 3
  local scrape=--no-scrape-metrics
  [ "$s" = node ] || scrape=--scrape-metrics
  "$TIDE" bench --url "http://127.0.0.1:${port[$s]}" --endpoint rerank --tokenizer "$MODEL/tokenizer.json" \
    --documents "$shape" --doc-tokens scifact --request-pool 256 --seed 42 --timeout-ms 600000 "$scrape" "$@" \
    --json "$out/raw/$shape-$label-$s.json" > "$out/raw/$shape-$label-$s.txt" 2>&1
  echo "$(loadavg)" > "$out/raw/$shape-$label-$s.load"
}
# Rotates the server list by the round number, so no server always runs first (or last).
order() {
  local r=$1 n=${#servers[@]} i
  for i in $(seq 0 $((n - 1))); do printf '%s ' "${servers[$(((i + r) % n))]}"; done
}

for shape in "${shapes[@]}"; do
  closed_s=$((DURATION * (shape / 4 < 1 ? 1 : (shape / 4 > 4 ? 4 : shape / 4))))
  for r in $(seq 1 "$ROUNDS"); do
    for s in $(order "$r"); do
      echo "light_load: [$shape doc] round $r closed loop $s, $CLIENTS clients, ${WARMUP} s + ${closed_s} s (load $(loadavg))"
      bench "$s" "$shape" "closed-r$r" --concurrency "$CLIENTS" --warmup "${WARMUP}s" --duration "${closed_s}s"
    done
  done
  capacity=$($PY bench/light_load/summarize.py capacity "$out/raw" "$shape" "${servers[@]}")
  echo "light_load: [$shape doc] capacity (best peer) $capacity req/s"
  for f in "${fractions[@]}"; do
    rate=$($PY -c "print(round($capacity * $f, 4))")
    secs=$($PY -c "print(int(min($MAX_OPEN_S, max($MIN_OPEN_S, $MIN_OPEN_REQUESTS / max($rate, 1e-9)))))")
    for r in $(seq 1 "$ROUNDS"); do
      for s in $(order "$((r + 1))"); do
        echo "light_load: [$shape doc] round $r open loop $s at $f x capacity = $rate req/s for ${secs} s (load $(loadavg))"
        bench "$s" "$shape" "open$f-r$r" --request-rate "$rate" --arrivals poisson --max-connections 256 \
          --warmup "${WARMUP}s" --duration "${secs}s"
      done
    done
  done
done
echo "# load average at end: $(loadavg)" >> "$out/header.txt"
{ cat "$out/header.txt"; $PY bench/light_load/summarize.py table "$out/raw" "$SHAPES" "$FRACTIONS" "$ROUNDS" "${servers[@]}"; } |
  tee "$out/summary.txt"
echo "light_load: wrote $out/summary.txt (raw: $out/raw)"
