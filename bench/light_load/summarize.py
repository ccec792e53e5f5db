#!/usr/bin/env python3
"""Tables for bench/light_load/run.sh from its raw tide bench JSON files.

usage: summarize.py capacity RAW SHAPE SERVER...      -> the best peer's closed-loop req/s (node; else fixed)
       summarize.py table RAW SHAPES FRACTIONS ROUNDS SERVER...
Files: RAW/<shape>-closed-r<round>-<server>.json, RAW/<shape>-open<fraction>-r<round>-<server>.json
(and .load beside each: the load average when that run ended).
"""
import json
import os
import statistics
import sys

NAMES = {"fixed": "tide fixed (2x1, today)", "adaptive": "tide adaptive", "node": "Node + onnxruntime-node"}


def run(raw, shape, label, server):
    path = os.path.join(raw, f"{shape}-{label}-{server}.json")
    try:
        with open(path) as f:
            r = json.load(f)["runs"][0]
    except (OSError, ValueError, KeyError, IndexError):
        return None
    load = ""
    try:
        with open(path[:-5] + ".load") as f:
            load = f.read().split()[0]
    except OSError:
        pass
    lat = r["latency_ms"]
    return {"qps": r["qps"], "p50": lat["p50"], "p99": lat["p99"], "n": r["completed"],
            "errors": r["error_count"], "load": load}


def capacity(raw, shape, servers, rounds=None):
    for peer in ("node", "fixed"):
        if peer not in servers:
            continue
        qps = []
        r = 1
        while True:
            got = run(raw, shape, f"closed-r{r}", peer)
            if got is None:
                if rounds is None or r > rounds:
                    break
            elif got["qps"] > 0:
                qps.append(got["qps"])
            r += 1
            if rounds is not None and r > rounds:
                break
        if qps:
            return statistics.mean(qps), peer
    return 0.0, "none"


def ratio(a, b):
    return f"{a / b:.3f}" if a and b else "-"


def table(raw, shapes, fractions, rounds, servers):
    out = []
    for shape in shapes:
        cap, peer = capacity(raw, shape, servers, rounds)
        out.append(f"\n## 1 query + {shape} document(s), SciFact lengths\n")
        out.append("closed loop (saturation): req/s per round (load average at the end of each run)")
        for s in servers:
            cells = []
            for r in range(1, rounds + 1):
                got = run(raw, shape, f"closed-r{r}", s)
                cells.append(f"{got['qps']:.3f} (load {got['load']})" if got else "-")
            out.append(f"  {NAMES.get(s, s):28s} " + "  ".join(cells))
        if "adaptive" in servers and "fixed" in servers:
            per = []
            for r in range(1, rounds + 1):
                a, f = run(raw, shape, f"closed-r{r}", "adaptive"), run(raw, shape, f"closed-r{r}", "fixed")
                per.append(a["qps"] / f["qps"] if a and f and f["qps"] else None)
            vals = [p for p in per if p is not None]
            out.append("  saturation adaptive / fixed, per round: " + ", ".join(f"{p:.3f}" if p else "-" for p in per) +
                       (f"; mean {statistics.mean(vals):.3f} (target >= 0.97)" if vals else ""))
        out.append(f"  capacity for the open loop: {cap:.3f} req/s ({NAMES.get(peer, peer)}, mean of rounds)\n")
        out.append("open loop (Poisson), per round: P50 / P99 ms (requests measured)")
        header = f"  {'load':>6s} {'req/s':>8s} {'round':>5s} " + "".join(f"{NAMES.get(s, s)[:26]:>28s}" for s in servers)
        extra = []
        if "adaptive" in servers and "node" in servers:
            extra.append("adaptive/node P50,P99")
        if "adaptive" in servers and "fixed" in servers:
            extra.append("adaptive/fixed P50,P99")
        out.append(header + "".join(f"  {e:>24s}" for e in extra) + "  load")
        for f in fractions:
            for r in range(1, rounds + 1):
                got = {s: run(raw, shape, f"open{f}-r{r}", s) for s in servers}
                rate = next((g for g in got.values() if g), None)
                if rate is None:
                    continue
                line = f"  {float(f) * 100:5.0f}% {cap * float(f):8.3f} {r:5d} "
                for s in servers:
                    g = got[s]
                    cell = f"{g['p50']:.0f} / {g['p99']:.0f} ({g['n']}{', ' + str(g['errors']) + ' err' if g['errors'] else ''})" if g else "-"
                    line += f"{cell:>28s}"
                for e in extra:
                    other = "node" if "node" in e else "fixed"
                    a, b = got.get("adaptive"), got.get(other)
                    cell = f"{ratio(a['p50'], b['p50'])}, {ratio(a['p99'], b['p99'])}" if a and b else "-"
                    line += f"  {cell:>24s}"
                loads = [g["load"] for g in got.values() if g]
                line += "  " + (loads[-1] if loads else "")
                out.append(line)
    out.append("\nratios < 1: adaptive is faster. A P99 of a few dozen requests is one of its slowest few: read it")
    out.append("with the request count, and across rounds.")
    return "\n".join(out)


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "capacity":
        cap, _ = capacity(sys.argv[2], sys.argv[3], sys.argv[4:])
        print(f"{cap:.4f}")
    elif len(sys.argv) >= 6 and sys.argv[1] == "table":
        print(table(sys.argv[2], sys.argv[3].split(","), sys.argv[4].split(","), int(sys.argv[5]), sys.argv[6:]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
