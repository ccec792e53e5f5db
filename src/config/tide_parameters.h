// tide::config::TideParameters — tide's own model settings, read from config.pbtxt `parameters`
// (the place Triton backends keep backend-specific settings):
//
//   parameters { key: "task"  value: { string_value: "rerank" } }
//
// Contract:
//  - FromConfig reads every entry of `parameters`; a key tide does not know is an error that
//    names it (a typo must not silently fall back to a default), as is a value of the wrong type
//    or out of range. Errors are INVALID_ARGUMENT "<file>: parameters[\"<key>\"]: ...".
//  - Pure functions; thread-safe.
//
// Keys (string values; defaults in the struct below; the accepted list is the table in
// tide_parameters.cc, which Keys() returns — tests check this comment and docs/configuration.md):
//   task                      "rerank" | "classify" | "embed"
//   tokenizer                 file name relative to the model directory
//   max_sequence_length       integer >= 2; unset: the tokenizer's truncation, else 512
//   truncation_direction      "right" | "left"
//   score_activation          "sigmoid" | "none" | "softmax"
//   intra_op_threads          integer >= 0 (0: ONNX Runtime's default); alias intra_op_thread_count
//   inter_op_threads          integer >= 0 (0: ONNX Runtime's default); alias inter_op_thread_count
//   allow_spinning            "true" | "false"
//   graph_optimization_level  "all" | "extended" | "basic" | "disable"
//   enable_cpu_mem_arena      "true" | "false"
//   thread_layout             "adaptive" | "fixed": adaptive gives a batch that starts with the model's
//                             other instances idle and nothing queued the threads of all instances
//                             (count x intra_op_threads, a second session per instance); fixed:
//                             every batch runs on its instance's intra_op_threads
//   share_weights             "true" | "false": the instances of the model share one copy of its
//                             weights and pre-packed weights (runtime::SharedWeights)
//   weights_file              "true" | "false": with share_weights, that copy lives in an unnamed
//                             file in the temp directory whose pages leave the process once read
//                             (runtime::WeightFile); false: in anonymous memory
//   max_batch_tokens          integer >= 16: most padded tokens in one batch (TEI's max_batch_tokens)
//   batch_saturation_tokens   integer >= 0: padded tokens past which a batch stops growing (0: no
//                             such cap, only max_batch_tokens); unset: derived from the model's
//                             weights, at most 400 (serving::DefaultBatchSaturationTokens)
//   sequence_buckets          "16,32,64,...": padded sequence lengths, strictly increasing
//   allowed_batch_sizes       "1,2,4,8,...": batch sizes the runtime sees (a batch is padded up to
//                             the next one), strictly increasing; unset: every size
//   breaker_p99_ms            integer >= 0: open the circuit breaker when the rolling P99 exceeds it
//   breaker_error_rate        0..1: open when errors / requests in the window reach it
//   breaker_queue_fullness    0..1: open when the queue is this full (of max_queue_size)
//   breaker_window_s          integer >= 1: the rolling window of the P99 and error-rate triggers
//   breaker_min_samples       integer >= 1: requests the window must hold before the P99 trigger acts
//   breaker_open_s            integer >= 1: how long the breaker stays open before probing
//   breaker_probes            integer >= 1: requests let through while half-open
//   (the breaker exists only when one of the three triggers is set)
//   breaker_default_result    task "classify" only: "[l0, l1, ...]" (brackets optional), the logits
//                             answered for every input while the breaker is open, one finite
//                             number per output label (checked against the model at load); unset:
//                             503 + Retry-After while open. Needs a breaker trigger.
//   max_padding_ratio         0 | number >= 1: with length grouping, a row joins a batch only while the
//                             padded length stays within this factor of the batch's shortest bucket
//   batch_grouping            "length" | "fifo": how batches gather queued requests (length-sorted
//                             buckets, or strictly in arrival order; "fifo" exists for comparison)
//   batch_padding             "bucket" | "longest": a batch's rows are padded to the bucket of its
//                             longest row, or to that row's length rounded up to 16 (at most the
//                             bucket; BatcherOptions::pad_to_longest_row)
//   graph_fusion              "auto" | "off": fuse attention and skip-layernorm into ONNX Runtime
//                             contrib operators at load (src/optimize); auto keeps the original model
//                             when nothing matches or a probe batch disagrees
//   attention_kernel          "tide" | "onnxruntime": with graph_fusion auto, fused attention runs on
//                             tide's own kernel over each row's real keys (runtime/padded_attention.h;
//                             needs AVX-512, else ONNX Runtime's) or on ONNX Runtime's
//                             MultiHeadAttention with the padding mask as an extra key column; a
//                             decoder's GroupQueryAttention on tide's causal kernel (the masked half
//                             skipped) or ONNX Runtime's
//   attention_precision       "auto" | "fp32" | "bf16": what tide's attention kernel multiplies in:
//                             FP32 throughout, or q.k and p.v on BF16 roundings (AVX512_BF16,
//                             FP32 sums; else FP32); auto: bf16 for an INT8 encoder, fp32
//                             otherwise (a decoder's causal attention: fp32 unless bf16)
//   elementwise_kernel        "tide" | "onnxruntime": with graph_fusion auto, the feed-forward
//                             bias + GELU and the layer norms run on tide's own AVX-512 kernels
//                             (runtime/bias_gelu.h, runtime/layer_norm.h; needs AVX-512, else ONNX
//                             Runtime's) or on ONNX Runtime's Add + Gelu and (Skip)LayerNormalization
//   prune_last_layer          "true" | "false": with attention on tide's kernel, an encoder whose
//                             head reads the first token (Gather(hidden, 0, axis 1)) computes its
//                             last layer for that token alone (optimize/pooled_token.h; the probe
//                             check covers it); false: every position of every layer
//   shared_prompt_prefix      "true" | "false": with attention on tide's kernel, a decoder
//                             reranker with a prompt_template computes the keys and values of
//                             the prompt's first tokens every pair shares once at load, and each
//                             batch whose rows all start with them runs their tokens after them
//                             alone (optimize/prompt_prefix.h, runtime/prompt_prefix.h; checked
//                             at load against the whole prompts); false: every prompt whole
//   long_documents            "truncate" | "chunk_max" | "chunk_mean": a document longer than what
//                             fits beside the query is cut (truncate) or scored as overlapping
//                             windows, the best (chunk_max) or the mean (chunk_mean) of their scores
//                             (serving/long_documents.h); a request's long_documents overrides it
//   chunk_tokens              integer >= 0: document tokens per window (0: as many as fit)
//   chunk_stride              integer >= 0: tokens a window advances over the previous one (0: half
//                             a window)
//   max_chunks_per_document   integer >= 1: most windows one document may make (422 beyond)
//   rollout                   a JSON object, the body of PUT /v2/models/{m}/rollout (serving/rollout_json.h):
//                             a gray release the server starts when a version declaring it loads
//                             (poll mode: a repository change starts it); checked fully when applied
//   prompt_template           a decoder-only reranker's prompt (domain/prompt_template.h): text with
//                             the slots {query} and {document} (required) and {instruction}
//                             (optional), each at most once, "{{" / "}}" for literal braces;
//                             special tokens written as text. Set: every (query, document) pair is
//                             encoded as this prompt (tokenizer/prompt_encoder.h), not as a BERT pair
//   default_instruction       the {instruction} of a request that gives none; needs a prompt_template
//                             with an {instruction} slot
//   token_type_vocab_size     integer >= 1: token_type_ids a KServe token tensor may carry are
//                             0..N-1; unset: from the model graph's token-type embedding, else the
//                             ids the tokenizer produces (serving/token_input_limits.h)
//   pooling                   task "embed" only: "cls" | "mean" | "last_token", how the graph pools
//                             its token vectors (the export pools in the graph; reported by /info)
//   normalize                 task "embed" only: "true" | "false": answers are L2-normalized unless
//                             the request says otherwise (default true)
//   matryoshka_dimensions     task "embed" only: "64,128,256": the dimensions a request's
//                             `dimensions` may cut a vector to (besides the full one); unset: any
//                             1..the model's dimension
//   prompts                   task "embed" only: a JSON object {"name": "prefix", ...}: the text put
//                             before an input whose request names the prompt (TEI prompt_name, Cohere
//                             input_type: "query" for search_query, "document" or "passage" for
//                             search_document)
//   default_prompt_name       task "embed" only: the prompt of a request that names none; one of
//                             `prompts`
// (The two aliases are the names Triton's ONNX Runtime backend uses, so its configs load.)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "domain/long_documents_mode.h"
#include "domain/prompt_template.h"
#include "domain/task.h"
#include "domain/truncation_direction.h"
#include "model_config.pb.h"

namespace tide::config {

using ::tide::Task;  // domain/task.h
enum class ScoreActivation { kSigmoid, kNone, kSoftmax };
enum class GraphOptimizationLevel { kDisable, kBasic, kExtended, kAll };
enum class BatchGrouping { kLength, kFifo };
enum class BatchPadding { kBucket, kLongest };
enum class GraphFusion { kAuto, kOff };
enum class KernelChoice { kTide, kOnnxRuntime };
// What tide's attention kernel multiplies in (runtime::AttentionPrecision); auto: BF16 for a
// dynamically quantized (INT8) model, FP32 for any other.
enum class AttentionPrecision { kAuto, kFp32, kBf16 };
enum class ThreadLayout { kAdaptive, kFixed };
// How an embedding model's graph pools its token vectors (sentence-transformers' modes).
enum class Pooling { kCls, kMean, kLastToken };

struct TideParameters {
  Task task = Task::kRerank;                        // rerank: one score per pair; classify: labels
  std::string tokenizer = "tokenizer.json";         // relative to the model directory
  std::optional<int64_t> max_sequence_length;       // unset: see EffectiveMaxSequenceLength
  tokenizer::TruncationDirection truncation_direction = tokenizer::TruncationDirection::kRight;
  ScoreActivation score_activation = ScoreActivation::kSigmoid;
  int intra_op_threads = 0;                         // 0: ONNX Runtime default
  int inter_op_threads = 0;                         // 0: ONNX Runtime default
  bool allow_spinning = false;                      // spinning burns CPU that other instances need
  // adaptive: a lone batch (nothing else running or queued) runs with every instance's threads.
  ThreadLayout thread_layout = ThreadLayout::kAdaptive;
  GraphOptimizationLevel graph_optimization_level = GraphOptimizationLevel::kAll;
  bool enable_cpu_mem_arena = true;
  bool share_weights = true;                        // false: each instance holds its own copy
  bool weights_file = true;                         // false: the shared copy in anonymous memory
  std::optional<int64_t> max_batch_tokens;          // unset: the server's --max-batch-tokens
  std::optional<int64_t> batch_saturation_tokens;   // unset: from the model's weights
  std::vector<int64_t> sequence_buckets;            // empty: the server's default buckets
  std::vector<int64_t> allowed_batch_sizes;         // empty: every size 1..max_batch_size
  std::optional<double> max_padding_ratio;          // unset: the batcher's default (1.5)
  // Circuit breaker (see src/guard/circuit_breaker.h); all triggers off by default.
  int64_t breaker_p99_ms = 0;
  double breaker_error_rate = 0.0;
  double breaker_queue_fullness = 0.0;
  int64_t breaker_window_s = 10;
  int64_t breaker_open_s = 5;
  int64_t breaker_probes = 3;
  // The P99 trigger waits for this many requests in the window; a model answering a few heavy
  // requests per second needs a longer window or fewer samples for the trigger to ever fire.
  int64_t breaker_min_samples = 100;
  // Classifiers: the logits row answered per input while the breaker is open; empty: 503.
  std::vector<float> breaker_default_result;
  bool breaker_enabled() const {
    return breaker_p99_ms > 0 || breaker_error_rate > 0 || breaker_queue_fullness > 0;
  }
  BatchGrouping batch_grouping = BatchGrouping::kLength;  // BatcherOptions::group_by_length
  BatchPadding batch_padding = BatchPadding::kBucket;     // BatcherOptions::pad_to_longest_row
  GraphFusion graph_fusion = GraphFusion::kAuto;          // optimize::PrepareFusedModel at load
  KernelChoice attention_kernel = KernelChoice::kTide;    // optimize::FusionOptions::tide_attention
  KernelChoice elementwise_kernel = KernelChoice::kTide;  // optimize::FusionOptions::tide_elementwise
  AttentionPrecision attention_precision = AttentionPrecision::kAuto;  // FusionOptions::tide_attention_bf16
  bool prune_last_layer = true;                           // optimize::FusionOptions::prune_last_layer
  bool shared_prompt_prefix = true;                       // optimize::FusionOptions::prompt_prefix
  std::optional<int64_t> token_type_vocab_size;           // unset: derived at load (see above)
  LongDocuments long_documents = LongDocuments::kTruncate;
  int64_t chunk_tokens = 0;                // 0: as many as fit beside the query
  int64_t chunk_stride = 0;                // 0: half a window
  int64_t max_chunks_per_document = 16;
  std::string rollout;                     // empty: none declared
  // Decoder-only rerankers: the prompt a pair is encoded as; unset: BERT pairs.
  std::optional<PromptTemplate> prompt_template;
  std::optional<std::string> default_instruction;  // the {instruction} of a request without one
  // Embedding models (task embed).
  Pooling pooling = Pooling::kMean;
  bool normalize = true;
  std::vector<int64_t> matryoshka_dimensions;      // strictly increasing; empty: any dimension
  std::vector<std::pair<std::string, std::string>> prompts;  // name -> prefix, sorted by name
  std::optional<std::string> default_prompt_name;
  // The prefix of prompt `name`; nullptr when the model has no such prompt.
  const std::string* Prompt(std::string_view name) const {
    for (const auto& [n, p] : prompts) {
      if (n == name) return &p;
    }
    return nullptr;
  }

  static constexpr int64_t kDefaultMaxSequenceLength = 512;

  // Every key FromConfig accepts (aliases included), in the order of the key table in the .cc.
  static std::vector<std::string_view> Keys();

  // Reads `config.parameters`; `file` names the config in errors.
  static absl::StatusOr<TideParameters> FromConfig(const ModelConfig& config, std::string_view file);

  // max_sequence_length if set, else the tokenizer's truncation max_length if it has one, else 512.
  int64_t EffectiveMaxSequenceLength(std::optional<int64_t> tokenizer_max_length) const;
};

std::string_view TaskName(Task task);
std::string_view ScoreActivationName(ScoreActivation activation);
std::string_view PoolingName(Pooling pooling);

}  // namespace tide::config
