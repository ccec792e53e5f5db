#include "serving/serving_metrics.h"

namespace tide::serving {

namespace {
template <typename T>
absl::Status Assign(absl::StatusOr<T> result, T* out) {
  if (!result.ok()) return result.status();
  *out = *result;
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<std::unique_ptr<ServingMetrics>> ServingMetrics::Create() {
  auto m = std::make_unique<ServingMetrics>();
  metrics::Registry& r = m->registry;
  const std::vector<double> sizes = metrics::ExponentialBuckets(1, 2, 9);      // 1 .. 256
  const std::vector<double> tokens = metrics::ExponentialBuckets(16, 2, 12);   // 16 .. 32768
  absl::Status s;
  auto check = [&s](absl::Status st) { if (s.ok()) s = st; };
  check(Assign(r.AddCounter("tide_requests_total",
                            "Requests by model, endpoint, status (HTTP; a gRPC call: the HTTP status of its "
                            "error kind, 200 when OK) and protocol (http, grpc).",
                            {"model", "version", "endpoint", "status", "protocol"}), &m->requests));
  check(Assign(r.AddHistogram("tide_request_duration_seconds", "End-to-end request latency.",
                              {"model", "version", "endpoint", "protocol"}), &m->request_duration));
  check(Assign(r.AddHistogram("tide_stage_duration_seconds",
                              "Latency of each stage of an inference request (tokenize, queue, inference, postprocess).",
                              {"model", "version", "stage"}), &m->stage_duration));
  check(Assign(r.AddHistogram("tide_batch_size", "Rows per executed batch.", {"model", "version"}, sizes), &m->batch_size));
  check(Assign(r.AddHistogram("tide_batch_padded_tokens", "Padded tokens (bucket length x padded rows) per batch.",
                              {"model", "version"}, tokens), &m->batch_tokens));
  check(Assign(r.AddCounter("tide_batch_real_tokens_total", "Real (non-padding) tokens run.", {"model", "version"}),
               &m->real_tokens));
  check(Assign(r.AddCounter("tide_batch_padded_tokens_total", "Padded tokens run (real + padding).", {"model", "version"}),
               &m->padded_tokens));
  check(Assign(r.AddCounter("tide_batch_prompt_prefix_tokens_total",
                            "Real tokens whose keys and values came from the shared prompt prefix, computed once at load.",
                            {"model", "version"}),
               &m->prompt_prefix_tokens));
  check(Assign(r.AddGauge("tide_queue_tasks", "Rows waiting in the model's queue.", {"model", "version"}), &m->queue_tasks));
  check(Assign(r.AddGauge("tide_queue_tokens", "Tokens waiting in the model's queue.", {"model", "version"}), &m->queue_tokens));
  check(Assign(r.AddGauge("tide_padding_ratio", "Padded tokens / real tokens over all batches so far.", {"model", "version"}),
               &m->padding_ratio));
  check(Assign(r.AddGauge("tide_instance_busy_ratio", "Share of time each instance spent running batches.",
                          {"model", "version", "instance"}), &m->instance_busy_ratio));
  check(Assign(r.AddCounter("tide_rejected_tasks_total", "Rows refused at submission, by reason.", {"model", "version", "reason"}),
               &m->rejected));
  check(Assign(r.AddCounter("tide_dropped_tasks_total", "Queued rows dropped before running, by reason.", {"model", "version", "reason"}),
               &m->dropped));
  check(Assign(r.AddCounter("tide_batch_isolation_runs_total",
                            "Sub-batches re-run after a batch failed, to isolate the request that failed it.",
                            {"model", "version"}), &m->isolation_runs));
  check(Assign(r.AddGauge("tide_model_ready", "1 when the model version is ready to serve.", {"model", "version"}),
               &m->model_ready));
  check(Assign(r.AddGauge("tide_breaker_state", "Circuit breaker state: 0 closed, 1 open, 2 half-open.", {"model", "version"}),
              &m->breaker_state));
  check(Assign(r.AddCounter("tide_breaker_transitions_total", "Circuit breaker transitions, by the state entered.",
                            {"model", "version", "to"}), &m->breaker_transitions));
  check(Assign(r.AddCounter("tide_degraded_responses_total", "Answers from the fallback (BM25) while the breaker is open.",
                            {"model", "version", "fallback"}), &m->degraded));
  check(Assign(r.AddCounter("tide_shed_requests_total", "Requests refused at the edge before any work, by reason.",
                            {"reason"}), &m->shed));
  check(Assign(r.AddGauge("tide_inflight_request_bytes",
                          "Estimated bytes held by admitted inference requests (--max-inflight-bytes).", {}),
               &m->inflight_bytes));
  check(Assign(r.AddGauge("tide_tokenization_queue", "Requests waiting for a tokenization worker.", {}),
               &m->tokenization_queue));
  check(Assign(r.AddCounter("tide_key_requests_total",
                            "Inference requests by API key name (--api-keys) and admission outcome.", {"key", "outcome"}),
               &m->key_requests));
  check(Assign(r.AddCounter("tide_key_pairs_total", "Pairs (documents or tensor rows) admitted, by API key name.",
                            {"key"}),
               &m->key_pairs));
  check(Assign(r.AddCounter("tide_score_cache_hits_total", "Pairs answered from the score cache.", {"model", "version"}),
               &m->score_cache_hits));
  check(Assign(r.AddCounter("tide_score_cache_misses_total", "Pairs looked up in the score cache and not found.",
                            {"model", "version"}),
               &m->score_cache_misses));
  check(Assign(r.AddCounter("tide_score_cache_evictions_total", "Score cache entries evicted to stay in its bytes.", {}),
               &m->score_cache_evictions));
  check(Assign(r.AddGauge("tide_score_cache_bytes", "Bytes held by the score cache (--score-cache-bytes).", {}),
               &m->score_cache_bytes));
  check(Assign(r.AddCounter("tide_embed_cache_hits_total", "Embedding inputs answered from the embedding cache.",
                            {"model", "version"}),
               &m->embed_cache_hits));
  check(Assign(r.AddCounter("tide_embed_cache_misses_total",
                            "Embedding inputs looked up in the embedding cache and not found.", {"model", "version"}),
               &m->embed_cache_misses));
  check(Assign(r.AddCounter("tide_embed_cache_evictions_total",
                            "Embedding cache entries evicted to stay in its bytes.", {}),
               &m->embed_cache_evictions));
  check(Assign(r.AddGauge("tide_embed_cache_bytes", "Bytes held by the embedding cache (--embed-cache-bytes).", {}),
               &m->embed_cache_bytes));
  check(Assign(r.AddCounter("tide_model_loads_total",
                            "Model version loads (start-up, poll, repository API) by result: success or failure.",
                            {"model", "version", "result"}), &m->model_loads));
  check(Assign(r.AddGauge("tide_model_load_rss_bytes",
                          "Process resident memory around the last model load: phase=before, phase=loaded (the new "
                          "version beside the one it replaces, before that one is released) and phase=process_peak "
                          "(the process's peak resident size so far, VmHWM, which covers the load's graph fusion "
                          "and warm-up).",
                          {"phase"}), &m->model_load_rss));
  check(Assign(r.AddGauge("tide_rollout_state",
                          "Gray release of the model (serving/rollout.h): 0 idle, 1 running, 2 promoted, 3 rolled_back.",
                          {"model"}), &m->rollout_state));
  check(Assign(r.AddCounter("tide_rollout_rollbacks_total",
                            "Rollouts rolled back to the stable version, by reason: error_rate, p99_ratio, spearman, "
                            "top1, ndcg10, cosine, manual.",
                            {"model", "reason"}), &m->rollout_rollbacks));
  check(Assign(r.AddGauge("tide_rollout_agreement",
                          "Mean agreement of the candidate with the stable version over the rollout's window "
                          "(measure: spearman, top1, ndcg10; embedding models also cosine).",
                          {"model", "measure"}), &m->rollout_agreement));
  check(Assign(r.AddCounter("tide_access_log_dropped_total",
                            "Access log records dropped (--access-log): its writer fell behind or its file failed.", {}),
               &m->access_log_dropped));
  check(Assign(r.AddCounter("tide_rollout_shadow_requests_total",
                            "Rerank and KServe infer requests offered to a rollout's shadow lane (a shadow on the "
                            "candidate, a canary's duplicate on the stable version), by outcome: scored, failed, "
                            "preempted (its batch stopped for live rows), dropped_live_waiting, dropped_deadline, "
                            "dropped_queue_full, dropped_busy, dropped_not_ready, dropped_closed, dropped_stopped, "
                            "dropped_incompatible.",
                            {"model", "outcome"}), &m->rollout_shadow));
  if (!s.ok()) return s;
  return m;
}

}  // namespace tide::serving
