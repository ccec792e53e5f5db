#!/usr/bin/env bash
# The cost of TLS, measured in one run with one tide build. Two servers of the same
# binary and model, one plaintext and one with --tls-cert-file/--tls-key-file (a throwaway EC P-256
# certificate made here with the openssl CLI), alternated ROUNDS times:
#  1. keep-alive: `tide bench` closed loop, CONCURRENCY clients, a small rerank request (DOCS
#     documents of DOC_TOKENS tokens): throughput, P50, P99 over plaintext and over TLS;
#  2. new connections: the same with --connection-close (every request connects, and with TLS does a
#     full handshake: no session resumption, as tide bench does not keep sessions);
#  3. bare handshakes: `openssl s_time -new` against the TLS port (handshakes/s without HTTP).
# Prints the ratios TLS/plaintext (throughput, P50, P99) of each round and their median, and writes
# everything to bench/results/tls-<UTC timestamp>.txt.
# Usage: bench/tls/run.sh   (env: BUILD_DIR=build MODELS=models MODEL=minilm-l6 DURATION=5s
#        CONCURRENCY=4 DOCS=1 ROUNDS=3 MAX_SEQUENCE_LENGTH=; a model folder outside models/ works
#        too: MODELS=/path)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
MODELS=${MODELS:-models}
MODEL=${MODEL:-minilm-l6}
DURATION=${DURATION:-5s}
CONCURRENCY=${CONCURRENCY:-4}
DOCS=${DOCS:-1}
ROUNDS=${ROUNDS:-3}
TIDE="$BUILD/tide"
[ -x "$TIDE" ] || { echo "no $TIDE: build it first (cmake --build $BUILD --target tide)" >&2; exit 1; }
[ -f "$MODELS/$MODEL/tokenizer.json" ] || { echo "no model $MODELS/$MODEL (make models, or MODELS=... MODEL=...)" >&2; exit 1; }

work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

# A repository of the one model. MAX_SEQUENCE_LENGTH set: the model folder's files with a config.pbtxt
# of that max_sequence_length (for a folder without config.pbtxt whose model has fewer positions
# than the default, e.g. the black-box tests' tiny-bert export: MAX_SEQUENCE_LENGTH=64).
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

# A CA and a server certificate for 127.0.0.1.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$work/ca.key" \
  -out "$work/ca.crt" -days 2 -subj '/CN=tide bench CA' 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$work/server.key" \
  -out "$work/server.csr" -subj '/CN=tide bench server' 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$work/ext"
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" -set_serial 1 -days 2 \
  -extfile "$work/ext" -out "$work/server.crt" 2>/dev/null

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
  printf -v "port_$name" '%s' "$(grep -o 'listening on https\?://[^ ]*' "$log" | sed 's/.*://')"
}
start plain
start tls --tls-cert-file "$work/server.crt" --tls-key-file "$work/server.key"

# bench NAME URL OUT [extra flags]: one tide bench run, JSON report in OUT.
bench() {
  local name=$1 url=$2 out=$3
  shift 3
  "$TIDE" bench --url "$url" --endpoint rerank --model "$MODEL" --tokenizer "$MODELS/$MODEL/tokenizer.json" \
    --documents "$DOCS" --query-tokens 8 --doc-tokens 32 --concurrency "$CONCURRENCY" --warmup 1s \
    --duration "$DURATION" --no-scrape-metrics --json "$out" "$@" >/dev/null 2>"$work/err" ||
    { echo "tide bench ($name) failed:" >&2; cat "$work/err" >&2; exit 1; }
}

stamp=$(date -u +%Y%m%dT%H%MZ)
result="bench/results/tls-$stamp.txt"
mkdir -p bench/results
{
  echo "# bench/tls/run.sh $stamp: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $(openssl version)"
  echo "# model $MODEL, $DOCS document(s)/request (query 8, document 32 tokens), closed loop c=$CONCURRENCY,"
  echo "# $DURATION per run after 1s warm-up, $ROUNDS rounds alternating plaintext and TLS (EC P-256, TLS 1.3)"
  for round in $(seq "$ROUNDS"); do
    for mode in keepalive close; do
      extra=()
      [ "$mode" = close ] && extra=(--connection-close)
      bench plain "http://127.0.0.1:$port_plain" "$work/$mode-plain-$round.json" "${extra[@]}"
      bench tls "https://127.0.0.1:$port_tls" "$work/$mode-tls-$round.json" --tls-ca-file "$work/ca.crt" "${extra[@]}"
    done
  done
  echo
  echo "\$ openssl s_time -connect 127.0.0.1:\$port_tls -new -time 5   (full handshakes, no HTTP request)"
  openssl s_time -connect "127.0.0.1:$port_tls" -CAfile "$work/ca.crt" -new -time 5 2>&1 |
    grep -E "connections in|connections/user" || true
  echo
  /usr/bin/python3 - "$work" "$ROUNDS" <<'PY'
import json, os, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def run(mode, proto, r):
    data = json.load(open(os.path.join(work, f"{mode}-{proto}-{r}.json")))["runs"][0]
    return data["qps"], data["latency_ms"]["p50"], data["latency_ms"]["p99"], data["error_count"]
for mode, title in (("keepalive", "keep-alive connections"), ("close", "a new connection per request (Connection: close)")):
    print(f"## {title}")
    print(f"{'round':>5} {'plain req/s':>11} {'tls req/s':>9} {'plain p50':>9} {'tls p50':>8} {'plain p99':>9} {'tls p99':>8} {'errors':>6}"
          f"   TLS/plain: req/s   p50    p99")
    ratios = []
    for r in range(1, rounds + 1):
        p, t = run(mode, "plain", r), run(mode, "tls", r)
        q, p50, p99 = t[0] / p[0], t[1] / p[1], t[2] / p[2]
        ratios.append((q, p50, p99))
        print(f"{r:>5} {p[0]:>11.1f} {t[0]:>9.1f} {p[1]:>9.2f} {t[1]:>8.2f} {p[2]:>9.2f} {t[2]:>8.2f} {p[3] + t[3]:>6}"
              f"              {q:>6.3f} {p50:>6.3f} {p99:>6.3f}")
    med = [statistics.median(x[i] for x in ratios) for i in range(3)]
    print(f"median TLS/plaintext ratio: throughput {med[0]:.3f}x, P50 {med[1]:.3f}x, P99 {med[2]:.3f}x\n")
PY
} | tee "$result"
echo "wrote $result" >&2
