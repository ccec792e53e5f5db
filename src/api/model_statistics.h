// tide::api model statistics — `GET /v2/models/{m}[/versions/{v}]/stats` in the shape of Triton's
// statistics extension, rendered from a plain value the serving layer fills.
//
// Contract: pure renderer producing compact JSON; thread-safe; never fails. Durations are
// cumulative nanoseconds. Counting follows Triton: success, fail, queue, compute_input,
// compute_infer and compute_output count each request once (queue and compute_infer with the
// time of its slowest row); execution_count and batch_stats count executed batches. The
// durations of compute_input and compute_output are zero: tide fills its input buffers and reads
// its outputs inside the timed inference call. cache_hit and cache_miss stay zero (tide has no
// response cache), response_stats is empty (it is for decoupled models) and memory_usage is
// empty (tide does not report per-model memory).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tide::api {

struct DurationStat {
  uint64_t count = 0;
  uint64_t ns = 0;
};

struct BatchStat {
  uint64_t batch_size = 0;
  DurationStat compute_infer;  // executions of batches of this size and their time
};

struct ModelStatistics {
  std::string name;
  std::string version;
  int64_t last_inference_ms = 0;  // ms since the Unix epoch of the last executed batch; 0: none yet
  uint64_t inference_count = 0;   // rows run
  uint64_t execution_count = 0;   // batches run
  DurationStat success;           // requests answered from the model, request latency
  DurationStat fail;              // requests that failed
  DurationStat queue;             // requests, time queued (slowest row)
  DurationStat compute_input;     // requests (no time: see above)
  DurationStat compute_infer;     // requests, time in the runtime (slowest row's batch)
  DurationStat compute_output;    // requests (no time: see above)
  std::vector<BatchStat> batch_stats;  // by batch size, ascending
};

// {"model_stats": [{name, version, last_inference, inference_count, execution_count,
//   inference_stats: {success, fail, queue, compute_input, compute_infer, compute_output,
//                     cache_hit, cache_miss},
//   response_stats: {},
//   batch_stats: [{batch_size, compute_input, compute_infer, compute_output}],
//   memory_usage: []}, ...]}
std::string RenderModelStatistics(const std::vector<ModelStatistics>& models);

}  // namespace tide::api
