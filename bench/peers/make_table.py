"""Renders bench/run_all's results: table.md (stdout) and summary.json, from OUT/raw.

usage: make_table.py OUT_DIR
Rows whose server did not start or whose run failed say why instead of figures. Ratios are against
the prototype row measured in the same run. An embedding model's run (machine.facts model_task=embed)
counts texts instead of pairs and checks vectors instead of scores.
"""
import csv
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_scores  # noqa: E402

ROWS = ["prototype", "node", "tide-nobatch", "tide-batch", "tide-int8", "llama-f32", "llama-q8"]
LABELS = {
    "prototype": "prototype (FastAPI + PyTorch FP32)",
    "node": "Node.js + onnxruntime-node FP32",
    "tide-nobatch": "tide, no batching, FP32",
    "tide-batch": "tide, dynamic batching, FP32",
    "tide-int8": "tide, dynamic batching, INT8",
    "llama-f32": "llama.cpp (node-llama-cpp) GGUF F32",
    "llama-q8": "llama.cpp (node-llama-cpp) GGUF Q8_0",
}


def read_facts(path):
    facts = {}
    if os.path.exists(path):
        for line in open(path, encoding="utf-8"):
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                facts[k] = v
    return facts


def load_run(path):
    try:
        return json.load(open(path))["runs"][0]
    except (OSError, ValueError, KeyError, IndexError):
        return None


def fnum(x, digits=2):
    return "n/a" if x is None else f"{x:.{digits}f}"


def ratio(a, b, digits=2):
    return "n/a" if a is None or not b else f"{a / b:.{digits}f}x"


def locust_stats(prefix):
    try:
        rows = list(csv.DictReader(open(prefix + "_stats.csv")))
    except OSError:
        return None
    agg = next((r for r in rows if r.get("Name") == "Aggregated"), None)
    if not agg or not int(agg["Request Count"] or 0):
        return None
    pct = lambda k: float(agg[k]) if agg.get(k) not in (None, "", "N/A") else None  # noqa: E731
    return {"qps": float(agg["Requests/s"]), "completed": int(agg["Request Count"]),
            "errors": int(agg["Failure Count"]), "p50": pct("50%"), "p95": pct("95%"), "p99": pct("99%")}


def wrk_stats(path):
    try:
        m = re.search(r"^wrk-json (\{.*\})$", open(path).read(), re.M)
    except OSError:
        return None
    if not m:
        return None
    j = json.loads(m.group(1))
    return {"qps": j["rps"], "completed": j["requests"], "errors": j["socket_errors"] + j["timeouts"] + j["non_2xx_3xx"],
            "p50": j["p50_ms"], "p95": j["p95_ms"], "p99": j["p99_ms"]}


def client_cpu(path):
    try:
        cpu, wall, code = open(path).read().split()
        return float(cpu), float(wall), int(code)
    except (OSError, ValueError):
        return None


def roofline_ceilings(raw):
    """The measured ceilings of bench/roofline (run_all runs it before the first row and after the
    last): {'start': {...}, 'end': {...}} from each file's `machine-readable:` line."""
    out = {}
    for when in ("start", "end"):
        path = os.path.join(raw, f"roofline-{when}.txt")
        if not os.path.exists(path):
            continue
        m = re.search(r"machine-readable: (.*)", open(path).read())
        if m:
            out[when] = {k: float(v) for k, v in (kv.split("=") for kv in m.group(1).split())}
    return out


# minilm-l6's shape: what run_all measured before it recorded the model (older raw/ folders).
_DEFAULT_SHAPE = {"model_preset": "minilm-l6", "model_model_type": "bert", "model_layers": "6", "model_hidden": "384",
                  "model_intermediate": "1536"}


def model_shape(machine):
    """(preset, model_type, layers, hidden, intermediate) of the served model, from machine.facts."""
    f = machine if "model_layers" in machine else dict(machine, **_DEFAULT_SHAPE)
    return (f.get("model_preset", "?"), f.get("model_model_type", "bert"), int(f["model_layers"]),
            int(f["model_hidden"]), int(f["model_intermediate"]))


def flops_per_pair(raw, machine):
    """Useful FLOPs of one (query, document) pair of the workload's mean length for the served
    model's shape (the formula of bench/batching: 2 L layers W + layers 4 L^2 hidden, W the weights
    one token meets in a layer; embeddings and the classifier head are left out; the mean length
    makes the quadratic term a slight underestimate)."""
    path = os.path.join(raw, "requests.txt")
    if not os.path.exists(path):
        return None, None
    m = re.search(r"mean tokens query ([0-9.]+), document ([0-9.]+)", open(path).read())
    if not m:
        return None, None
    _, model_type, layers, h, i = model_shape(machine)
    if machine.get("model_task") == "embed":
        # One text per row: [CLS] text [SEP] (or <s> text </s>); the pooling is a few ops more.
        length = float(m.group(2)) + 2
        w = 4 * h * h + 4 * h + 2 * h * i + i + h + 4 * h
        return 2 * length * layers * w + layers * 4 * length * length * h, length
    if model_type in ("qwen3", "qwen2"):
        # A decoder reranker (run_all records its heads and the prompt frame's tokens): the prompt is
        # frame + query + document; projections q, k, v, o and SwiGLU's gate, up, down per token and
        # layer; causal attention, QK^T and PV over half the square.
        nq, nkv, d = (int(machine[f"model_{k}"]) for k in ("heads", "kv_heads", "head_dim"))
        length = float(m.group(1)) + float(m.group(2)) + float(machine.get("model_frame_tokens", 0))
        w = 2 * h * nq * d + 2 * h * nkv * d + 3 * h * i
        return 2 * length * layers * w + layers * 2 * length * length * nq * d, length
    # [CLS] query [SEP] document [SEP], or <s> query </s></s> document </s> for XLM-RoBERTa
    length = float(m.group(1)) + float(m.group(2)) + (3 if model_type == "bert" else 4)
    w = 4 * h * h + 4 * h + 2 * h * i + i + h + 4 * h
    return 2 * length * layers * w + layers * 4 * length * length * h, length


def prefix_share(raw, row):
    """Of the real tokens a tide row ran (its /metrics after the closed loop), the share whose keys
    and values came from the shared prompt prefix (computed once at load: model parameter
    shared_prompt_prefix); 0 without one or without the file."""
    path = os.path.join(raw, f"{row}-tokens.txt")
    if not os.path.exists(path):
        return 0.0
    totals = {"real": 0.0, "prompt_prefix": 0.0}
    for line in open(path):
        m = re.match(r"tide_batch_(real|prompt_prefix)_tokens_total\{[^}]*\} (\S+)", line)
        if m:
            totals[m.group(1)] += float(m.group(2))
    return totals["prompt_prefix"] / totals["real"] if totals["real"] > 0 else 0.0


def computed_flops(machine, length, prefix):
    """A decoder pair's FLOPs (flops_per_pair's formula) when its first `prefix` tokens' keys and
    values come from the shared prompt prefix: the projections run over the rest, whose causal
    attention still reads every earlier key."""
    _, _, layers, h, i = model_shape(machine)
    nq, nkv, d = (int(machine[f"model_{k}"]) for k in ("heads", "kv_heads", "head_dim"))
    w = 2 * h * nq * d + 2 * h * nkv * d + 3 * h * i
    rest = length - prefix
    return 2 * rest * layers * w + layers * 4 * rest * (prefix + rest / 2) * nq * d


def main():
    out = sys.argv[1]
    raw = os.path.join(out, "raw")
    machine = read_facts(os.path.join(raw, "machine.facts"))
    cores = int(machine.get("cores", "1"))
    docs = int(machine.get("documents", "1"))
    preset, model_type, layers, hidden, _ = model_shape(machine)
    summary = {"machine": machine, "rows": {}, "cross_checks": {}, "targets": {}}
    lines = []
    w = lines.append
    w(f"# tide side by side — {machine.get('date_utc', '?')}")
    w("")
    if machine.get("note"):
        w(f"**{machine['note']}**")
        w("")
    if "smoke" in machine.get("label", ""):
        w("**Smoke run**: short settings that only prove the pipeline end to end; its figures are not results.")
        w("")
    w(f"`{machine.get('command', 'bench/run_all')}` (git {machine.get('git', '?')})")
    w("")
    w(f"Machine: {machine.get('cpu_model', '?')}, {cores} cores, {machine.get('memory_gib', '?')} GiB; load average "
      f"before {machine.get('load_before', '?')}, after {machine.get('load_after', '?')} (shared machine: other work "
      "may have run beside the benchmark).")
    w("")
    embed = machine.get("model_task") == "embed"
    unit = "texts" if embed else "pairs"
    shape = (f"{docs} text(s) of {machine.get('doc_tokens')} tokens per request to TEI's POST /embed "
             if embed else f"1 query (~21 tokens) + {docs} document(s) of {machine.get('doc_tokens')} lengths per request ")
    w(f"Closed loop: {machine.get('clients')} concurrent clients, {machine.get('warmup')} s warm-up + "
      f"{machine.get('duration')} s measured per row — **scaled down from the seeds' 30-minute runs**. Workload: "
      + shape +
      "(`tide bench --dump-requests`, seed 42, words from the model's vocabulary), model "
      f"{preset} ({model_type}, {layers} x {hidden}, seeded random weights: real cost, meaningless scores) in every "
      "row" + (f" ({machine['model']}" + (f"; INT8 row {machine['model_int8']}" if machine.get("model_int8") else "") +
               ")." if machine.get("model") else "."))
    w("")
    proto = load_run(os.path.join(raw, "prototype-closed.json"))
    proto_open = load_run(os.path.join(raw, "prototype-open.json"))
    ref_scores = os.path.join(raw, "tide-batch-scores.json")

    w(f"| row | QPS | {unit}/s | P50 ms | P95 ms | P99 ms | errors | peak RSS MB | CPU util | {unit}/s vs prototype | "
      f"open-loop P99 ms | P99 vs prototype | {'vectors' if embed else 'scores'} vs tide FP32 |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in ROWS:
        facts = read_facts(os.path.join(raw, f"{row}.facts"))
        if not facts:
            continue
        closed = load_run(os.path.join(raw, f"{row}-closed.json"))
        opened = load_run(os.path.join(raw, f"{row}-open.json"))
        status = facts.get("status", "incomplete")
        entry = {"status": status}
        score_text = facts.get("score_check", "")
        scores = os.path.join(raw, f"{row}-scores.json")
        if not score_text and os.path.exists(scores) and os.path.exists(ref_scores) and row != "tide-batch":
            import contextlib
            import io
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                code = check_scores.compare(ref_scores, scores, 1e-4, "vector component" if embed else "logit")
            text = buf.getvalue().strip()
            m = re.search(r"max \|[a-z ]+ difference\| (\S+)", text)
            why = {"tide-int8": ": INT8 is expected to differ)",
                   "llama-f32": ": see the llama.cpp checks below)", "llama-q8": ": see the llama.cpp checks below)"}
            score_text = (m.group(1) if m else text) + ("" if code == 0 else " (above 1e-4" + why.get(row, ")"))
        elif row == "tide-batch" and os.path.exists(scores):
            score_text = "reference"
        entry["score_check"] = score_text
        if status != "ok" or closed is None:
            why = status if status != "ok" else "no closed-loop result (see raw/)"
            w(f"| {LABELS[row]} | {why} | | | | | | | | | | | |")
            summary["rows"][row] = entry
            continue
        cpu_s, wall_s = float(facts.get("closed_server_cpu_s", 0)), float(facts.get("closed_wall_s", 0))
        util = cpu_s / wall_s / cores if wall_s else None
        rss = float(facts["rss_peak_mib"]) if facts.get("rss_peak_mib") else None
        lat = closed["latency_ms"]
        entry.update({"qps": closed["qps"], "pairs_per_s": closed["pairs_per_s"], "p50_ms": lat["p50"],
                      "p95_ms": lat["p95"], "p99_ms": lat["p99"], "completed": closed["completed"],
                      "errors": closed["error_count"], "peak_rss_mib": rss, "cpu_utilisation": util,
                      "client_cpu_percent_of_one_core": closed["client_cpu"]["percent_of_one_core"],
                      "startup_s": float(facts.get("startup_s", 0))})
        if opened:
            entry.update({"open_rate": opened["request_rate"], "open_p50_ms": opened["latency_ms"]["p50"],
                          "open_p99_ms": opened["latency_ms"]["p99"], "open_completed": opened["completed"],
                          "open_errors": opened["error_count"]})
        summary["rows"][row] = entry
        pairs_vs = ratio(closed["pairs_per_s"], proto["pairs_per_s"] if proto else None)
        p99_vs = (ratio(opened["latency_ms"]["p99"], proto_open["latency_ms"]["p99"], 3)
                  if opened and proto_open else "n/a")
        open_p99 = fnum(opened["latency_ms"]["p99"], 0) if opened else "n/a"
        errors = f"{closed['error_count']}" + (f" / {opened['error_count']}" if opened else "")
        w(f"| {LABELS[row]} | {fnum(closed['qps'])} | {fnum(closed['pairs_per_s'])} | {fnum(lat['p50'], 0)} | "
          f"{fnum(lat['p95'], 0)} | {fnum(lat['p99'], 0)} | {errors} | {fnum(rss, 0)} | "
          f"{'n/a' if util is None else f'{100 * util:.0f}%'} | {pairs_vs} | {open_p99} | {p99_vs} | {score_text} |")
    w("")
    if proto_open:
        w(f"Open loop: Poisson arrivals at {proto_open['request_rate']:.3f} req/s = {machine.get('open_fraction')} x "
          f"the prototype's closed-loop QPS, {machine.get('open_duration')} s per row (after 5 s warm-up); "
          "latency from each request's intended send time. Errors column: closed / open loop.")
    w("Peak RSS: the server's process tree, sampled every 0.5 s during the closed loop. CPU util: the tree's "
      f"CPU seconds over the closed loop's wall time (warm-up included) / {cores} cores.")
    llama_notes = []
    for row in ("llama-f32", "llama-q8"):
        facts = read_facts(os.path.join(raw, f"{row}.facts"))
        if facts.get("token_check") or facts.get("model_check"):
            summary["rows"].setdefault(row, {}).update({"token_check": facts.get("token_check"),
                                                        "model_check": facts.get("model_check")})
            llama_notes.append(f"{LABELS[row]}: {facts.get('token_check', 'no token check')}; "
                               f"{facts.get('model_check', 'no converter check')}")
    if llama_notes:
        w("llama.cpp checks (bench/peers/check_llama.py; every difference in llama-*-tokens.txt beside this table): " +
          " | ".join(llama_notes) + ". Its scores differ from tide's by more than 1e-4 by construction: llama.cpp's "
          "BERT graph adds token type 0 to every token (tide and HF give the document type 1; XLM-R has one "
          "type) and uses ggml's tanh GELU (HF: erf); threads = cpuMathCores, one ranking context evaluating "
          "one pair at a time (docs/benchmarks.md, \"llama.cpp peer\").")
    gen = [f"{row} {e['client_cpu_percent_of_one_core']:.2f}%" for row, e in summary["rows"].items()
           if "client_cpu_percent_of_one_core" in e]
    if gen:
        w(f"Load generator (tide bench, beside the server) CPU, % of one core in the closed loop: {', '.join(gen)}.")
    w("")

    # Useful GFLOP/s against the nominal peak and the measured ceilings.
    ceilings = roofline_ceilings(raw)
    flops, length = flops_per_pair(raw, machine)
    if flops and ceilings:
        fp32 = [c["fp32_ceiling_gflops"] for c in ceilings.values() if c.get("fp32_ceiling_gflops")]
        int8 = [c["int8_ceiling_gflops"] for c in ceilings.values() if c.get("int8_ceiling_gflops")]
        nominal = next(iter(ceilings.values())).get("nominal_gflops")
        fp32_c = sum(fp32) / len(fp32) if fp32 else None
        int8_c = sum(int8) / len(int8) if int8 else None
        w(f"Measured ceilings (`build/bench/roofline_bench`, before the first row and after the last; mean): FP32 "
          f"MatMul {' / '.join(f'{x:.1f}' for x in fp32)} GFLOP/s, INT8 {' / '.join(f'{x:.1f}' for x in int8)} GOP/s; "
          f"nominal FP32 peak {fnum(nominal, 1)}. Useful FLOPs per {unit[:-1]} of the mean length ({length:.0f} tokens): "
          f"{flops / 1e9:.2f} GFLOP.")
        w("")
        decoder = model_type in ("qwen3", "qwen2")
        shares = {row: prefix_share(raw, row) for row in ROWS}
        prefixed = decoder and any(v > 0 for v in shares.values())
        if prefixed:
            w("A tide row with a shared prompt prefix (model parameter `shared_prompt_prefix`) computes the prompt's "
              "shared first tokens once at load and each pair's rest: its useful GFLOP/s count the whole prompt, "
              "what the pair needs; the computed GFLOP/s count what it ran (the share of real tokens from the prefix, "
              "from its `/metrics`), and the % columns are of those.")
            w("")
            w("| row | useful GFLOP/s | tokens from the shared prompt prefix | computed GFLOP/s | % of nominal FP32 peak "
              "| % of measured FP32 ceiling | % of measured INT8 ceiling |")
            w("|---|---|---|---|---|---|---|")
        else:
            w("| row | useful GFLOP/s | % of nominal FP32 peak | % of measured FP32 ceiling | % of measured INT8 ceiling |")
            w("|---|---|---|---|---|")
        summary["ceilings"] = {"fp32_gflops": fp32_c, "int8_gops": int8_c, "nominal_gflops": nominal,
                               "flops_per_pair": flops}
        for row in ROWS:
            e = summary["rows"].get(row, {})
            if "pairs_per_s" not in e:
                continue
            g = e["pairs_per_s"] * flops / 1e9
            e["useful_gflops"] = g
            computed = g
            if prefixed:
                share = shares[row]
                computed = e["pairs_per_s"] * computed_flops(machine, length, share * length) / 1e9
                e["prompt_prefix_share"] = share
            e["computed_gflops"] = computed
            pct = lambda c: f"{100 * computed / c:.1f}%" if c else "n/a"
            tail = f"{pct(nominal)} | {pct(fp32_c)} | {pct(int8_c) if row == 'tide-int8' else '(FP32 row)'} |"
            if prefixed:
                w(f"| {LABELS[row]} | {g:.1f} | {100 * shares[row]:.1f}% | {computed:.1f} | {tail}")
            else:
                w(f"| {LABELS[row]} | {g:.1f} | {tail}")
        w("")

    # Targets (measured, not asserted).
    rows = summary["rows"]
    def r(name, key):
        return rows.get(name, {}).get(key)
    # (name, measured row, reference row, wanted ratio, comparison of measured / reference with it)
    checks = [
        ("tide batching FP32 pairs/s >= 3x prototype", r("tide-batch", "pairs_per_s"), r("prototype", "pairs_per_s"), 3, ">="),
        ("tide batching INT8 pairs/s >= 5x prototype", r("tide-int8", "pairs_per_s"), r("prototype", "pairs_per_s"), 5, ">="),
        ("tide batching FP32 open-loop P99 <= 1/10 prototype's", r("tide-batch", "open_p99_ms"),
         r("prototype", "open_p99_ms"), 0.1, "<="),
        ("tide batching FP32 pairs/s >= 2x Node + onnxruntime", r("tide-batch", "pairs_per_s"), r("node", "pairs_per_s"), 2,
         ">="),
        ("tide batching FP32 pairs/s >= 2x llama.cpp F32", r("tide-batch", "pairs_per_s"), r("llama-f32", "pairs_per_s"), 2,
         ">="),
        ("tide batching INT8 pairs/s >= 2x llama.cpp Q8_0", r("tide-int8", "pairs_per_s"), r("llama-q8", "pairs_per_s"), 2,
         ">="),
        ("tide batching FP32 open-loop P99 < llama.cpp F32's", r("tide-batch", "open_p99_ms"), r("llama-f32", "open_p99_ms"),
         1, "<"),
        ("tide batching INT8 open-loop P99 < llama.cpp Q8_0's", r("tide-int8", "open_p99_ms"), r("llama-q8", "open_p99_ms"),
         1, "<"),
    ]
    if embed:  # issue #31 sets no ratio: the table shows them (want None)
        checks = [
            ("tide FP32 texts/s / prototype's", r("tide-batch", "pairs_per_s"), r("prototype", "pairs_per_s"), None, ""),
            ("tide FP32 texts/s / Node + onnxruntime's", r("tide-batch", "pairs_per_s"), r("node", "pairs_per_s"), None,
             ""),
            ("tide FP32 closed-loop P99 / prototype's", r("tide-batch", "p99_ms"), r("prototype", "p99_ms"), None, ""),
            ("tide FP32 closed-loop P99 / Node + onnxruntime's", r("tide-batch", "p99_ms"), r("node", "p99_ms"), None, ""),
            ("tide FP32 peak RSS / prototype's", r("tide-batch", "peak_rss_mib"), r("prototype", "peak_rss_mib"), None, ""),
            ("tide FP32 peak RSS / Node + onnxruntime's", r("tide-batch", "peak_rss_mib"), r("node", "peak_rss_mib"), None,
             ""),
        ]
    elif model_type in ("qwen3", "qwen2"):  # issue #28's targets for decoder rerankers
        fp32_ceiling_pct = None
        if summary.get("ceilings", {}).get("fp32_gflops") and r("tide-batch", "computed_gflops") is not None:
            fp32_ceiling_pct = r("tide-batch", "computed_gflops") / summary["ceilings"]["fp32_gflops"]
        checks = [
            ("tide FP32 pairs/s >= 3x prototype", r("tide-batch", "pairs_per_s"), r("prototype", "pairs_per_s"), 3, ">="),
            ("tide FP32 pairs/s >= 1.5x Node + onnxruntime", r("tide-batch", "pairs_per_s"), r("node", "pairs_per_s"),
             1.5, ">="),
            ("tide INT8 pairs/s >= 1.7x tide FP32", r("tide-int8", "pairs_per_s"), r("tide-batch", "pairs_per_s"), 1.7,
             ">="),
            ("tide FP32 computed GFLOP/s >= 80% of the measured FP32 ceiling", fp32_ceiling_pct, 1, 0.8, ">="),
        ]
    w("| target | measured | met |")
    w("|---|---|---|")
    for name, a, b, want, op in checks:
        if a is None or not b:
            w(f"| {name} | n/a | n/a |")
            continue
        x = a / b
        if want is None:  # a ratio shown, no target
            summary["targets"][name] = {"ratio": x}
            w(f"| {name} | {x:.3f}x | (no target) |")
            continue
        met = {">=": x >= want, "<=": x <= want, "<": x < want}[op]
        summary["targets"][name] = {"ratio": x, "met": met}
        w(f"| {name} | {x:.3f}x | {'yes' if met else 'no'} |")
    w("")

    cross = []
    for row in ("prototype", "tide-batch"):
        base = rows.get(row, {})
        if "qps" in base:
            cross.append(("tide bench", row, {"qps": base["qps"], "p50": base["p50_ms"], "p95": base["p95_ms"],
                                              "p99": base["p99_ms"], "errors": base["errors"]},
                          f"{base['client_cpu_percent_of_one_core']:.2f}%"))
        for tool, stats in (("locust", locust_stats(os.path.join(raw, f"{row}-locust"))),
                            ("wrk", wrk_stats(os.path.join(raw, f"{row}-wrk.txt")))):
            usage = client_cpu(os.path.join(raw, f"{row}-{tool}.cpu"))
            if stats is None and usage is None:
                continue
            cpu = f"{100 * usage[0] / usage[1]:.2f}%" if usage and usage[1] else "n/a"
            cross.append((tool, row, stats, cpu))
    if any(tool != "tide bench" for tool, *_ in cross):
        w(f"Cross-check with third-party clients ({machine.get('clients')} closed-loop users, same bodies, "
          f"{machine.get('cross_duration')} s; locust and wrk count from the first request, no warm-up excluded):")
        w("")
        w("| client | row | QPS | P50 ms | P95 ms | P99 ms | errors | client CPU (% of one core) |")
        w("|---|---|---|---|---|---|---|---|")
        for tool, row, s, cpu in cross:
            if s is None:
                w(f"| {tool} | {row} | no result (see raw/{row}-{tool}.txt) | | | | | {cpu} |")
                continue
            summary["cross_checks"][f"{tool}/{row}"] = dict(s, client_cpu=cpu)
            w(f"| {tool} | {row} | {fnum(s['qps'])} | {fnum(s['p50'], 0)} | {fnum(s['p95'], 0)} | {fnum(s['p99'], 0)} | "
              f"{s['errors']} | {cpu} |")
        w("")
    tok = os.path.join(raw, "tokenizer_check.txt")
    if os.path.exists(tok):
        w(f"Prototype tokenizer: {open(tok).read().strip().splitlines()[-1]}.")
    w("Raw outputs (tide bench JSON, server logs, locust CSV, wrk output) are in raw/.")
    print("\n".join(lines))
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
