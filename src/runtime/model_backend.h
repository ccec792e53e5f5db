// tide::runtime::ModelBackend — the one narrow interface between serving and an inference engine.
//
// Contract:
//  - A backend instance owns one engine session. It is NOT thread-safe: one worker thread (one
//    instance of instance_group) calls Run at a time. Create several for several instances.
//  - Run takes a dense, padded token batch [batch, seq_len] and writes logits [batch, num_labels]
//    (num_labels = 1 for a reranker) into `out`, reusing its capacity. With
//    TokenBatch::token_states set and a model that has the output (signature().token_embeddings_name),
//    it also writes the per-token states [batch, seq_len, hidden] into out->token_states; otherwise
//    out->token_states is left empty (a batch that does not ask never fetches them). It never throws; engine
//    errors come back as absl::Status (INVALID_ARGUMENT for bad shapes, INTERNAL otherwise).
//  - RunAlone is Run for a batch that started with the model's other instances idle and nothing
//    queued (batching::Batch::alone): a backend may use their cores too (OrtBackend: a second
//    session with more intra-op threads). By default it is Run.
//  - terminator() (null by default: Run cannot be stopped) lets another thread stop this
//    backend's Run in progress (a shadow lane's batch when live rows arrive): see RunTerminator.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "domain/model_signature.h"

namespace tide::runtime {

// Row-major [batch, seq_len] int64 token tensors. token_type_ids may be empty when the model has
// no such input (DistilBERT, XLM-RoBERTa exports); attention_mask is always present.
struct TokenBatch {
  int64_t batch = 0;
  int64_t seq_len = 0;
  std::vector<int64_t> input_ids;
  std::vector<int64_t> attention_mask;
  std::vector<int64_t> token_type_ids;
  bool token_states = false;  // also fetch the per-token states (Logits::token_states)

  void Resize(int64_t b, int64_t s, bool with_type_ids) {
    batch = b;
    seq_len = s;
    input_ids.assign(b * s, 0);
    attention_mask.assign(b * s, 0);
    if (with_type_ids) token_type_ids.assign(b * s, 0); else token_type_ids.clear();
    token_states = false;
  }
};

struct Logits {
  int64_t batch = 0;
  int64_t num_labels = 0;
  std::vector<float> values;  // [batch, num_labels] row-major
  // [batch, seq_len, hidden] row-major when the batch asked and the model has them; else empty.
  int64_t hidden = 0;
  std::vector<float> token_states;
  // Tokens at the start of each row the backend did not compute: their keys and values came from
  // a shared prompt prefix (runtime/prompt_prefix.h); 0: the rows ran whole.
  int64_t prompt_prefix_tokens = 0;
  // Row `row`'s state at position 0 (its tokens follow, `hidden` floats each).
  const float* states_of(int64_t row, int64_t seq_len) const { return &token_states[row * seq_len * hidden]; }
  float at(int64_t row, int64_t label) const { return values[row * num_labels + label]; }
};

// Stops a backend's Run from another thread (ONNX Runtime: RunOptions::SetTerminate).
//  - Terminate() is thread-safe, lock-free and never blocks; it may be called at any time. The Run
//    in progress, and any Run started before the next Reset, then returns CANCELLED soon (ONNX
//    Runtime looks between kernels) without the engine logging an error.
//  - Reset() and terminated() belong to the thread that calls Run: Reset before a Run that should
//    not inherit an earlier Terminate; terminated() says whether Terminate came since the last Reset.
//  - Owned by its backend (valid while the backend lives).
class RunTerminator {
 public:
  virtual ~RunTerminator() = default;
  virtual void Terminate() noexcept = 0;
  virtual void Reset() noexcept = 0;
  virtual bool terminated() const noexcept = 0;
};

class ModelBackend {
 public:
  virtual ~ModelBackend() = default;
  virtual absl::Status Run(const TokenBatch& batch, Logits* out) = 0;
  virtual absl::Status RunAlone(const TokenBatch& batch, Logits* out) { return Run(batch, out); }
  virtual const ModelSignature& signature() const = 0;
  virtual RunTerminator* terminator() { return nullptr; }
};

}  // namespace tide::runtime
