#!/usr/bin/env bash
# Balancing comparison with skewed request sizes (80% of requests with 2 documents, 20% with 48):
# N replicas under haproxy, closed-loop clients, steady state only, in these modes
#   roundrobin | leastconn | leastconn + agent-check from each replica's GET /load (load_agent.py)
# run in alternating rounds (mode A, B, C, A, B, C, ...) so that the machine's drift touches every
# mode alike. PIN=1 (default) pins replica i to core i-1 (taskset): on a 2-core host, 2 replicas
# that do not share cores, which is what balancing across hosts is about; PIN=0 lets 3 replicas
# share both cores (the former set-up, where balancing cannot change much).
# Prints per round and mode: ok req/s, documents scored per second, P50/P99 of the small requests
# and P99 of the large ones; then the median over rounds and each mode's ratio to roundrobin.
#
#   bash bench/replicas/compare.sh     (ROUNDS=3, STEADY_S=30: about 8 minutes; MODEL_REPOSITORY,
#                                       TIDE_BINARY as run.sh; SKEW, CLIENTS, REPLICAS, PIN)
set -euo pipefail
cd "$(dirname "$0")/../.."
export PIN=${PIN:-1}
export ONLY_STEADY=1 SKEW=${SKEW:-2:48:0.2} STEADY_S=${STEADY_S:-30}
export REPLICAS=${REPLICAS:-$([ "$PIN" = 1 ] && nproc || echo 3)} CLIENTS=${CLIENTS:-6}
ROUNDS=${ROUNDS:-3}
echo "compare: $REPLICAS replicas (PIN=$PIN), $CLIENTS clients, skew $SKEW, ${STEADY_S} s steady, $ROUNDS rounds;" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg); git $(git rev-parse --short HEAD)"
runs=()
for round in $(seq 1 "$ROUNDS"); do
  for mode in roundrobin leastconn leastconn+agent; do
    agent=0; balance=$mode
    [ "$mode" = leastconn+agent ] && { agent=1; balance=leastconn; }
    dir=$(AGENT=$agent BALANCE=$balance bench/replicas/run.sh | sed -n 's/^replicas: .*results in //p')
    runs+=("$round:$mode:$dir")
  done
done
/usr/bin/python3 - "${runs[@]}" <<'PY'
import statistics, sys
def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")
rows = []
for arg in sys.argv[1:]:
    rnd, mode, d = arg.split(":", 2)
    ev = {l.split()[1] + " " + l.split()[2]: float(l.split()[0]) for l in open(d + "/events.txt") if len(l.split()) >= 3}
    b, e = ev["begin steady"], ev["end steady"]
    reqs = [l.split() for l in open(d + "/requests.txt")]
    sel = [(float(r[1]), r[2], int(r[3])) for r in reqs if b <= float(r[0]) < e]
    ok = [r for r in sel if r[1] == "ok"]
    small = min((r[2] for r in ok), default=0)
    rows.append(dict(round=int(rnd), mode=mode, rps=len(ok) / (e - b), docs=sum(r[2] for r in ok) / (e - b),
                     p50s=pct([r[0] for r in ok if r[2] == small], 0.5), p99s=pct([r[0] for r in ok if r[2] == small], 0.99),
                     p99l=pct([r[0] for r in ok if r[2] != small], 0.99), errors=len(sel) - len(ok)))
print("| round | mode | ok req/s | docs/s | small P50 ms | small P99 ms | large P99 ms | errors |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['round']} | {r['mode']} | {r['rps']:.2f} | {r['docs']:.1f} | {r['p50s']:.0f} | {r['p99s']:.0f} | {r['p99l']:.0f} | {r['errors']} |")
print()
keys = ["rps", "docs", "p50s", "p99s", "p99l"]
med = {m: {k: statistics.median(r[k] for r in rows if r["mode"] == m) for k in keys}
       for m in dict.fromkeys(r["mode"] for r in rows)}
print("median over rounds, and the ratio to roundrobin (throughput: higher is better; latency: lower is better)")
print("| mode | ok req/s | docs/s | small P50 ms | small P99 ms | large P99 ms |")
print("|---|---|---|---|---|---|")
base = med["roundrobin"]
for m, v in med.items():
    cells = " | ".join(f"{v[k]:.1f} ({v[k] / base[k]:.2f}x)" for k in keys)
    print(f"| {m} | {cells} |")
print(f"errors in all runs: {sum(r['errors'] for r in rows)}")
PY
