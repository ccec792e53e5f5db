// tide::serving::ModelRunner — one model instance: a runtime::ModelBackend (one session) that runs
// batches of RowTasks for the instance pool.
//
// Contract:
//  - Owned by one InstancePool worker thread; not thread-safe.
//  - Run pads the batch to its shape bucket (padded_batch_size x padded_sequence_length) in
//    buffers reused across calls, runs the backend, and completes every task with its logits row.
//    On a backend error it returns the status and the pool fails the batch's tasks with it.
//  - Warmup runs the given shapes once each before the instance serves (memory plans and arena
//    sized before the first request).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
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
  ModelRunner(std::unique_ptr<runtime::ModelBackend> backend, int64_t pad_id, int instance,
              BatchObserver observer);

  absl::Status Run(batching::Batch<RowTask>& batch) override;
  absl::Status Warmup(const std::vector<BatchShape>& shapes);

 private:
  void Fill(const batching::Batch<RowTask>& batch);

  std::unique_ptr<runtime::ModelBackend> backend_;
  const int64_t pad_id_;
  const int instance_;
  const bool with_type_ids_;
  BatchObserver observer_;
  runtime::TokenBatch input_;
  runtime::Logits logits_;
};

}  // namespace tide::serving
