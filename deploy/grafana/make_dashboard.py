#!/usr/bin/python3
"""Writes deploy/grafana/tide-dashboard.json (run from the repository root after changing a panel;
tests/dashboard/check_deploy.py checks every metric and label it uses against serving_metrics.cc)."""
import json
SEL = 'model=~"$model",version=~"$version"'
RI = '$__rate_interval'
panels = []
y = 0
def ts(title, exprs, unit="short", w=12, h=8, desc="", extra=None):
    global y
    p = {"type": "timeseries", "title": title, "description": desc,
         "datasource": {"type": "prometheus", "uid": "${datasource}"},
         "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
         "options": {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}},
         "targets": [{"refId": chr(65 + i), "expr": e, "legendFormat": l,
                      "datasource": {"type": "prometheus", "uid": "${datasource}"}} for i, (e, l) in enumerate(exprs)]}
    if extra: p.update(extra)
    return p
def heat(title, expr, desc):
    return {"type": "heatmap", "title": title, "description": desc,
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "options": {"calculate": False, "yAxis": {"unit": "short"}, "cellGap": 1,
                        "color": {"mode": "scheme", "scheme": "Oranges", "exponent": 0.5}},
            "targets": [{"refId": "A", "expr": expr, "format": "heatmap", "legendFormat": "{{le}}",
                         "datasource": {"type": "prometheus", "uid": "${datasource}"}}]}
rows = [
  [ts("Requests/s", [(f'sum by (model, version) (rate(tide_requests_total{{{SEL}}}[{RI}]))', "{{model}} v{{version}}")],
      "reqps", desc="HTTP requests answered, all endpoints and status codes."),
   ts("Pairs/s", [(f'sum by (model, version) (rate(tide_batch_size_sum{{{SEL}}}[{RI}]))', "{{model}} v{{version}}")],
      "short", desc="(query, document) pairs scored: rows run in batches.")],
  [ts("Request latency P50 / P95 / P99", [
      (f'histogram_quantile({q}, sum by (le, model, version) (rate(tide_request_duration_seconds_bucket{{{SEL}}}[{RI}])))',
       "P" + str(int(q * 100)) + " {{model}} v{{version}}") for q in (0.5, 0.95, 0.99)], "s"),
   ts("Stage latency P99", [(f'histogram_quantile(0.99, sum by (le, model, version, stage) (rate(tide_stage_duration_seconds_bucket{{{SEL}}}[{RI}])))',
       "{{stage}} {{model}} v{{version}}")], "s", desc="tokenize, queue, inference, postprocess.")],
  [ts("Queue depth", [(f'sum by (model, version) (tide_queue_tasks{{{SEL}}})', "rows {{model}} v{{version}}")], "short"),
   ts("Queued tokens", [(f'sum by (model, version) (tide_queue_tokens{{{SEL}}})', "tokens {{model}} v{{version}}")], "short")],
  [heat("Batch size (rows per batch)", f'sum by (le) (increase(tide_batch_size_bucket{{{SEL}}}[{RI}]))',
        "Batches per bucket of rows per batch."),
   heat("Padded tokens per batch", f'sum by (le) (increase(tide_batch_padded_tokens_bucket{{{SEL}}}[{RI}]))',
        "Batches per bucket of padded tokens (bucket length x padded rows).")],
  [ts("Padding ratio (padded / real tokens)", [
      (f'sum by (model, version) (rate(tide_batch_padded_tokens_total{{{SEL}}}[{RI}])) / sum by (model, version) (rate(tide_batch_real_tokens_total{{{SEL}}}[{RI}]))',
       "window {{model}} v{{version}}"),
      (f'tide_padding_ratio{{{SEL}}}', "since start {{model}} v{{version}}")], "short"),
   ts("Instance busy ratio", [(f'tide_instance_busy_ratio{{{SEL}}}', "{{model}} v{{version}} #{{exported_instance}} @{{instance}}")], "percentunit",
      desc="Share of time each model instance spent running batches. tide's own `instance` label (the model instance index) collides with Prometheus' target label, so Prometheus stores it as exported_instance (honor_labels: false, the default).",
      extra={"fieldConfig": {"defaults": {"unit": "percentunit", "min": 0, "max": 1}, "overrides": []}})],
  [ts("Circuit breaker state", [(f'tide_breaker_state{{{SEL}}}', "{{model}} v{{version}}")], "short",
      desc="0 closed, 1 open, 2 half-open (models with a breaker configured).",
      extra={"fieldConfig": {"defaults": {"unit": "short", "min": 0, "max": 2, "mappings": [
          {"type": "value", "options": {"0": {"text": "closed", "color": "green"}, "1": {"text": "open", "color": "red"},
                                        "2": {"text": "half-open", "color": "orange"}}}]}, "overrides": []}}),
   ts("Breaker transitions and degraded answers /s", [
      (f'sum by (model, version, to) (rate(tide_breaker_transitions_total{{{SEL}}}[{RI}]))', "to {{to}} {{model}} v{{version}}"),
      (f'sum by (model, version, fallback) (rate(tide_degraded_responses_total{{{SEL}}}[{RI}]))', "degraded ({{fallback}}) {{model}} v{{version}}")], "short")],
  [ts("Errors, rejections and drops /s", [
      (f'sum by (model, version) (rate(tide_requests_total{{{SEL},status=~"5.."}}[{RI}]))', "5xx {{model}} v{{version}}"),
      (f'sum by (model, version, reason) (rate(tide_rejected_tasks_total{{{SEL}}}[{RI}]))', "rejected rows ({{reason}}) {{model}} v{{version}}"),
      (f'sum by (model, version, reason) (rate(tide_dropped_tasks_total{{{SEL}}}[{RI}]))', "dropped rows ({{reason}}) {{model}} v{{version}}"),
      (f'sum by (reason) (rate(tide_shed_requests_total[{RI}]))', "shed at the edge ({{reason}})")], "short"),
   ts("Model ready", [(f'tide_model_ready{{{SEL}}}', "{{model}} v{{version}}")], "short",
      extra={"fieldConfig": {"defaults": {"unit": "short", "min": 0, "max": 1}, "overrides": []}})],
  [ts("Score cache hit ratio", [
      (f'sum by (model, version) (rate(tide_score_cache_hits_total{{{SEL}}}[{RI}])) / (sum by (model, version) (rate(tide_score_cache_hits_total{{{SEL}}}[{RI}])) + sum by (model, version) (rate(tide_score_cache_misses_total{{{SEL}}}[{RI}])))',
       "{{model}} v{{version}}")], "percentunit",
      desc="Pairs answered from the per-pair score cache / pairs looked up (--score-cache-bytes; no data when it is off).",
      extra={"fieldConfig": {"defaults": {"unit": "percentunit", "min": 0, "max": 1}, "overrides": []}}),
   ts("Score cache: pairs/s and bytes", [
      (f'sum by (model, version) (rate(tide_score_cache_hits_total{{{SEL}}}[{RI}]))', "hits {{model}} v{{version}}"),
      (f'sum by (model, version) (rate(tide_score_cache_misses_total{{{SEL}}}[{RI}]))', "misses {{model}} v{{version}}"),
      (f'rate(tide_score_cache_evictions_total[{RI}])', "evictions (server)"),
      ('tide_score_cache_bytes', "bytes held (server, right axis)")], "short",
      desc="Hits and misses per model version; evictions and bytes are the whole cache's.",
      extra={"fieldConfig": {"defaults": {"unit": "short"}, "overrides": [
          {"matcher": {"id": "byName", "options": "bytes held (server, right axis)"},
           "properties": [{"id": "unit", "value": "bytes"}, {"id": "custom.axisPlacement", "value": "right"}]}]}})],
  [ts("Rollout state", [('tide_rollout_state{model=~"$model"}', "{{model}}")], "short",
      desc="Gray release per model (PUT /v2/models/{m}/rollout): 0 idle, 1 running, 2 promoted, 3 rolled back. Per-version window stats: GET /v2/models/{m}/rollout or the live dashboard.",
      extra={"fieldConfig": {"defaults": {"unit": "short", "min": 0, "max": 3, "mappings": [
          {"type": "value", "options": {"0": {"text": "idle", "color": "text"}, "1": {"text": "running", "color": "blue"},
                                        "2": {"text": "promoted", "color": "green"}, "3": {"text": "rolled back", "color": "red"}}}]},
                             "overrides": []}}),
   ts("Rollout agreement (candidate vs stable) and rollbacks", [
      ('tide_rollout_agreement{model=~"$model"}', "{{measure}} {{model}}"),
      (f'sum by (model, reason) (increase(tide_rollout_rollbacks_total{{model=~"$model"}}[{RI}]))', "rollbacks ({{reason}}) {{model}}")], "short",
      desc="Mean Spearman, top-1 and NDCG@10 agreement over the rollout's window; rollbacks by reason (error_rate, p99_ratio, spearman, top1, ndcg10, manual).")],
  [ts("Rollout: requests/s and P99 per version", [
      (f'sum by (model, version) (rate(tide_requests_total{{{SEL}}}[{RI}]))', "req/s {{model}} v{{version}}"),
      (f'histogram_quantile(0.99, sum by (le, model, version) (rate(tide_request_duration_seconds_bucket{{{SEL}}}[{RI}]))) * 1000',
       "P99 ms {{model}} v{{version}}")], "short",
      desc="The stable and the candidate version side by side: the share each answers and their tails (what the rollout guard compares)."),
   ts("Access log records dropped /s", [(f'rate(tide_access_log_dropped_total[{RI}])', "dropped (server)")], "short",
      desc="--access-log: records dropped because the writer fell behind or the file failed (requests are never slowed).")],
  [ts("Tokenization queue (server)", [('tide_tokenization_queue', "requests waiting for a tokenization worker")], "short"),
   ts("In-flight request bytes (server)", [('tide_inflight_request_bytes', "admitted inference requests")], "bytes",
      desc="Estimated bytes held by admitted inference requests (--max-inflight-bytes).")],
]
pid = 1
for row in rows:
    x = 0
    for p in row:
        p["id"] = pid; pid += 1
        p["gridPos"] = {"h": 8, "w": 12, "x": x, "y": y}
        x += 12
        panels.append(p)
    y += 8
dash = {
  "__inputs": [{"name": "DS_PROMETHEUS", "label": "Prometheus", "type": "datasource", "pluginId": "prometheus", "pluginName": "Prometheus"}],
  "title": "tide", "uid": "tide-serving", "description": "tide reranking server: traffic, latency, batching, queues, instances, breaker, score cache, rollouts (metrics from GET /metrics).",
  "tags": ["tide", "reranker"], "timezone": "browser", "schemaVersion": 39, "version": 1, "editable": True,
  "refresh": "10s", "time": {"from": "now-1h", "to": "now"},
  "templating": {"list": [
    {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus", "current": {}, "hide": 0},
    {"name": "model", "label": "Model", "type": "query", "datasource": {"type": "prometheus", "uid": "${datasource}"},
     "query": {"query": "label_values(tide_model_ready, model)", "refId": "model"}, "definition": "label_values(tide_model_ready, model)",
     "refresh": 2, "includeAll": True, "multi": True, "allValue": ".*", "current": {"text": "All", "value": "$__all"}, "sort": 1},
    {"name": "version", "label": "Version", "type": "query", "datasource": {"type": "prometheus", "uid": "${datasource}"},
     "query": {"query": "label_values(tide_model_ready{model=~\"$model\"}, version)", "refId": "version"},
     "definition": "label_values(tide_model_ready{model=~\"$model\"}, version)",
     "refresh": 2, "includeAll": True, "multi": True, "allValue": ".*", "current": {"text": "All", "value": "$__all"}, "sort": 3},
  ]},
  "annotations": {"list": []},
  "panels": panels,
}
json.dump(dash, open("deploy/grafana/tide-dashboard.json", "w"), indent=2)
open("deploy/grafana/tide-dashboard.json", "a").write("\n")
print(len(panels), "panels")
