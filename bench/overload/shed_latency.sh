#!/usr/bin/env bash
# How fast tide answers overload (the requirement: "429 or 503 with Retry-After immediately — within a
# millisecond even under 10x overload"), measured from outside with tide bench's event-loop client.
#
# For each server VARIANT (a label and tide serve flags; the first one is the reference — by default
# the inference threads at the HTTP threads' priority with the kernel's time slice, then
# --inference-nice 10 alone, then tide's defaults: nice 10 plus a 100 us time slice for the HTTP threads):
# 1. Start tide on the default model with a concurrency limit of LIMIT requests.
# 2. Capacity (first server only): closed loop of LIMIT clients (1 query + 1 SciFact-length
#    document per request); every server gets the same offered rates.
# 3. For each FACTOR: open loop, Poisson arrivals at FACTOR x capacity for DURATION seconds. The
#    admitted requests fill the limit, the rest are shed with 429. tide bench times every answer
#    from its intended send time (so a stalled sender cannot hide queueing) and keeps the latency of
#    the shed answers apart ("shed answers" line, shed_latency_ms in the JSON). Meanwhile a probe
#    GETs /v2/health/live every 100 ms (curl's time_total).
#
# usage: bench/overload/shed_latency.sh [--factors "2 10"] [--duration S] [--limit N]
#          [--variants "label=flags;label=flags..."]
# output: bench/results/overload-<UTC stamp>/ (capacity.json, <label>-x<F>.json / .txt,
#         <label>-live-x<F>.txt, <label>-server.log, summary.md)
set -euo pipefail
cd "$(dirname "$0")/../.."

FACTORS="2 10" DURATION=30 LIMIT=4
VARIANTS="equal-priority=--inference-nice 0 --io-time-slice-us 0;nice10=--inference-nice 10 --io-time-slice-us 0;defaults="
while [ $# -gt 0 ]; do
  case "$1" in
    --factors) FACTORS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --limit) LIMIT=$2; shift 2 ;;
    --variants) VARIANTS=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "shed_latency: unknown flag $1 (--help)" >&2; exit 2 ;;
  esac
done
BUILD=${BUILD_DIR:-build}
MODELS=${TIDE_MODEL_REPOSITORY:-models}
TIDE="$BUILD/tide"
PY=/usr/bin/python3
[ -x "$TIDE" ] || { echo "shed_latency: build $TIDE first (make build)" >&2; exit 2; }
[ -f "$MODELS/minilm-l6/1/model.onnx" ] || { echo "shed_latency: run make models first" >&2; exit 2; }

out="bench/results/overload-$(date -u +%Y%m%dT%H%MZ)"
mkdir -p "$out"
server="" probe=""
trap 'kill $probe $server 2>/dev/null || true' EXIT

source scripts/lib/tide_server.sh
qps=""
IFS=';' read -r -a variants <<< "$VARIANTS"
for variant in "${variants[@]}"; do
  label=${variant%%=*}  # file prefix
  flags=${variant#*=}
  log="$out/$label-server.log"
  # shellcheck disable=SC2086  # flags are words
  start_tide "$log" --model-repository "$MODELS" --max-concurrent-requests "$LIMIT" $flags --log-level info
  common=(--url "$url" --tokenizer "$MODELS/minilm-l6/tokenizer.json" --documents 1 --timeout-ms 60000)
  echo "shed_latency: [$label] tide at $url, --max-concurrent-requests $LIMIT ${flags:-(defaults)}; load $(cut -d' ' -f1-3 /proc/loadavg)"
  if [ -z "$qps" ]; then
    echo "shed_latency: capacity (closed loop, $LIMIT clients, 10 s warm-up + 30 s)"
    "$TIDE" bench "${common[@]}" --concurrency "$LIMIT" --warmup 10s --duration 30s --json "$out/capacity.json" | tee "$out/capacity.txt"
    qps=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["runs"][0]["qps"])' "$out/capacity.json")
  fi
  for f in $FACTORS; do
    rate=$($PY -c "print(round($qps * $f, 3))")
    echo "shed_latency: [$label] x$f = $rate requests/s (Poisson) for $DURATION s"
    ( while :; do curl -s -o /dev/null -w '%{http_code} %{time_total}\n' "$url/v2/health/live"; sleep 0.1; done ) \
      > "$out/$label-live-x$f.txt" 2>/dev/null &
    probe=$!
    "$TIDE" bench "${common[@]}" --request-rate "$rate" --arrivals poisson --warmup 5s --duration "${DURATION}s" \
      --max-connections 512 --json "$out/$label-x$f.json" | tee "$out/$label-x$f.txt"
    kill $probe 2>/dev/null || true; wait $probe 2>/dev/null || true; probe=""
  done
  curl -s "$url/metrics" > "$out/$label-metrics.txt" || true
  kill $server; wait $server 2>/dev/null || true; server=""
done

$PY - "$out" "$qps" "$LIMIT" "$VARIANTS" $FACTORS <<'PY' | tee "$out/summary.md"
import json, re, sys
out, qps, limit, variants, factors = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
flags = dict(v.split("=", 1) for v in variants.split(";"))
labels = list(flags)
def pct(xs, q):
    xs = sorted(xs)
    if not xs: return float("nan")
    k = max(1, -(-len(xs) * q // 100))
    return xs[int(min(k, len(xs))) - 1]
print(f"# Overload answers — {out}\n")
print(f"`bash bench/overload/shed_latency.sh --factors \"{' '.join(factors)}\"`, variants: "
      + "; ".join(f"**{k}**: `{v or '(tide serve defaults)'}`" for k, v in flags.items()) + ". "
      f"tide --max-concurrent-requests {limit}, capacity {qps:.2f} requests/s (closed loop, {limit} clients, "
      f"1 query + 1 document, first server). Latency from the intended send time; counts of the measured window.\n")
print("| variant | offered | 200 | shed 429/503 | other errors | shed p50 ms | shed p90 ms | shed p99 ms | shed p99.9 ms | shed max ms | 200 p99 ms | live p50 ms | live p99 ms | live max ms |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
p99 = {}
for label in labels:
  for f in factors:
    r = json.load(open(f"{out}/{label}-x{f}.json"))["runs"][0]
    shed = r["shed_latency_ms"]
    p99[(label, f)] = shed["p99"]
    other = sum(n for k, n in r["errors"].items() if k not in ("http 429", "http 503"))
    live = []
    for line in open(f"{out}/{label}-live-x{f}.txt"):
        parts = line.split()
        if len(parts) == 2 and parts[0] == "200": live.append(float(parts[1]) * 1e3)
    print(f"| {label} | x{f} ({r['request_rate']:.1f}/s) | {r['completed']} | {shed['count']} | {other} | "
          f"{shed['p50']:.3f} | {shed['p90']:.3f} | {shed['p99']:.3f} | {shed['p99.9']:.3f} | {shed['max']:.3f} | {r['latency_ms']['p99']:.0f} | "
          f"{pct(live, 50):.2f} | {pct(live, 99):.2f} | {max(live) if live else float('nan'):.2f} |")
for label in labels[1:]:
  for f in factors:
    if p99.get((label, f)): print(f"\nshed p99 at x{f}: {labels[0]} / {label} = {p99[(labels[0], f)] / p99[(label, f)]:.1f}x")
for label in labels:
  m = open(f"{out}/{label}-metrics.txt").read()
  shed_total = sum(float(v) for v in re.findall(r'^tide_shed_requests_total\{[^}]*\} ([0-9.e+]+)', m, re.M))
  print(f"server {label}: tide_shed_requests_total {shed_total:.0f} (warm-up included)")
PY
