#!/usr/bin/env bash
# Gray release under load: one `tide serve` in poll mode serves minilm-l6 as
# versions 1 and 2 of model m (the same weights; version_policy all), and the load generator keeps
# CONCURRENCY closed-loop clients on /rerank through five phases of DURATION each, in one run:
#   steady    no rollout (the newest version, 2, answers)
#   reload    version 3 (the same weights) is moved into the repository mid-phase: it loads, warms
#             up beside version 2 and takes the unnamed traffic
#   canary    PUT rollout: candidate 3, stable 2, canary 10%
#   shadow    PUT rollout: candidate 3, stable 2, shadow 100% (the candidate scores every request
#             with the capacity live traffic leaves idle)
#   rollback  PUT rollout: canary 50%, then POST .../rollback mid-phase
# Each line: requests/s, pairs/s, P50 and P99 ms, failed requests, and the ratios of throughput and
# P99 against the steady phase of the same run.
# usage: bench/rollout/run.sh   (after `make models`; CONCURRENCY=4 DURATION=20s DOCS=4 by default,
#        short pairs: 8-token queries, 32-token documents, so a phase has enough requests on 2 cores)
# output: bench/results/rollout-<UTC time>.txt
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
MODELS=${TIDE_MODEL_REPOSITORY:-models}
TIDE=${TIDE:-$BUILD/tide}
CONCURRENCY=${CONCURRENCY:-4} DURATION=${DURATION:-20s} DOCS=${DOCS:-4}
[ -x "$TIDE" ] || { echo "rollout: build $TIDE first (make build)" >&2; exit 2; }
[ -f "$MODELS/minilm-l6/1/model.onnx" ] || { echo "rollout: run make models first" >&2; exit 2; }
source scripts/lib/tide_server.sh

work=$(mktemp -d /tmp/tide-rollout-XXXXXX)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
repo=$work/repo
mkdir -p "$repo/m/1" "$repo/m/2" "$work/staged/3"
for v in 1 2; do ln -s "$(pwd)/$MODELS/minilm-l6/1/model.onnx" "$repo/m/$v/model.onnx"; done
ln -s "$(pwd)/$MODELS/minilm-l6/1/model.onnx" "$work/staged/3/model.onnx"
cp "$MODELS/minilm-l6/tokenizer.json" "$repo/m/"
{ sed 's/^name: .*/name: "m"/' "$MODELS/minilm-l6/config.pbtxt" | grep -v '^version_policy'
  echo 'version_policy { all { } }'; } >"$repo/m/config.pbtxt"
mkdir -p bench/results
out=bench/results/rollout-$(date -u +%Y%m%dT%H%MZ).txt

start_tide "$work/tide.log" --model-repository "$repo" --model-control-mode poll --repository-poll-secs 1 --log-level info
put() { curl -s -o /dev/null -w '%{http_code}' -X PUT -H 'Content-Type: application/json' "$url/v2/models/m/rollout" -d "$1"; }

phase() {  # phase LABEL [ACTION_AT_HALF...]: one fixed-duration bench run; ACTION runs halfway through
  local label=$1
  shift
  "$TIDE" bench --url "$url" --endpoint rerank --tokenizer "$MODELS/minilm-l6/tokenizer.json" \
    --documents "$DOCS" --query-tokens 8 --doc-tokens 32 --concurrency "$CONCURRENCY" --warmup 0s --duration "$DURATION" \
    --json "$work/$label.json" >/dev/null 2>"$work/bench-$label.err" &
  local bench=$!
  if [ $# -gt 0 ]; then
    sleep "$(( ${DURATION%s} / 2 ))"
    "$@" >>"$work/actions" 2>&1
  fi
  wait "$bench" || { cat "$work/bench-$label.err" >&2; exit 1; }
}

phase steady
phase reload mv "$work/staged/3" "$repo/m/3"
for _ in $(seq 600); do grep -q 'model m version 3.*warmed up' "$work/tide.log" && break; sleep 0.1; done
[ "$(put '{"candidate": "3", "stable": "2", "mode": "canary", "percent": 10, "guard": {"min_requests": 100000}}')" = 200 ]
phase canary
canary_state=$(curl -s "$url/v2/models/m/rollout")
[ "$(put '{"candidate": "3", "stable": "2", "mode": "shadow", "percent": 100, "guard": {"min_requests": 100000}}')" = 200 ]
phase shadow
shadow_state=$(curl -s "$url/v2/models/m/rollout")
[ "$(put '{"candidate": "3", "stable": "2", "mode": "canary", "percent": 50, "guard": {"min_requests": 100000}}')" = 200 ]
phase rollback curl -s -X POST -H 'Content-Type: application/json' "$url/v2/models/m/rollout/rollback"
rollback_state=$(curl -s "$url/v2/models/m/rollout")

{
  echo "# bench/rollout/run.sh ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); tide $(git rev-parse --short HEAD))"
  echo "# minilm-l6 x3 versions (same weights), CONCURRENCY=$CONCURRENCY DURATION=$DURATION DOCS=$DOCS (8 + 32 tokens), /rerank closed loop"
  /usr/bin/python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
rows = []
for label in ["steady", "reload", "canary", "shadow", "rollback"]:
    run = json.load(open(f"{work}/{label}.json"))["runs"][0]
    rows.append((label, run["qps"], run["pairs_per_s"], run["latency_ms"]["p50"], run["latency_ms"]["p99"],
                 run["error_count"]))
base = rows[0]
print(f"{'phase':10} {'req/s':>8} {'pairs/s':>9} {'p50_ms':>8} {'p99_ms':>8} {'failed':>7} {'thr/steady':>11} {'p99/steady':>11}")
for label, rps, pps, p50, p99, failed in rows:
    print(f"{label:10} {rps:8.1f} {pps:9.1f} {p50:8.1f} {p99:8.1f} {failed:7} {pps / base[2]:11.3f} {p99 / base[4]:11.3f}")
PY
  echo "canary state after its phase:   $canary_state"
  echo "shadow state after its phase:   $shadow_state"
  echo "rollback state after its phase: $rollback_state"
  grep -E 'version 3: |rollout of model' "$work/tide.log" | sed 's/^[^ ]* //'
} | tee "$out"
