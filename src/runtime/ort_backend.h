// tide::runtime::OrtBackend — runtime::ModelBackend on ONNX Runtime (CPU).
//
// Contract:
//  - Create loads one model into one Ort::Session (one instance of instance_group; create one
//    backend per instance). All backends share one process-wide Ort::Env, created on first use
//    and never destroyed (sessions may outlive static destruction order otherwise).
//  - With OrtOptions::shared_weights set, the session takes the model's weights (and their
//    pre-packed forms) from that object instead of holding its own copy (see shared_weights.h);
//    the backend keeps the model's shared entry alive until its session is gone. Such sessions
//    (with enable_cpu_mem_arena) also allocate activations from one CPU arena registered on the
//    process-wide Env ("session.use_env_allocators"), so an idle instance does not keep its own
//    arena sized for its largest batch.
//  - With OrtOptions::alone_intra_op_threads above intra_op_threads, RunAlone runs on a second
//    session of the same model with that many intra-op threads: a lone batch uses the cores of
//    the idle instances. Run uses the first. With OrtOptions::alone_session (MakeOrtOptions sets
//    one per model version) all instances share one such session: a batch runs alone only while
//    no other batch runs, and ONNX Runtime's Session::Run is thread-safe, so one is enough; the
//    first Create opens it, the last backend destroyed closes it. With shared_weights it uses the
//    same weights and pre-packed weights, so it costs its graph and kernels, not a weights copy.
//  - The model's signature is discovered at Create: inputs named input_ids and attention_mask
//    (required) and token_type_ids (optional), all int64 or all int32, rank 2 [batch, sequence];
//    output: the first float output of rank 2, [batch, num_labels] (1 for a reranker score);
//    a float output of rank 3 named token_embeddings ([batch, sequence, hidden], an embedder's
//    token states) is noted as signature().token_embeddings_name and fetched only for a batch
//    with TokenBatch::token_states (both outputs then come from one Run, allocated by ONNX Runtime).
//    A model that does not fit is rejected with FAILED_PRECONDITION naming the tensor. Inputs
//    named kPromptPrefixKeyInput / kPromptPrefixValueInput + n (domain/model_signature.h: float
//    [1, prefix, width], width static, each with its output kPromptPrefixKeyOutput / ...ValueOutput
//    + n) are the model's prompt prefix slots (signature().prompt_prefix).
//  - Prompt prefix (such a model only): Run feeds every slot an empty prefix [1, 0, width], unless
//    OrtOptions::prompt_prefix, or a shorter one of its chain, starts every row of the batch
//    (PromptPrefix::Used) and the batch does not ask for token states: then ONNX Runtime gets the
//    rows' tokens after that prefix
//    (copied into the backend's buffers) and the prefix's keys and values. ComputePromptPrefix
//    runs `ids` as one row with an empty prefix and returns its keys and values, which is how a
//    prefix is made (serving's loader, once per model version).
//  - Run is NOT thread-safe (one worker thread per backend) and blocks for the inference. It
//    feeds the caller's int64 buffers to ONNX Runtime without copying (int32 models: converted into
//    buffers owned by the backend and reused across calls), and writes the logits straight into
//    `out->values` when num_labels is static. A batch of inconsistent sizes (the caller's bug) ->
//    INVALID_ARGUMENT. Whatever ONNX Runtime throws in Run -> INTERNAL, ORT_INVALID_ARGUMENT
//    included (rows reach Run only after validation, so an engine rejection is a server-side
//    failure, never a client's 400; the message keeps the engine's code and text for the log),
//    and RESOURCE_EXHAUSTED when memory runs out. Run does not let ONNX Runtime log its errors
//    itself (run log severity FATAL): the caller logs them.
//    Create/ReadSignature keep ONNX Runtime's code. A Run stopped by terminator()->Terminate()
//    (RunOptions::SetTerminate on this backend's run options) -> CANCELLED. Never throws: Ort::Exception is caught here,
//    the only place tide calls ONNX Runtime's C++ API.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#include "absl/status/statusor.h"
#include "onnxruntime_cxx_api.h"
#include "runtime/model_backend.h"

namespace tide::runtime {

class SharedWeights;
struct SharedModelWeights;
struct PromptPrefix;
class AloneSessionSlot;

enum class GraphOptimization { kDisable, kBasic, kExtended, kAll };

struct OrtOptions {
  std::string model_path = {};     // the .onnx file
  std::string model_data = {};     // or the serialized model itself (used when model_path is empty)
  std::string model_label = {};    // what errors call a model_data model (e.g. the file it came from)
  int intra_op_threads = 0;        // 0: ONNX Runtime's default (one per physical core)
  int inter_op_threads = 0;        // 0: ONNX Runtime's default
  bool allow_spinning = false;     // spinning idle threads steal CPU from the other instances
  // Intra-op threads of RunAlone's session; 0 or <= intra_op_threads: no second session (RunAlone = Run).
  int alone_intra_op_threads = 0;
  std::shared_ptr<AloneSessionSlot> alone_session = nullptr;  // null: each backend opens its own wider session
  GraphOptimization graph_optimization_level = GraphOptimization::kAll;
  bool enable_cpu_mem_arena = true;
  // false: no pre-packed copy of the constant weights (ONNX Runtime's session.disable_prepacking).
  // For the load's short-lived sessions (the signature, the fusion probe): a pre-packed copy is a
  // third of a model's MatMul weights again, at the moment the load's memory peaks.
  bool prepack_weights = true;
  // With shared_weights and the arena: take activations from the process-wide arena (one lock for
  // every such session); false: this session's own arena (a shadow lane's SCHED_IDLE session must
  // share no lock with the live ones).
  bool share_env_arena = true;
  std::shared_ptr<SharedWeights> shared_weights = nullptr;  // null: this session holds its own weights
  // A model with prompt prefix inputs (ModelSignature::prompt_prefix): the prefix every batch whose
  // rows all start with its tokens runs after (prompt_prefix.h); null: every batch runs whole
  // (the inputs get an empty prefix). Ignored for a model without such inputs.
  std::shared_ptr<const PromptPrefix> prompt_prefix = nullptr;
};

// The model version's one wider session (OrtOptions::alone_session), held weakly: it lives as long
// as a backend uses it. Thread-safe.
class AloneSessionSlot {
 public:
  // The live session, else the one `open` returns (called under the slot's lock, so instances
  // created in parallel open it once).
  absl::StatusOr<std::shared_ptr<Ort::Session>> Get(
      const std::function<absl::StatusOr<std::shared_ptr<Ort::Session>>()>& open);

 private:
  absl::Mutex mu_;
  std::weak_ptr<Ort::Session> session_ ABSL_GUARDED_BY(mu_);
};

class OrtBackend : public ModelBackend {
 public:
  static absl::StatusOr<std::unique_ptr<OrtBackend>> Create(const OrtOptions& options);

  // The signature of a model file without keeping a session: graph optimisation and pre-packing
  // off, and (with libonnx-dev) the session opened from the graph alone
  // (SharedWeights::ShapesOnly): the weights are never read, so this is fast and holds about the
  // graph's size, whatever the model's. Errors name the file.
  static absl::StatusOr<ModelSignature> ReadSignature(const std::string& model_path);

  absl::Status Run(const TokenBatch& batch, Logits* out) override;
  absl::Status RunAlone(const TokenBatch& batch, Logits* out) override;
  // The prompt prefix of `ids` for this model (see the contract): FAILED_PRECONDITION for a model
  // without prefix inputs or empty ids; engine errors as Run's. Not thread-safe (as Run).
  absl::StatusOr<std::shared_ptr<PromptPrefix>> ComputePromptPrefix(const std::vector<int64_t>& ids);
  // Runs later batches after `prefix` (null: whole), as OrtOptions::prompt_prefix would have;
  // INVALID_ARGUMENT when it was not computed for this model's slots. Not thread-safe (as Run).
  absl::Status UsePromptPrefix(std::shared_ptr<const PromptPrefix> prefix);
  // Batches this backend ran after its prompt prefix (the same thread as Run reads it).
  int64_t prefixed_runs() const { return prefixed_runs_; }
  bool has_alone_session() const { return alone_session_ != nullptr; }
  // The shared weights this backend's sessions read (null: the session holds its own).
  const SharedModelWeights* shared_weights() const { return weights_.get(); }
  const ModelSignature& signature() const override { return signature_; }
  RunTerminator* terminator() override { return &terminator_; }

  ~OrtBackend() override;

 private:
  OrtBackend(std::shared_ptr<SharedModelWeights> weights, Ort::Session session, ModelSignature signature,
             std::shared_ptr<const PromptPrefix> prompt_prefix);
  absl::Status RunOn(Ort::Session& session, const TokenBatch& batch, Logits* out);
  absl::Status CheckBatch(const TokenBatch& batch) const;
  // inputs_ for `batch` (checked) and the prompt prefix slots: `prefix`'s, or empty when null.
  absl::Status BindInputs(const TokenBatch& batch, const PromptPrefix* prefix);
  // The rows of `batch` after their first p tokens, into *out (buffers reused).
  static void CutPrefix(const TokenBatch& batch, int64_t p, TokenBatch* out);
  absl::Status RunImpl(Ort::Session& session, const TokenBatch& batch, Logits* out);
  // RunImpl's run for a batch that asks for the token states (inputs_ already bound).
  absl::Status RunWithStates(Ort::Session& session, int64_t b, int64_t s, Logits* out);

  std::shared_ptr<SharedModelWeights> weights_;  // declared before the sessions: outlives them
  Ort::Session session_;
  std::shared_ptr<Ort::Session> alone_session_;  // null: RunAlone runs on session_; may be shared
  ModelSignature signature_;
  Ort::MemoryInfo memory_info_;
  Ort::RunOptions run_options_;
  // Sets and clears run_options_'s terminate flag (ONNX Runtime reads it atomically), and keeps
  // its own copy to tell a terminated Run from a failed one.
  class Terminator : public RunTerminator {
   public:
    explicit Terminator(OrtRunOptions* options) : options_(options) {}
    void Terminate() noexcept override;
    void Reset() noexcept override;
    bool terminated() const noexcept override { return terminated_.load(std::memory_order_acquire); }

   private:
    OrtRunOptions* const options_;
    std::atomic<bool> terminated_{false};
  };
  Terminator terminator_{run_options_};
  std::vector<const char*> input_names_;   // point into signature_ strings
  const char* output_name_ = nullptr;
  // Per-instance buffers, reused across Run calls (no allocation once warmed up).
  std::vector<int32_t> ids32_, mask32_, types32_;
  std::vector<int64_t> zero_types_;        // token_type_ids when the model wants them and the batch has none
  std::vector<Ort::Value> inputs_;
  std::shared_ptr<const PromptPrefix> prompt_prefix_;  // null: batches run whole
  TokenBatch after_prefix_;                 // a batch's rows after the prompt prefix (reused)
  int64_t prefixed_runs_ = 0;
};

}  // namespace tide::runtime
