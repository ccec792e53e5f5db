#!/usr/bin/env bash
# The cost of tracing, measured in one run with one tide build: three servers of the same binary
# and model, tracing off (no endpoint), sampled at 1% (--trace-sampler traceidratio
# --trace-sampler-arg 0.01) and at 100% (always_on), the two traced ones exporting over OTLP/HTTP to
# a receiver that accepts and discards (bench/tracing_cost/discard_receiver.py). Each round runs
# `tide bench` (closed loop, CONCURRENCY clients: saturation) against each server in turn; the
# rounds alternate the order. Prints throughput, P50 and P99 side by side and the ratios of each
# traced server to the untraced one (median over the rounds), and writes everything to
# bench/results/tracing_cost-<UTC timestamp>.txt. Ratios, not absolute figures: the machine may be
# shared (the header says its core count and load).
# Usage: bench/tracing_cost/run.sh   (env: BUILD_DIR=build MODELS=models MODEL=minilm-l6 DURATION=5s
#        CONCURRENCY=8 DOCS=4 ROUNDS=3 MAX_SEQUENCE_LENGTH=; MODELS=/path for a folder elsewhere)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
MODELS=${MODELS:-models}
MODEL=${MODEL:-minilm-l6}
DURATION=${DURATION:-5s}
CONCURRENCY=${CONCURRENCY:-8}
DOCS=${DOCS:-4}
ROUNDS=${ROUNDS:-3}
TIDE="$BUILD/tide"
[ -x "$TIDE" ] || { echo "no $TIDE: build it first (cmake --build $BUILD --target tide)" >&2; exit 1; }
[ -f "$MODELS/$MODEL/tokenizer.json" ] || { echo "no model $MODELS/$MODEL (make models, or MODELS=... MODEL=...)" >&2; exit 1; }

work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

mkdir "$work/repo"
if [ -n "${MAX_SEQUENCE_LENGTH:-}" ]; then
  mkdir "$work/repo/$MODEL"
  for f in "$(realpath "$MODELS/$MODEL")"/*; do ln -s "$f" "$work/repo/$MODEL/"; done
  rm -f "$work/repo/$MODEL/config.pbtxt"
  printf 'backend: "onnxruntime"\nmax_batch_size: 16\nparameters { key: "max_sequence_length" value { string_value: "%s" } }\n' \
    "$MAX_SEQUENCE_LENGTH" >"$work/repo/$MODEL/config.pbtxt"
else
  ln -s "$(realpath "$MODELS/$MODEL")" "$work/repo/$MODEL"
fi

# The OTLP receiver: accepts every export (200) and discards it; counts what it got.
/usr/bin/python3 bench/tracing_cost/discard_receiver.py "$work/receiver.port" "$work/receiver.count" &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/receiver.port" ] && break; sleep 0.1; done
receiver="http://127.0.0.1:$(cat "$work/receiver.port")"

# start NAME FLAGS...: starts tide serve, waits for its listening line, sets port_NAME.
start() {
  local name=$1 log="$work/$1.log"
  shift
  "$TIDE" serve --model-repository "$work/repo" --port 0 --grpc-port 0 --log-level warn "$@" >"$log" 2>&1 &
  pids+=($!)
  for _ in $(seq 3000); do
    grep -q "listening on" "$log" && break
    kill -0 "${pids[-1]}" 2>/dev/null || { echo "tide serve ($name) exited:" >&2; cat "$log" >&2; exit 1; }
    sleep 0.1
  done
  grep -q "listening on" "$log" || { echo "tide serve ($name) did not start:" >&2; cat "$log" >&2; exit 1; }
  printf -v "port_$name" '%s' "$(grep -o 'listening on http://[^ ]*' "$log" | sed 's/.*://')"
}
start off
start ratio001 --otlp-endpoint "$receiver" --trace-sampler traceidratio --trace-sampler-arg 0.01
start ratio1 --otlp-endpoint "$receiver" --trace-sampler always_on

bench() {
  local name=$1 port=$2 out=$3
  "$TIDE" bench --url "http://127.0.0.1:$port" --endpoint rerank --model "$MODEL" \
    --tokenizer "$MODELS/$MODEL/tokenizer.json" --documents "$DOCS" --query-tokens 8 --doc-tokens 32 \
    --concurrency "$CONCURRENCY" --warmup 1s --duration "$DURATION" --no-scrape-metrics --json "$out" \
    >/dev/null 2>"$work/err" || { echo "tide bench ($name) failed:" >&2; cat "$work/err" >&2; exit 1; }
}

stamp=$(date -u +%Y%m%dT%H%MZ)
result="bench/results/tracing_cost-$stamp.txt"
mkdir -p bench/results
{
  echo "# bench/tracing_cost/run.sh $stamp: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg) at start"
  echo "# NOTE: a shared machine (other work may run beside this); read the ratios, measured in one run, not the absolute figures"
  echo "# model $MODEL, $DOCS document(s)/request (query 8, document 32 tokens), closed loop c=$CONCURRENCY (saturation),"
  echo "# $DURATION per run after 1s warm-up, $ROUNDS rounds; servers: off (no endpoint), 1% (traceidratio 0.01), 100% (always_on),"
  echo "# the traced two exporting OTLP/HTTP to a receiver that discards"
  for round in $(seq "$ROUNDS"); do
    if [ $((round % 2)) -eq 1 ]; then order="off ratio001 ratio1"; else order="ratio1 ratio001 off"; fi
    for name in $order; do
      port_var="port_$name"
      bench "$name" "${!port_var}" "$work/$name-$round.json"
    done
  done
  echo "# the receiver accepted: $(cat "$work/receiver.count" 2>/dev/null || echo 0)"
  echo
  /usr/bin/python3 - "$work" "$ROUNDS" <<'PY'
import json, os, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def run(name, r):
    d = json.load(open(os.path.join(work, f"{name}-{r}.json")))["runs"][0]
    return d["qps"], d["latency_ms"]["p50"], d["latency_ms"]["p99"], d["error_count"]
names = [("off", "off"), ("ratio001", "1%"), ("ratio1", "100%")]
print(f"{'round':>5} " + " ".join(f"{label + ' req/s':>12} {label + ' p50':>10} {label + ' p99':>10}" for _, label in names) + "  errors")
ratios = {"ratio001": [], "ratio1": []}
for r in range(1, rounds + 1):
    rows = {n: run(n, r) for n, _ in names}
    print(f"{r:>5} " + " ".join(f"{rows[n][0]:>12.1f} {rows[n][1]:>10.2f} {rows[n][2]:>10.2f}" for n, _ in names)
          + f"  {sum(rows[n][3] for n, _ in names):>6}")
    for n in ratios:
        ratios[n].append(tuple(rows[n][i] / rows["off"][i] for i in range(3)))
print()
for n, label in names[1:]:
    med = [statistics.median(x[i] for x in ratios[n]) for i in range(3)]
    print(f"median {label}/off ratio: throughput {med[0]:.3f}x, P50 {med[1]:.3f}x, P99 {med[2]:.3f}x")
PY
} | tee "$result"
echo "wrote $result"
