// tide::serving::ModelRunner — one model instance: a runtime::ModelBackend (one session) that runs
// batches of RowTasks for the instance pool.
//
// Contract:
//  - Owned by one InstancePool worker thread; not thread-safe.
//  - Run pads the batch to its shape bucket (padded_batch_size x padded_sequence_length) in
//    buffers reused across calls, runs the backend (RunAlone for a batch formed alone, see
//    batching::Batch::alone; Run otherwise), and completes every task with its logits row. A batch
//    with a task that wants the token states (RowTask::wants_token_states) fetches them
//    (runtime::TokenBatch::token_states), and those tasks get their real tokens' states too.
//    On a backend error (or logits of the wrong shape) it completes no task and returns
//    errors::Backend (INTERNAL, ErrorKind::kBackend: 500, error_type "backend")
//    "inference failed for model M version V": the engine's own text is logged here (error level,
//    with model, version, instance and batch shape; at most kMaxErrorLogsPerSecond lines a second,
//    the rest counted in the next line) and never reaches a client. The pool then isolates the
//    failing request (batching/instance_pool.h) and fails only its tasks with that status (500).
//  - Warmup runs the given shapes once each before the instance serves (memory plans and arena
//    sized before the first request), and RunAlone on the one-row shapes and the largest.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "batching/instance_pool.h"
#include "runtime/model_backend.h"
#include "serving/inference_request.h"

namespace tide::serving {

struct BatchShape {
  int64_t batch = 1;
  int64_t seq_len = 16;
};

// Observes each executed batch (metrics): batch, its inference time, instance index.
using BatchObserver = std::function<void(const batching::Batch<RowTask>&, Clock::duration, int)>;

class ModelRunner final : public batching::BatchRunner<RowTask> {
 public:
  static constexpr int kMaxErrorLogsPerSecond = 5;

  // `model` and `version` name the model in the error status and the log.
  // `batch_trace` (may be empty): called after a batch with sampled requests ran, for its span,
  // which names the model's `precision` (LoadedModel::precision).
  ModelRunner(std::unique_ptr<runtime::ModelBackend> backend, int64_t pad_id, int instance,
              BatchObserver observer, std::string model = "", int64_t version = 0,
              batching::BatchTraceHook batch_trace = {}, std::string precision = "");

  absl::Status Run(batching::Batch<RowTask>& batch) override;
  absl::Status Warmup(const std::vector<BatchShape>& shapes);

 private:
  void Fill(const batching::Batch<RowTask>& batch);
  // The batch's span, when a sampled request rode in it (batch_trace_).
  std::optional<batching::TraceLink> TraceBatch(const batching::Batch<RowTask>& batch, Clock::duration took) const;
  // Logs the engine's failure (rate-limited) and returns the status clients see.
  absl::Status BackendFailure(const batching::Batch<RowTask>& batch, const absl::Status& engine);

  std::unique_ptr<runtime::ModelBackend> backend_;
  const int64_t pad_id_;
  const int instance_;
  const bool with_type_ids_;
  BatchObserver observer_;
  const std::string model_;
  const int64_t version_;
  const batching::BatchTraceHook batch_trace_;
  const std::string precision_;
  Clock::time_point log_window_start_{};
  int logged_in_window_ = 0;
  uint64_t suppressed_logs_ = 0;
  runtime::TokenBatch input_;
  runtime::Logits logits_;
};

}  // namespace tide::serving
