#!/usr/bin/env bash
# make replicas-test: N tide replicas on distinct loopback addresses (127.0.0.2, 127.0.0.3, ...)
# behind haproxy (bench/replicas/haproxy.cfg.sh), closed-loop clients running throughout with
# every response checked (loadclient.py), through these events:
#   kill9    kill -9 of replica 1 (then restarted)                      -> zero client errors
#   rolling  SIGTERM each replica in turn, wait for exit, restart, wait ready  -> zero errors
#   saturate replica 2 flooded directly (bypassing haproxy) past its --max-concurrent-requests:
#            it answers 429, haproxy retries those requests on other replicas  -> zero errors
#   join     a new replica starts: it gets traffic only once /v2/health/ready says so (warm-up
#            done), checked against haproxy's per-server request counter
# and reports throughput and latency percentiles during each event against steady state
# (bench/replicas/summarize.py). SMOKE=1: 2 replicas, steady + kill9 + saturate only (< 1 min).
#
# Environment: TIDE_BINARY (build/tide), MODEL_REPOSITORY (models), REPLICAS (3), CLIENTS (6),
# REPLICA_PORT (18500), DOCS (8), SKEW (small:large:share, e.g. 2:48:0.2), BALANCE (leastconn),
# AGENT=1 (haproxy agent-check from each replica's GET /load through load_agent.py),
# ONLY_STEADY=1 (steady state only: the balancing comparison of bench/replicas/compare.sh),
# PIN=1 (replica i runs on CPU core (i-1) mod nproc only, taskset: a host per replica, as on a
# cluster, instead of every replica sharing every core).
# Loopback only: the replicas bind 127.0.0.2..; haproxy binds 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v haproxy >/dev/null || scripts/deploy/install-tools.sh replicas
TIDE=${TIDE_BINARY:-build/tide}
SRC_MODELS=${MODEL_REPOSITORY:-models}
SMOKE=${SMOKE:-}
N=${REPLICAS:-$([ -n "$SMOKE" ] && echo 2 || echo 3)}
CLIENTS=${CLIENTS:-$([ -n "$SMOKE" ] && echo 4 || echo 6)}
PORT=${REPLICA_PORT:-18500}
DOCS=${DOCS:-8}
SKEW=${SKEW:-}
BALANCE=${BALANCE:-leastconn}
MAXC=${MAX_CONCURRENT:-4}
STEADY_S=${STEADY_S:-$([ -n "$SMOKE" ] && echo 6 || echo 15)}
work=build/replicas/run-$(date -u +%Y%m%dT%H%M%SZ)${SMOKE:+-smoke}
mkdir -p "$work"
echo "replicas: $N replicas, $CLIENTS clients, balance $BALANCE, results in $work"

# Model repository: the source entry with 1 instance x 1 thread per replica (N replicas share
# the 2-core VM) and a short explicit warm-up (3 shapes), so that a restart takes seconds.
mkdir -p "$work/models/minilm-l6"
src=$(readlink -f "$SRC_MODELS/minilm-l6")
ln -s "$src/1" "$work/models/minilm-l6/1"
ln -s "$src/tokenizer.json" "$work/models/minilm-l6/tokenizer.json"
/usr/bin/python3 - "$src/config.pbtxt" "$work/models/minilm-l6/config.pbtxt" <<'PY'
import re, sys
c = open(sys.argv[1]).read()
c = re.sub(r"count:\s*\d+", "count: 1", c)
c = re.sub(r'(key: "intra_op_threads"\s*value \{ string_value: )"\d+"', r'\1"1"', c)
w = ""
for name, batch, length in (("b1x32", 1, 32), ("b8x64", 8, 64), ("b16x64", 16, 64)):
    w += f'  {{\n    name: "{name}"\n    batch_size: {batch}\n'
    for inp in ("input_ids", "attention_mask", "token_type_ids"):
        w += f'    inputs {{\n      key: "{inp}"\n      value: {{ data_type: TYPE_INT64 dims: [ {length} ] zero_data: true }}\n    }}\n'
    w += "  },\n"
c += "model_warmup [\n" + w.rstrip(",\n") + "\n]\n"
open(sys.argv[2], "w").write(c)
PY

pids=()
addr() { echo "127.0.0.$(( $1 + 1 ))"; }
now() { date +%s.%N; }
event() { echo "$(now) $*" >> "$work/events.txt"; echo "replicas: $(date -u +%T) $*"; }
start_replica() {  # $1 = index (1-based)
  local pin=()
  [ "${PIN:-0}" = 1 ] && pin=(taskset -c $(( ($1 - 1) % $(nproc) )))
  "${pin[@]}" "$TIDE" serve --model-repository "$work/models" --host "$(addr "$1")" --port "$PORT" --io-threads 1 \
    --max-concurrent-requests "$MAXC" --shutdown-grace-ms 5000 --log-level warn \
    >> "$work/replica-$1.log" 2>&1 &
  pids[$1]=$!
}
wait_ready() {  # $1 = index; prints seconds waited
  local t0; t0=$(now)
  until [ "$(curl -s -m 1 -o /dev/null -w '%{http_code}' "http://$(addr "$1"):$PORT/v2/health/ready")" = 200 ]; do
    kill -0 "${pids[$1]}" 2>/dev/null || { echo "replica $1 died:" >&2; tail -5 "$work/replica-$1.log" >&2; exit 1; }
    sleep 0.2
  done
  event "ready r$1 after $(/usr/bin/python3 -c "print(f'{$(now) - $t0:.1f}')") s"
}
lbport=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
statsport=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cleanup() {
  touch "$work/stop"
  for p in "${pids[@]}" ${flood_pid:-} ${client_pid:-} ${haproxy_pid:-} ${poll_pid:-} ${agent_pid:-}; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

total=$([ -n "$SMOKE" ] || [ "${ONLY_STEADY:-0}" = 1 ] && echo "$N" || echo $(( N + 1 )))  # the last one joins later (full run)
for i in $(seq 1 "$N"); do start_replica "$i"; done
for i in $(seq 1 "$N"); do wait_ready "$i"; done
agent_port=
if [ "${AGENT:-0}" = 1 ]; then
  agent_port=$(( PORT + 1 ))
  addrs=$(for i in $(seq 1 "$total"); do addr "$i"; done | paste -sd, -)
  /usr/bin/python3 bench/replicas/load_agent.py --addresses "$addrs" --port "$PORT" --agent-port "$agent_port" \
    > "$work/load-agent.log" 2>&1 &
  agent_pid=$!
fi
BALANCE=$BALANCE bench/replicas/haproxy.cfg.sh "$lbport" "$statsport" "$PORT" "$total" $agent_port > "$work/haproxy.cfg"
haproxy -c -q -f "$work/haproxy.cfg"
haproxy -f "$work/haproxy.cfg" > "$work/haproxy.log" 2>&1 &
haproxy_pid=$!
# haproxy's per-server counters every 0.5 s (stats CSV: requests sent, retries, redispatches, state)
( while [ ! -f "$work/stop" ]; do
    { curl -s -m 1 "http://127.0.0.1:$statsport/stats;csv" | awk -v t="$(now)" -F, '$1=="replicas"{gsub(/ /,"_",$18); print t, $2, $18, $8, $16, $17, $41, $44}'; } || true
    sleep 0.5
  done > "$work/haproxy-stats.txt" ) &
poll_pid=$!
until [ "$(curl -s -m 1 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$lbport/v2/health/ready")" = 200 ]; do sleep 0.2; done

/usr/bin/python3 bench/replicas/loadclient.py --url "http://127.0.0.1:$lbport/rerank" --clients "$CLIENTS" \
  --docs "$DOCS" ${SKEW:+--skew "$SKEW"} --stop-file "$work/stop" --out "$work/requests.txt" &
client_pid=$!
sleep 3  # clients connect, every replica sees traffic
event "begin steady"; sleep "$STEADY_S"; event "end steady"
if [ "${ONLY_STEADY:-0}" = 1 ]; then SMOKE=1; skip_events=1; fi

if [ -z "${skip_events:-}" ]; then
event "begin kill9"
kill -9 "${pids[1]}"; wait "${pids[1]}" 2>/dev/null || true
sleep 3
start_replica 1; wait_ready 1
sleep 3
event "end kill9"
fi

if [ -z "$SMOKE" ]; then
  event "begin rolling"
  for i in $(seq 1 "$N"); do
    kill -TERM "${pids[$i]}"; wait "${pids[$i]}" 2>/dev/null || true
    event "exited r$i (SIGTERM)"
    start_replica "$i"; wait_ready "$i"
    sleep 2  # haproxy's checks see it up (rise 2 x 500 ms)
  done
  event "end rolling"
fi

if [ -z "${skip_events:-}" ]; then
event "begin saturate"
# The flood takes every permit the moment one frees (no pause after its 429s), so that requests
# arriving from haproxy find the replica full.
/usr/bin/python3 bench/replicas/loadclient.py --url "http://$(addr 2):$PORT/rerank" --clients $(( MAXC * 6 )) \
  --docs "$DOCS" --stop-file "$work/stop-flood" --out "$work/flood.txt" --seed 7 --backoff-ms 0 &
flood_pid=$!
sleep "$STEADY_S"
touch "$work/stop-flood"; wait "$flood_pid" || true; flood_pid=
event "end saturate"
fi

if [ -z "$SMOKE" ]; then
  j=$total
  event "begin join"
  event "start r$j"
  start_replica "$j"; wait_ready "$j"
  sleep "$STEADY_S"
  event "end join"
fi

touch "$work/stop"; wait "$client_pid" || true; client_pid=
kill "$poll_pid" 2>/dev/null || true; wait "$poll_pid" 2>/dev/null || true; poll_pid=
for i in $(seq 1 "$total"); do
  curl -s -m 2 "http://$(addr "$i"):$PORT/metrics" | grep '^tide_requests_total' | sed "s/^/r$i /" >> "$work/replica-metrics.txt" || true
done
/usr/bin/python3 bench/replicas/summarize.py "$work"
