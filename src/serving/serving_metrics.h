// tide::serving::ServingMetrics — every Prometheus metric family the server exports, registered
// once in one Registry (GET /metrics renders it).
//
// Contract: created once at start-up; the family pointers are stable and thread-safe to update.
// Per-model gauges that mirror batcher/pool state (queue size, busy ratio) are refreshed by
// RefreshGauges right before each scrape, so the hot path pays nothing for them.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "metrics/registry.h"

namespace tide::serving {

struct ServingMetrics {
  static absl::StatusOr<std::unique_ptr<ServingMetrics>> Create();

  metrics::Registry registry;
  // Requests by model, endpoint, status and protocol ("http", "grpc"; a gRPC call's status is the
  // HTTP status of its error kind, common/error.h); end-to-end latency by model, endpoint, protocol.
  metrics::Family<metrics::Counter>* requests = nullptr;            // tide_requests_total
  metrics::Family<metrics::Histogram>* request_duration = nullptr;  // tide_request_duration_seconds
  // Per-stage latency of inference requests: stage = tokenize | queue | inference | postprocess.
  metrics::Family<metrics::Histogram>* stage_duration = nullptr;    // tide_stage_duration_seconds
  // Batches as executed.
  metrics::Family<metrics::Histogram>* batch_size = nullptr;        // tide_batch_size
  metrics::Family<metrics::Histogram>* batch_tokens = nullptr;      // tide_batch_padded_tokens
  metrics::Family<metrics::Counter>* real_tokens = nullptr;         // tide_batch_real_tokens_total
  metrics::Family<metrics::Counter>* padded_tokens = nullptr;       // tide_batch_padded_tokens_total
  metrics::Family<metrics::Counter>* prompt_prefix_tokens = nullptr;  // tide_batch_prompt_prefix_tokens_total
  // Queue state and outcomes, refreshed at scrape time.
  metrics::Family<metrics::Gauge>* queue_tasks = nullptr;           // tide_queue_tasks
  metrics::Family<metrics::Gauge>* queue_tokens = nullptr;          // tide_queue_tokens
  metrics::Family<metrics::Gauge>* padding_ratio = nullptr;         // tide_padding_ratio
  metrics::Family<metrics::Gauge>* instance_busy_ratio = nullptr;   // tide_instance_busy_ratio
  metrics::Family<metrics::Counter>* rejected = nullptr;            // tide_rejected_tasks_total
  metrics::Family<metrics::Counter>* dropped = nullptr;             // tide_dropped_tasks_total
  // Re-runs of a failed batch's rows, by request, to find the request that failed it.
  metrics::Family<metrics::Counter>* isolation_runs = nullptr;      // tide_batch_isolation_runs_total
  metrics::Family<metrics::Gauge>* model_ready = nullptr;           // tide_model_ready
  // Circuit breaker: state (0 closed, 1 open, 2 half-open), transitions, degraded answers.
  metrics::Family<metrics::Gauge>* breaker_state = nullptr;         // tide_breaker_state
  metrics::Family<metrics::Counter>* breaker_transitions = nullptr;  // tide_breaker_transitions_total
  metrics::Family<metrics::Counter>* degraded = nullptr;            // tide_degraded_responses_total
  // Load shedding and authentication at the edge.
  metrics::Family<metrics::Counter>* shed = nullptr;                // tide_shed_requests_total
  // Request cost bounds, refreshed at scrape time.
  metrics::Family<metrics::Gauge>* inflight_bytes = nullptr;        // tide_inflight_request_bytes
  metrics::Family<metrics::Gauge>* tokenization_queue = nullptr;    // tide_tokenization_queue
  // Per API key (--api-keys), by the key's name, never the key: admission outcomes
  // (admitted | over_requests | over_pairs | over_concurrency) and pairs admitted.
  metrics::Family<metrics::Counter>* key_requests = nullptr;        // tide_key_requests_total
  metrics::Family<metrics::Counter>* key_pairs = nullptr;           // tide_key_pairs_total
  // The per-pair score cache (--score-cache-bytes): pairs found and not found, entries evicted
  // (mirrored at scrape time), bytes in use.
  metrics::Family<metrics::Counter>* score_cache_hits = nullptr;    // tide_score_cache_hits_total
  metrics::Family<metrics::Counter>* score_cache_misses = nullptr;  // tide_score_cache_misses_total
  metrics::Family<metrics::Counter>* score_cache_evictions = nullptr;  // tide_score_cache_evictions_total
  metrics::Family<metrics::Gauge>* score_cache_bytes = nullptr;     // tide_score_cache_bytes
  // The embedding cache (--embed-cache-bytes): inputs found and not found, evictions, bytes.
  metrics::Family<metrics::Counter>* embed_cache_hits = nullptr;    // tide_embed_cache_hits_total
  metrics::Family<metrics::Counter>* embed_cache_misses = nullptr;  // tide_embed_cache_misses_total
  metrics::Family<metrics::Counter>* embed_cache_evictions = nullptr;  // tide_embed_cache_evictions_total
  metrics::Family<metrics::Gauge>* embed_cache_bytes = nullptr;     // tide_embed_cache_bytes
  // Model control (serving/model_repository_controller.h): loads by outcome, and the process's
  // resident memory around the last load: before it, with the new version loaded beside the one
  // it replaces (before the old one is released), and the process's peak so far (VmHWM).
  metrics::Family<metrics::Counter>* model_loads = nullptr;         // tide_model_loads_total
  metrics::Family<metrics::Gauge>* model_load_rss = nullptr;        // tide_model_load_rss_bytes
  // Gray release (serving/rollout.h): state per model, rollbacks by reason, the agreement window's
  // means per measure.
  metrics::Family<metrics::Gauge>* rollout_state = nullptr;         // tide_rollout_state
  metrics::Family<metrics::Counter>* rollout_rollbacks = nullptr;   // tide_rollout_rollbacks_total
  metrics::Family<metrics::Gauge>* rollout_agreement = nullptr;     // tide_rollout_agreement
  // The access log (--access-log, serving/access_log.h): records dropped because its writer fell
  // behind (or its sink failed) rather than slowing requests down.
  metrics::Family<metrics::Counter>* access_log_dropped = nullptr;  // tide_access_log_dropped_total
  metrics::Family<metrics::Counter>* rollout_shadow = nullptr;      // tide_rollout_shadow_requests_total
};

}  // namespace tide::serving
