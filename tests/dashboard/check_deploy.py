#!/usr/bin/python3
"""Checks deploy/: the Grafana dashboard JSON parses, and every tide_* metric it references (with the
labels it groups or filters by) is registered in src/serving/serving_metrics.cc; the Prometheus
config parses and scrapes /metrics.

Usage: check_deploy.py [SOURCE_DIR]   (default: the repository holding this script). Exit 0 when fine,
1 with one line per problem otherwise.
"""
import json
import pathlib
import re
import sys

HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
# Labels PromQL or Prometheus adds: `le` on histogram buckets, the target's (job, instance, and the
# static `service` of deploy/prometheus/prometheus.yml).
EXTRA_LABELS = {"le", "job", "instance", "service"}


def registered_families(source: pathlib.Path) -> dict:
    """name -> (type, set of label names), from the Add*(...) calls in serving_metrics.cc."""
    text = (source / "src/serving/serving_metrics.cc").read_text()
    call = re.compile(r'Add(Counter|Gauge|Histogram)\(\s*"(\w+)",\s*(?:"(?:[^"\\]|\\.)*"\s*)+,\s*\{([^}]*)\}')
    families = {}
    for kind, name, labels in call.findall(text):
        families[name] = (kind, set(re.findall(r'"(\w+)"', labels)))
    return families


def resolve(token: str, families: dict):
    """The family a PromQL series name belongs to, or None."""
    if token in families:
        return token
    for suffix in HISTOGRAM_SUFFIXES:
        base = token[: -len(suffix)]
        if token.endswith(suffix) and families.get(base, ("",))[0] == "Histogram":
            return base
    return None


def check_expr(where: str, expr: str, families: dict, problems: list) -> int:
    names = set(re.findall(r"\btide_\w+", expr))
    used = []
    for token in sorted(names):
        family = resolve(token, families)
        if family is None:
            problems.append(f"{where}: {token} is not registered in src/serving/serving_metrics.cc")
        else:
            used.append(family)
    allowed = set(EXTRA_LABELS)
    for family in used:
        allowed |= families[family][1]
        # A scraped `instance` label collides with the target's: Prometheus keeps it as exported_instance.
        if "instance" in families[family][1]:
            allowed.add("exported_instance")
    labels = set()
    for group in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr):
        labels |= {l.strip() for l in group.split(",") if l.strip()}
    for selector in re.findall(r"\{([^}]*)\}", expr):
        labels |= set(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", selector))
    for label in sorted(labels - allowed):
        problems.append(f"{where}: label {label} is not a label of {', '.join(used) or 'any referenced family'}")
    return len(names)


def main() -> int:
    source = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
    problems = []
    families = registered_families(source)
    if len(families) < 10:
        problems.append(f"found only {len(families)} families in serving_metrics.cc: the parser is out of date")

    dashboard_path = source / "deploy/grafana/tide-dashboard.json"
    try:
        dashboard = json.loads(dashboard_path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        print(f"FAIL {dashboard_path}: {e}")
        return 1
    references = 0
    for panel in dashboard.get("panels", []):
        targets = panel.get("targets", [])
        if not targets:
            problems.append(f"panel {panel.get('title')!r} has no query")
        for target in targets:
            references += check_expr(f"panel {panel.get('title')!r}", target.get("expr", ""), families, problems)
    for var in dashboard.get("templating", {}).get("list", []):
        query = var.get("query")
        if isinstance(query, dict):
            query = query.get("query", "")
        if var.get("type") == "query":
            references += check_expr(f"variable ${var.get('name')}", query, families, problems)
    variables = {v.get("name") for v in dashboard.get("templating", {}).get("list", [])}
    for needed in ("model", "version"):
        if needed not in variables:
            problems.append(f"the dashboard has no ${needed} variable")

    prometheus_path = source / "deploy/prometheus/prometheus.yml"
    try:
        import yaml  # python3-yaml; the check of prometheus.yml is skipped without it
    except ImportError:
        print(f"note: no PyYAML, {prometheus_path} not parsed")
    else:
        config = yaml.safe_load(prometheus_path.read_text())
        jobs = [j for j in config.get("scrape_configs", []) if j.get("job_name") == "tide"]
        if not jobs:
            problems.append(f"{prometheus_path}: no scrape config with job_name tide")
        for job in jobs:
            if job.get("metrics_path", "/metrics") != "/metrics":
                problems.append(f"{prometheus_path}: metrics_path is {job.get('metrics_path')}, tide serves /metrics")
            if not any(sc.get("targets") for sc in job.get("static_configs", [])):
                problems.append(f"{prometheus_path}: no targets")

    for p in problems:
        print("FAIL " + p)
    print(f"{'FAILED' if problems else 'ok'}: {len(dashboard.get('panels', []))} panels, {references} metric references, "
          f"{len(families)} registered families")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
