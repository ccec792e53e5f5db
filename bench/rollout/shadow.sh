#!/usr/bin/env bash
# What a 100% shadow rollout costs live traffic (the requirement: "shadow rows never delay live rows"):
# one `tide serve` per scheduling variant serves minilm-l6 as versions 1 and 2 of model m (the same
# weights), CONCURRENCY closed-loop clients keep /rerank saturated, and phases of DURATION
# alternate shadow off (no rollout running) and shadow on (PUT rollout: candidate 2, shadow 100%),
# PAIRS times, so slow drifts of a shared machine fall on both sides alike. Each on phase starts
# once the shadow lane's session is open (the steady state; the time to open is printed).
# Then the same below saturation: OPEN_PAIRS pairs of open-loop phases (Poisson arrivals) at
# OPEN_FRACTION of the variant's mean shadow-off throughput, where live traffic leaves idle time
# the shadow may use: what it costs live latency there, and how many requests it compares.
# Per variant: each phase's requests/s, pairs/s, P50/P99 and failures, the mean of the on/off
# ratios of throughput (closed loop) and P50/P99 over the pairs, and how many shadow requests were
# scored or dropped.
# Variants (VARIANTS="idle idle-nohold" by default):
#   idle         --shadow-scheduling idle: the shadow lane's threads under SCHED_IDLE, and a shadow
#                batch starts only after both versions were idle for --shadow-hold-off-ms (the
#                defaults)
#   idle-nohold  the same with --shadow-hold-off-ms 0: a shadow batch starts whenever no live row
#                waits (what the hold-off buys)
#   normal       --shadow-scheduling normal: the lane at the inference threads' priority (nice 10),
#                to show what SCHED_IDLE buys
# usage: bench/rollout/shadow.sh   (after `make models`; CONCURRENCY=4 DURATION=10s PAIRS=3 DOCS=4
#        OPEN_PAIRS=2 OPEN_FRACTION=0.5)
# output: bench/results/rollout-shadow-<UTC time>.txt
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
MODELS=${TIDE_MODEL_REPOSITORY:-models}
TIDE=${TIDE:-$BUILD/tide}
CONCURRENCY=${CONCURRENCY:-4} DURATION=${DURATION:-10s} PAIRS=${PAIRS:-3} DOCS=${DOCS:-4}
VARIANTS=${VARIANTS:-idle idle-nohold}
OPEN_PAIRS=${OPEN_PAIRS:-2} OPEN_FRACTION=${OPEN_FRACTION:-0.5}
[ -x "$TIDE" ] || { echo "shadow: build $TIDE first (make build)" >&2; exit 2; }
[ -f "$MODELS/minilm-l6/1/model.onnx" ] || { echo "shadow: run make models first" >&2; exit 2; }
source scripts/lib/tide_server.sh

work=$(mktemp -d /tmp/tide-shadow-XXXXXX)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
repo=$work/repo
mkdir -p "$repo/m/1" "$repo/m/2"
for v in 1 2; do ln -s "$(pwd)/$MODELS/minilm-l6/1/model.onnx" "$repo/m/$v/model.onnx"; done
cp "$MODELS/minilm-l6/tokenizer.json" "$repo/m/"
{ sed 's/^name: .*/name: "m"/' "$MODELS/minilm-l6/config.pbtxt" | grep -v '^version_policy'
  echo 'version_policy { all { } }'; } >"$repo/m/config.pbtxt"
mkdir -p bench/results
out=bench/results/rollout-shadow-$(date -u +%Y%m%dT%H%MZ).txt
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

shadow_counts() {  # the shadow outcome counters, as outcome=value pairs
  curl -s "$url/metrics" | grep '^tide_rollout_shadow_requests_total' |
    sed -E 's/.*outcome="([a-z_]+)".*\} ([0-9.e+]+)$/\1=\2/' | tr '\n' ' '
}

phase() {  # phase VARIANT LABEL INDEX [LOAD FLAGS]: closed loop by default
  local load=("${@:4}")
  [ ${#load[@]} -gt 0 ] || load=(--concurrency "$CONCURRENCY")
  "$TIDE" bench --url "$url" --endpoint rerank --tokenizer "$MODELS/minilm-l6/tokenizer.json" \
    --documents "$DOCS" --query-tokens 8 --doc-tokens 32 "${load[@]}" --warmup 1s --duration "$DURATION" \
    --json "$work/$1-$2-$3.json" >/dev/null 2>"$work/bench.err" || { cat "$work/bench.err" >&2; exit 1; }
}

shadow_on() {  # shadow_on VARIANT LABEL: start the rollout and wait (no load) until its lane is open
  [ "$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H 'Content-Type: application/json' "$url/v2/models/m/rollout" \
        -d '{"candidate": "2", "stable": "1", "mode": "shadow", "percent": 100, "guard": {"min_requests": 100000}}')" = 200 ]
  # The on phase measures the lane in its steady state: wait until its session is open and warm
  # (it opens at nice 19; under saturation that takes long, see docs/model-lifecycle.md).
  local opened t0
  opened=$(grep -c 'shadow lane open' "$work/tide-$1.log" || true)
  t0=$(date +%s.%N)
  for _ in $(seq 1200); do
    [ "$(grep -c 'shadow lane open' "$work/tide-$1.log" || true)" -gt "$opened" ] && break
    sleep 0.1
  done
  echo "$1 $2: lane open after $(echo "$(date +%s.%N) - $t0" | bc) s (no load)" >>"$work/opens"
}

shadow_off() {  # shadow_off VARIANT LABEL: record what the lane did, roll back
  echo "$1 $2: $(curl -s "$url/v2/models/m/rollout" | /usr/bin/python3 -c 'import json,sys; print("compared", json.load(sys.stdin)["agreement"]["pairs"])'); $(shadow_counts)" >>"$work/counts"
  curl -s -o /dev/null -X POST -H 'Content-Type: application/json' "$url/v2/models/m/rollout/rollback"
  sleep 1  # the lane closes on the next rollout tick
}

for variant in $VARIANTS; do
  case $variant in
    idle) flags=(--shadow-scheduling idle) ;;
    idle-nohold) flags=(--shadow-scheduling idle --shadow-hold-off-ms 0) ;;
    normal) flags=(--shadow-scheduling normal) ;;
    *) echo "shadow: unknown variant $variant" >&2; exit 2 ;;
  esac
  start_tide "$work/tide-$variant.log" --model-repository "$repo" "${flags[@]}" --log-level info
  for i in $(seq "$PAIRS"); do
    phase "$variant" off "$i"
    shadow_on "$variant" "pair $i"
    if [ "$i" = 1 ]; then  # scheduling class (IDL = SCHED_IDLE, TS = normal), nice and name of every thread
      echo "$variant, shadow on: $(ps -L -o cls=,ni=,comm= -p "$server" | sort | uniq -c | tr -s ' ' | tr '\n' ';')" >>"$work/threads"
    fi
    phase "$variant" on "$i"
    shadow_off "$variant" "pair $i"
  done
  # Below saturation: open loop at OPEN_FRACTION of this variant's closed-loop shadow-off rate.
  rate=$(/usr/bin/python3 -c "import json,sys; w,v,n,f=sys.argv[1:]; n=int(n)
print(round(float(f) * sum(json.load(open(f'{w}/{v}-off-{i}.json'))['runs'][0]['qps'] for i in range(1, n + 1)) / n, 1))" \
    "$work" "$variant" "$PAIRS" "$OPEN_FRACTION")
  echo "$variant: open loop at $rate req/s" >>"$work/rates"
  for i in $(seq "$OPEN_PAIRS"); do
    phase "$variant" open-off "$i" --request-rate "$rate" --arrivals poisson
    shadow_on "$variant" "open pair $i"
    phase "$variant" open-on "$i" --request-rate "$rate" --arrivals poisson
    shadow_off "$variant" "open pair $i"
  done
  grep -E 'shadow lane' "$work/tide-$variant.log" | sed 's/^[^ ]* //' | sort | uniq -c >>"$work/lanes"
  kill "$server"
  wait "$server" 2>/dev/null || true
  server=""
done

{
  echo "# bench/rollout/shadow.sh ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load before $load_before, after $(cut -d' ' -f1-3 /proc/loadavg); tide $(git rev-parse --short HEAD))"
  echo "# minilm-l6 as versions 1 and 2 (same weights), CONCURRENCY=$CONCURRENCY DURATION=$DURATION DOCS=$DOCS (8 + 32 tokens), /rerank closed loop;"
  echo "# phases alternate shadow off (no rollout) / on (shadow 100%, candidate 2), PAIRS=$PAIRS pairs per variant,"
  echo "# then OPEN_PAIRS=$OPEN_PAIRS pairs open loop (Poisson) at OPEN_FRACTION=$OPEN_FRACTION of the closed-loop shadow-off rate"
  /usr/bin/python3 - "$work" "$PAIRS" "$OPEN_PAIRS" $VARIANTS <<'PY'
import json, sys
work, pairs, open_pairs, variants = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
def run(v, label, i):
    r = json.load(open(f"{work}/{v}-{label}-{i}.json"))["runs"][0]
    return r["qps"], r["pairs_per_s"], r["latency_ms"]["p50"], r["latency_ms"]["p99"], r["error_count"]
def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")
def listed(xs):
    return ", ".join(f"{x:.3f}" for x in xs)
print(f"{'variant':12} {'pair':>4} {'phase':8} {'req/s':>8} {'pairs/s':>9} {'p50_ms':>8} {'p99_ms':>8} {'failed':>7}")
for v in variants:
    thr, p50, p99, o50, o99 = [], [], [], [], []
    for prefix, n in (("", pairs), ("open-", open_pairs)):
        for i in range(1, n + 1):
            off, on = run(v, prefix + "off", i), run(v, prefix + "on", i)
            for label, r in ((prefix + "off", off), (prefix + "on", on)):
                print(f"{v:12} {i:4} {label:8} {r[0]:8.1f} {r[1]:9.1f} {r[2]:8.1f} {r[3]:8.1f} {r[4]:7}")
            if prefix:
                o50.append(on[2] / off[2]); o99.append(on[3] / off[3])
            else:
                thr.append(on[1] / off[1]); p50.append(on[2] / off[2]); p99.append(on[3] / off[3])
    print(f"{v:12} saturated, shadow on / off: throughput {mean(thr):.3f}x ({listed(thr)}), "
          f"P50 {mean(p50):.3f}x ({listed(p50)}), P99 {mean(p99):.3f}x ({listed(p99)})")
    if o99:
        print(f"{v:12} open loop, shadow on / off: P50 {mean(o50):.3f}x ({listed(o50)}), P99 {mean(o99):.3f}x ({listed(o99)})")
PY
  echo "# open-loop rates:"
  cat "$work/rates"
  echo "# shadow requests per on-phase (compared = the rollout's agreement pairs; outcomes cumulative per server):"
  cat "$work/counts"
  echo "# time from PUT to an open shadow lane:"
  cat "$work/opens"
  echo "# threads (count, class, nice, name) with the shadow lane open:"
  cat "$work/threads"
  echo "# lane log lines:"
  cat "$work/lanes"
} | tee "$out"
