// tide::serving::ServedModel — one version of one model, ready to serve: the scheduler around an
// immutable LoadedModel (serving/model_loader.h): dynamic batcher, pool of instances (one backend
// each, from an injected BackendFactory), deadline timer, per-request queue admission
// (max_queue_size), circuit breaker, and the Triton statistics counters.
//
// Contract:
//  - Create(loaded, backends, options) opens instance_group.count backends, warms every instance up
//    (serving/warmup_shapes.h: config.model_warmup, else every bucket x batch shape the batcher
//    can form) and starts the workers; the model is ready when Create returns. Create(model,
//    version, options) is LoadModel + OrtBackendFactory.
//  - Thread-safe: Submit may be called from any thread. It never blocks: rows are queued and the
//    callback runs later on an instance thread, exactly once. A queue over capacity answers
//    UNAVAILABLE at once (the edge maps it to 503 + Retry-After). Once rows are queued, Submit
//    signals live_preemption() (lock-free): a shadow lane's running batch stops for them.
//  - Shutdown stops taking work and lets queued work finish within the grace period (or until the
//    given deadline), then drops what is still queued (UNAVAILABLE) and waits for running batches.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/model_statistics.h"
#include "batching/batcher.h"
#include "batching/instance_pool.h"
#include "config/model_repository.h"
#include "config/tide_parameters.h"
#include "guard/circuit_breaker.h"
#include "runtime/model_backend.h"
#include "serving/deadline_timer.h"
#include "serving/inference_request.h"
#include "serving/live_preemption.h"
#include "serving/model_loader.h"
#include "serving/model_runner.h"
#include "serving/serving_metrics.h"
#include "serving/token_input_limits.h"
#include "tokenizer/tokenizer.h"

namespace tide::serving {

// Padded sequence lengths (the model's max_sequence_length is always added as the last one).
// Steps of 32 up to 256 and 64 beyond: ONNX Runtime on CPU compiles nothing per shape, so more
// buckets cost little, while a coarse list pads a 223-token pair to 256 — measured 1.28x the
// time of the unpadded batch for 16 x 223 tokens on MiniLM-L6 (bench/server_overhead).
inline constexpr size_t kDefaultSequenceBuckets[] = {16,  32,  64,  96,  128, 160, 192,
                                                     224, 256, 320, 384, 448, 512};

// The default buckets for a model of this max_sequence_length: kDefaultSequenceBuckets below it,
// then, past 512, eight per doubling (steps of 64 to 1024, 128 to 2048, ...), so a long row is
// padded by at most 1/8 of its length; max_sequence_length last. Without the steps past 512 a
// decoder of 8192 or 32768 positions padded a 530-token pair to its full length (measured on
// qwen3-reranker-0.6b: padding ratio 5.5, 4-document requests ~6x slower under 2 clients).
std::vector<size_t> DefaultSequenceBuckets(size_t max_sequence_length);

// The work (FLOPs of the weight products) past which a batch stops growing on CPU: 68 GFLOP is
// about a third of a second of one core at its measured MatMul ceiling (~200 GFLOP/s,
// bench/roofline), so per-run costs (~1 ms) are ~0.3% of it, and one row of that much work already
// runs its products at 85-90% of that ceiling (a 320-token bge-reranker-base row: 325 ms for ~55
// GFLOP, build/bench/op_profile); a bigger batch only adds padding and ties more requests'
// completion together. MiniLM-L6 (21 MFLOP per token: 3202 tokens) would stay under its
// 1024-token budget (the token ceiling below binds there); bge-reranker-base (170 MFLOP per token:
// 400 tokens) runs a SciFact-length pair alone, padded to a multiple of 16 instead of to its
// bucket; a decoder reranker also runs one row per batch (qwen3-reranker-0.6b, 881 MFLOP per
// token: 77 tokens). Measured (bench/batching/param_ab.sh,
// quiet): qwen3-reranker-0.6b, 2 clients x 4 SciFact-length documents, 0.57 pairs/s with batches of
// up to 8 rows (CPU 75%: one instance idled while its requests' other rows ran in the other's
// batch), 0.83 with one row per batch (docs/llm-rerankers.md); bge-reranker-base at 400 tokens vs
// the former 1169 (200 GFLOP): 4 clients x 1 document +8% / +18%, 2 clients x 16 documents +7%
// (padding ratio 1.11 -> 1.02 and 1.09 -> 1.02; bench/results/padding-1doc-bge-20261203.txt).
inline constexpr double kBatchSaturationFlops = 68e9;

// ... and the rows past which it stops growing whatever the width: a 400-token batch already fills
// the products' row blocks on this CPU class, so a narrow model gains nothing from more rows but
// padding. Measured on MiniLM-L6 (21 MFLOP per token, 3202 tokens by the rule above), 400 vs 3202
// (bench/batching/param_ab.sh, alternating rounds, bench/results/saturation-minilm-20261203.txt):
// 8 clients x 16 SciFact-length documents +4.6% / +3.6% (padding 1.07 -> 1.02), INT8 +5.8% / +12.9%,
// 50 clients x 1 document +3.3% / +3.8% (1.08 -> 1.02), 8 clients x 16 documents of 32 tokens
// +0.2% / +1.3% (short rows still batch, up to 400 tokens).
inline constexpr size_t kBatchSaturationMaxTokens = 400;

// The batcher's saturation_tokens for a model whose tokens each cost weight_flops_per_token
// (onnx_graph::WeightFlopsPerToken): kBatchSaturationFlops / that, between 16 and
// kBatchSaturationMaxTokens; 0 (no cap) when unknown (0).
size_t DefaultBatchSaturationTokens(uint64_t weight_flops_per_token);

struct ServedModelOptions {
  // Most padded tokens in one batch (TEI's max_batch_tokens); bounds per-batch latency and memory.
  // 1024 (a model's max sequence length is always allowed): on CPU a batch of ~1000 tokens already
  // fills ONNX Runtime's GEMMs, and bigger batches leave the caches (a 4096-token batch's FFN
  // activations alone are ~25 MB). Measured on MiniLM-L6, 50 clients of 1-document requests:
  // 14.2 / 12.9 / 11.8 pairs/s at 1024 / 2048 / 4096 (bench/results/max_batch_tokens.txt); the raw
  // engine was also fastest at 4-row batches (bench/batching).
  size_t max_batch_tokens = 1024;
  std::chrono::milliseconds shutdown_grace{10000};
  // Nice steps added to the inference threads (instance workers and ONNX Runtime's intra-op pools),
  // so that the HTTP threads preempt inference and answer 429s and health probes at once on a
  // saturated CPU. 0 leaves them at the process's priority.
  int inference_nice = 0;
  ServingMetrics* metrics = nullptr;  // not owned; may be null
  // The span of each batch a sampled request rode in (batching/batch_trace.h); empty: none.
  batching::BatchTraceHook batch_trace;
};

class ServedModel {
 public:
  // The scheduler over an already loaded model; `backends` opens each instance's backend.
  static absl::StatusOr<std::unique_ptr<ServedModel>> Create(std::shared_ptr<const LoadedModel> loaded,
                                                             BackendFactory backends,
                                                             const ServedModelOptions& options);
  ~ServedModel();

  const std::string& name() const { return loaded_->name; }
  int64_t version() const { return loaded_->version; }
  const config::ModelConfig& config() const { return loaded_->config; }
  const config::TideParameters& parameters() const { return loaded_->parameters; }
  const tokenizer::Tokenizer& tokenizer() const { return *loaded_->tokenizer; }
  const ModelSignature& signature() const { return loaded_->signature; }
  int64_t num_labels() const { return loaded_->signature.num_labels; }
  // Label names in id order: the model's (HuggingFace id2label) when it has as many as `count`,
  // else HF's defaults LABEL_0..LABEL_{count-1}.
  std::vector<std::string> LabelNames(int64_t count) const;
  size_t max_sequence_length() const { return loaded_->max_sequence_length; }
  // Most padded tokens in one batch (the batcher's max_batch_tokens, TEI's /info field).
  size_t max_batch_tokens() const { return max_batch_tokens_; }
  // Most padded tokens the batcher lets one batch grow to: max_batch_tokens, or the batch
  // saturation (batch_saturation_tokens) when smaller; a single row past it runs alone.
  size_t batch_token_cap() const { return batch_token_cap_; }
  // Most rows in one batch (config max_batch_size, at least 1).
  size_t max_batch_size() const { return max_batch_size_; }
  // Rows waiting in this version's queue, read without any lock (a snapshot): what a thread that
  // must never wait for a live thread's lock (serving/shadow_lane.h) asks.
  size_t QueuedRows() const { return batcher_->QueuedTasks(); }
  // True when no live row has waited in or run on this version for at least `quiet`, read
  // without any lock (Batcher::IdleFor): the shadow lane's hold-off.
  bool LiveIdleFor(Clock::duration quiet) const { return batcher_->IdleFor(quiet); }
  // Signalled by every Submit once its rows are queued: stops the running batch of the shadow
  // lane attached to it (serving/live_preemption.h, shadow_lane.h).
  LivePreemption& live_preemption() const { return *live_preemption_; }
  // Opens one more backend of this version (the factory its instances came from), e.g. for a
  // shadow lane (instance kShadowLaneInstance). Thread-safe as the factory is.
  absl::StatusOr<std::unique_ptr<runtime::ModelBackend>> OpenBackend(int instance) const {
    return backends_(*loaded_, instance);
  }
  // What KServe token tensors may carry (serving/token_input_limits.h), decided at load.
  const TokenInputLimits& token_input_limits() const { return loaded_->token_input_limits; }
  // The immutable loaded model this version schedules.
  const std::shared_ptr<const LoadedModel>& loaded() const { return loaded_; }
  bool ready() const { return !shut_down_.load(); }
  // Unique per ServedModel object in this process (a reloaded version gets a new one): what caches
  // of this version's results are keyed by.
  uint64_t generation() const { return generation_; }

  // Circuit breaker admission: false while the breaker is open — answer with the
  // fallback instead of calling Submit. Every true must be followed by exactly one Submit, whose
  // outcome the breaker records. Always true when no breaker trigger is configured.
  bool AdmitToModel() {
    return breaker_ == nullptr || breaker_->Admit() == guard::CircuitBreaker::Decision::kModel;
  }
  const guard::CircuitBreaker* breaker() const { return breaker_.get(); }

  // Queues one task per row; `done` runs exactly once with every row's logits or the first error.
  // A queue that cannot take all rows answers UNAVAILABLE through `done` at once, on this thread.
  void Submit(std::vector<tokenizer::Encoding>& rows, const RowTask::Admission& admission,
              InferenceCallback done);

  struct Stats {
    batching::BatcherStats batcher;
    std::vector<batching::InstanceStats> instances;
  };
  Stats GetStats() const;
  // Triton statistics extension counters of this version, as a value (api renders it).
  api::ModelStatistics Statistics() const;

  void Shutdown();
  // Shutdown with `deadline` in place of now + shutdown_grace.
  void Shutdown(std::chrono::steady_clock::time_point deadline);

 private:
  ServedModel() = default;

  std::shared_ptr<const LoadedModel> loaded_;  // never null
  uint64_t generation_ = 0;
  size_t max_queue_size_ = 0;
  size_t max_batch_tokens_ = 0;
  size_t batch_token_cap_ = 0;
  size_t max_batch_size_ = 1;
  BackendFactory backends_;
  std::chrono::milliseconds shutdown_grace_{10000};
  ServingMetrics* metrics_ = nullptr;
  std::unique_ptr<guard::CircuitBreaker> breaker_;  // null: no breaker trigger configured
  std::unique_ptr<DeadlineTimer> deadlines_ = std::make_unique<DeadlineTimer>();
  std::unique_ptr<LivePreemption> live_preemption_ = std::make_unique<LivePreemption>();
  std::unique_ptr<batching::Batcher<RowTask>> batcher_;
  std::unique_ptr<batching::InstancePool<RowTask>> pool_;
  std::atomic<bool> shut_down_{false};

  // Triton statistics extension counters (durations in ns). Requests count as success or fail when
  // answered; a request that ran counts once in queue and compute (request_count) with its slowest
  // row's times; execution_count, compute_infer_ns and batch_stats count executed batches.
  struct StatisticsCounters {
    std::atomic<uint64_t> success_count{0}, success_ns{0}, fail_count{0}, fail_ns{0};
    std::atomic<uint64_t> request_count{0}, queue_ns{0}, request_compute_ns{0};
    std::atomic<uint64_t> inference_count{0}, execution_count{0};
    std::atomic<int64_t> last_inference_ms{0};
    mutable absl::Mutex mu;
    std::map<size_t, std::pair<uint64_t, uint64_t>> batch_stats ABSL_GUARDED_BY(mu);  // size -> (count, ns)
  };
  std::unique_ptr<StatisticsCounters> statistics_ = std::make_unique<StatisticsCounters>();
};

}  // namespace tide::serving
