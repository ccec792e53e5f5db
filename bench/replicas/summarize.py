#!/usr/bin/env python3
"""Summarizes a bench/replicas/run.sh run directory: per event, throughput and latency of the
checked client requests against steady state, errors, and the pass/fail checks. Writes
summary.md and timeline.csv (per second: ok requests, errors, p99) into the directory; exits 1
when a check fails."""
import collections, os, sys

work = sys.argv[1]
def rows(name):
    p = os.path.join(work, name)
    return [l.split() for l in open(p)] if os.path.exists(p) else []

events = [(float(r[0]), " ".join(r[1:])) for r in rows("events.txt")]
reqs = [(float(r[0]), float(r[1]), r[2], int(r[3])) for r in rows("requests.txt")]
flood = [(float(r[0]), float(r[1]), r[2]) for r in rows("flood.txt")]
stats = [(float(r[0]), r[1], r[2], int(r[3]), int(r[4] or 0), int(r[5] or 0), int(r[6] or 0), int(r[7] or 0))
         for r in rows("haproxy-stats.txt") if len(r) >= 8]

def pct(xs, q):
    if not xs: return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]

phases = []
begins = {}
for t, e in events:
    if e.startswith("begin "): begins[e[6:]] = t
    elif e.startswith("end ") and e[4:] in begins: phases.append((e[4:], begins[e[4:]], t))

out, failures = [], []
out.append("| event | seconds | ok req/s | vs steady | p50 ms | p99 ms | p99 vs steady | max ms | client errors |")
out.append("|---|---|---|---|---|---|---|---|---|")
steady = None
for name, b, e in phases:
    sel = [r for r in reqs if b <= r[0] < e]
    ok = [r[1] for r in sel if r[2] == "ok"]
    errs = collections.Counter(r[2] for r in sel if r[2] != "ok")
    tput = len(ok) / (e - b)
    p50, p99 = pct(ok, 0.5), pct(ok, 0.99)
    if name == "steady": steady = (tput, p99)
    rel_t = f"{tput / steady[0]:.2f}x" if steady else "-"
    rel_p = f"{p99 / steady[1]:.2f}x" if steady else "-"
    out.append(f"| {name} | {e - b:.1f} | {tput:.1f} | {rel_t} | {p50:.0f} | {p99:.0f} | {rel_p} | {max(ok or [0]):.0f} | "
               f"{sum(errs.values())}{' ' + dict(errs).__repr__() if errs else ''} |")

all_errs = collections.Counter(r[2] for r in reqs if r[2] != "ok")
total_ok = sum(1 for r in reqs if r[2] == "ok")
out.append("")
out.append(f"client requests through haproxy: {len(reqs)}, ok {total_ok}, errors {sum(all_errs.values())} {dict(all_errs) or ''}")
if all_errs: failures.append(f"clients saw errors: {dict(all_errs)}")
if len(reqs) == 0: failures.append("no client requests")

# saturate: the flooded replica shed (429 to the direct flood) and haproxy retried elsewhere
sat = next((p for p in phases if p[0] == "saturate"), None)
if sat:
    shed = sum(1 for r in flood if r[2] == "http_429")
    def counter(sv, col, t):
        vals = [s for s in stats if s[1] == sv and s[0] <= t]
        return vals[-1][col] if vals else 0
    retr = sum(counter(sv, 4, sat[2]) - counter(sv, 4, sat[1]) for sv in {s[1] for s in stats})
    redis = sum(counter(sv, 5, sat[2]) - counter(sv, 5, sat[1]) for sv in {s[1] for s in stats})
    out.append(f"saturate: direct flood got {shed} x 429 of {len(flood)} from r2; haproxy retries {retr}, redispatches {redis} during the event")
    if shed == 0: failures.append("saturate: the flooded replica never answered 429 (not saturated)")
    if retr + redis == 0: failures.append("saturate: haproxy retried nothing (no 429 reached it?)")

# join: the new replica had no request from haproxy before it was ready
join = next((p for p in phases if p[0] == "join"), None)
if join:
    sv = [e for t, e in events if e.startswith("start r")][-1].split()[1]
    ready_t = next(t for t, e in events if e.startswith(f"ready {sv} ") and t >= join[1])
    served = [s for s in stats if s[1] == sv and s[3] > 0]
    first = served[0][0] if served else None
    before = [s for s in stats if s[1] == sv and s[0] < ready_t]
    states = sorted({s[2] for s in before})
    out.append(f"join: {sv} ready at +{ready_t - join[1]:.1f} s; haproxy state before ready {states}; "
               f"first request from haproxy at {'+%.1f s' % (first - join[1]) if first else 'never'}")
    if first is None: failures.append(f"join: {sv} never got traffic")
    elif first < ready_t: failures.append(f"join: {sv} got traffic before it was ready")

for line in rows("replica-metrics.txt"):
    pass
# per-second timeline
t0 = min((r[0] for r in reqs), default=0)
by_s = collections.defaultdict(list)
for r in reqs: by_s[int(r[0] - t0)].append(r)
with open(os.path.join(work, "timeline.csv"), "w") as f:
    f.write("second,ok,errors,p99_ms,events\n")
    ev_by_s = collections.defaultdict(list)
    for t, e in events: ev_by_s[int(t - t0)].append(e)
    for s in range(0, max(by_s, default=0) + 1):
        rs = by_s.get(s, [])
        ok = [r[1] for r in rs if r[2] == "ok"]
        f.write(f"{s},{len(ok)},{len(rs) - len(ok)},{pct(ok, 0.99):.0f},{'; '.join(ev_by_s.get(s, []))}\n")
out.append("")
out.append("events: " + "; ".join(f"+{t - t0:.1f}s {e}" for t, e in events))
out.append("")
out.append("replicas-test: " + ("PASSED" if not failures else "FAILED: " + "; ".join(failures)))
text = "\n".join(out) + "\n"
open(os.path.join(work, "summary.md"), "w").write(text)
print(text, end="")
sys.exit(1 if failures else 0)
