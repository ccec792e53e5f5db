#include "serving/inference_request.h"

#include <algorithm>
#include <utility>

namespace tide::serving {

InferenceRequest::InferenceRequest(size_t rows, int64_t num_labels, InferenceCallback done)
    : remaining_(rows), done_(std::move(done)) {
  result_.rows = static_cast<int64_t>(rows);
  result_.num_labels = num_labels;
  result_.logits.assign(rows * static_cast<size_t>(num_labels), 0.0f);
}

void InferenceRequest::CompleteRow(size_t row, const float* logits, size_t tokens,
                                   Clock::duration queue, Clock::duration inference,
                                   const batching::TraceLink* batch, const float* states, int64_t hidden) {
  if (finished()) return;
  {
    absl::MutexLock lock(&mu_);
    std::copy(logits, logits + result_.num_labels, result_.logits.begin() + row * result_.num_labels);
    if (states != nullptr) {
      result_.hidden = hidden;
      result_.token_states.resize(static_cast<size_t>(result_.rows));
      result_.token_states[row].assign(states, states + tokens * static_cast<size_t>(hidden));
    }
    result_.real_tokens += tokens;
    result_.timings.queue = std::max(result_.timings.queue, queue);
    result_.timings.inference = std::max(result_.timings.inference, inference);
    if (batch != nullptr && std::find(result_.timings.batches.begin(), result_.timings.batches.end(), *batch) ==
                                result_.timings.batches.end()) {
      result_.timings.batches.push_back(*batch);
    }
  }
  if (remaining_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (finished_.exchange(true, std::memory_order_acq_rel)) return;  // failed meanwhile
  InferenceResult result;
  {
    absl::MutexLock lock(&mu_);
    result = std::move(result_);
  }
  std::move(done_)(std::move(result));
}

void InferenceRequest::Fail(absl::Status status) {
  if (finished_.exchange(true, std::memory_order_acq_rel)) return;
  std::move(done_)(std::move(status));
}

}  // namespace tide::serving
