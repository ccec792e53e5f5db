// tide::serving::InferenceRequest and RowTask — one client request split into row tasks for the
// batcher, and the aggregation of their results back into one answer.
//
// Contract:
//  - A request of N rows (N (query, document) pairs, or N rows of a KServe tensor) becomes N
//    RowTasks that may travel in different batches. The request's callback runs exactly once:
//    with every row's logits when all rows succeed, or with the first error as soon as one row
//    fails (the rows still in flight finish into the void). The callback runs on whichever thread
//    completed the last row (an instance worker) or failed the first one; it must not block long.
//  - Thread-safe: rows complete concurrently from several instance threads.
//  - Timings: queue time and inference time of a request are those of its slowest row.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "batching/batch.h"
#include "batching/batch_trace.h"
#include "common/cancellation_flag.h"
#include "common/clock.h"
#include "tokenizer/tokenizer.h"

namespace tide::serving {

using Clock = ::tide::Clock;  // serving::Clock, used by the routes

// Where the time of one request went (TEI's x-*-time headers, Prometheus stage histograms).
struct StageTimings {
  Clock::duration tokenize{};     // text -> ids, on the request thread
  Clock::duration queue{};        // submit -> batch formed (slowest row)
  Clock::duration inference{};    // batch run (slowest row's batch)
  Clock::duration postprocess{};  // activation, sorting, JSON rendering
  Clock::duration total{};        // request received -> response ready
  // The spans of the batches the request's rows ran in (traced requests only; empty otherwise).
  std::vector<batching::TraceLink> batches;
};

struct InferenceResult {
  int64_t rows = 0;
  int64_t num_labels = 0;
  std::vector<float> logits;  // [rows, num_labels], raw model outputs
  size_t real_tokens = 0;     // tokens fed to the model over all rows, padding excluded
  // Rows submitted with Admission::token_states: each row's [tokens, hidden] states (its real
  // tokens only, padding dropped). Empty otherwise.
  int64_t hidden = 0;
  std::vector<std::vector<float>> token_states;
  StageTimings timings;       // queue and inference filled in; the caller adds the rest
  float at(int64_t row, int64_t label) const { return logits[row * num_labels + label]; }
};

using InferenceCallback = absl::AnyInvocable<void(absl::StatusOr<InferenceResult>) &&>;

class InferenceRequest {
 public:
  InferenceRequest(size_t rows, int64_t num_labels, InferenceCallback done);

  // Row `row` finished with `num_labels` logits.
  // `batch`: the span of the batch it ran in (null: not traced).
  // `states` (null: none): the row's `tokens` x `hidden` token states.
  void CompleteRow(size_t row, const float* logits, size_t tokens, Clock::duration queue,
                   Clock::duration inference, const batching::TraceLink* batch = nullptr,
                   const float* states = nullptr, int64_t hidden = 0);
  // Fails the whole request (first failure wins; later calls are ignored).
  void Fail(absl::Status status);
  bool finished() const { return finished_.load(std::memory_order_acquire); }

 private:
  std::atomic<size_t> remaining_;
  std::atomic<bool> finished_{false};
  absl::Mutex mu_;
  InferenceResult result_ ABSL_GUARDED_BY(mu_);
  InferenceCallback done_;
};

// The batcher's unit of work: one row (a tokenized pair) of one request.
class RowTask {
 public:
  struct Admission {
    int priority = 0;                                  // 1 = highest; 0 = default level
    Clock::time_point deadline = Clock::time_point::max();
    Clock::duration queue_timeout{};                   // the request's own; zero = none
    std::shared_ptr<CancellationFlag> client_gone;  // may be null
    // The request's server span, when it is traced and sampled (batching/batch_trace.h).
    std::optional<batching::TraceLink> trace;
    // The row also wants the model's per-token states (TEI's /embed_all): its batch fetches them.
    bool token_states = false;
  };

  RowTask(std::shared_ptr<InferenceRequest> request, size_t row, tokenizer::Encoding encoding,
          const Admission& admission)
      : request_(std::move(request)), row_(row), encoding_(std::move(encoding)), admission_(admission) {}

  // batching::BatchTask
  size_t seq_len() const { return encoding_.ids.size(); }
  int priority() const { return admission_.priority; }
  Clock::time_point deadline() const { return admission_.deadline; }
  Clock::duration queue_timeout() const { return admission_.queue_timeout; }
  // batching::HasRequestKey: rows of one request share it (the pool isolates a failing request).
  uintptr_t request_key() const { return reinterpret_cast<uintptr_t>(request_.get()); }
  bool cancelled() const {
    return request_->finished() || (admission_.client_gone && admission_.client_gone->IsCancelled());
  }
  void OnDropped(batching::DropReason reason, absl::Status status) { request_->Fail(std::move(status)); }

  const tokenizer::Encoding& encoding() const { return encoding_; }
  const std::optional<batching::TraceLink>& trace() const { return admission_.trace; }
  bool wants_token_states() const { return admission_.token_states; }
  // `states`: the row's token states (its encoding's length x `hidden`), for a row that wants them.
  void Complete(const float* logits, Clock::duration queue, Clock::duration inference,
                const batching::TraceLink* batch = nullptr, const float* states = nullptr, int64_t hidden = 0) {
    request_->CompleteRow(row_, logits, encoding_.ids.size(), queue, inference, batch, states, hidden);
  }
  void Fail(absl::Status status) { request_->Fail(std::move(status)); }

 private:
  std::shared_ptr<InferenceRequest> request_;
  size_t row_;
  tokenizer::Encoding encoding_;
  Admission admission_;
};

}  // namespace tide::serving
