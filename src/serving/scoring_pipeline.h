// tide::serving::ScoringPipeline — the model work of an admitted call, in one place: a rerank goes
// score cache -> long documents -> quota -> batch -> score -> fallback, token rows (KServe) go
// quota -> breaker -> batch, and the rollout (RolloutHook) watches both. It runs on the worker that
// runs the call (serving/admission.h).
//
// Contract:
//  - Rerank / Infer / Tokenize check Call::StillWanted before and between chunks of
//    kTokenizeChunkDocuments inputs. Rerank and Infer call `done` exactly once: on the calling
//    thread for an error or a fallback, on the instance thread that finished the last row
//    otherwise. While a model's breaker is open, Rerank answers with its fallback (BM25 or a
//    classifier's default result) and Infer with a classifier's breaker_default_result, both
//    marked (`fallback` set) and counted in tide_degraded_responses_total; a model without one
//    answers DegradedUnavailableError.
//  - Quotas: each Rerank and Infer charges its rows (documents, long documents' windows, token
//    rows) once, through `charge_pairs` (Admission::ChargePairs), before any row is queued: a
//    refusal (kOverloaded + RetryAfterMs) is the answer.
//  - An instruction (PairOptions::instruction) the model cannot take or needs and lacks is refused
//    (422, serving/scoring.h ResolveInstruction) before the quota; it is part of the cache key.
//  - Score cache (options.score_cache_bytes > 0): Rerank looks every pair up (unless the call is
//    no_cache), queues only the pairs not found, stores the model's logits of those, and answers
//    with RerankScores::cache_hits set; a request whose every pair was found is answered on the
//    calling thread without touching the model. Fallback answers are never stored, and a degraded
//    answer is degraded for every document (never cached model scores mixed with BM25). Entries
//    are the call's tenant's own (kTenant, the default) or everyone's (kShared). Hits and misses
//    are counted in tide_score_cache_{hits,misses}_total{model,version}.
//  - Embedding cache (options.embed_cache_bytes > 0, its own ScoreCache and byte budget, shared
//    as score_cache_scope says): Embed looks every row up by the model version's generation and
//    the row's token ids and type ids (what the model reads: the text after the prompt, the
//    tokenizer and the truncation, or an OpenAI token array), unless the call is no_cache or the
//    rollout tracks the version (its answers must be compared), queues only the rows not found,
//    stores the model's vectors of those (raw, before any cut or normalization: one entry serves
//    every `dimensions` and `normalize`), and answers [rows, dim] in the rows' order; every row
//    found: answered on the calling thread without touching the model (real_tokens 0). The quota
//    is charged for every row. Counted in tide_embed_cache_{hits,misses}_total{model,version} and
//    Call::cache_hits. Without the cache Embed is Infer.
//  - EmbedAll is Infer for rows that also want the model's per-token states (TEI's /embed_all):
//    never cached; the answer's InferenceResult::token_states holds each row's real tokens' states.
//  - RerankFromCache answers a rerank whole from the cache on the calling thread (cheap enough for
//    an I/O thread: one hash and lookup per pair): nullopt unless the cache is on, the call reads
//    it, the options are plain (truncate: no windows), the rollout does not track the version and
//    every pair is found; then the pairs are charged (the status of a refusal) and counted as hits.
//    It counts nothing when it answers nullopt (the pairs are looked up again by Rerank).
//  - Long documents (PairOptions::long_documents chunk_max / chunk_mean; serving/long_documents.h):
//    a document longer than what fits beside the query is split into windows, every window is a
//    row (queued, cached, charged like a document), and the document's score is the best or the
//    mean of its windows'. real_tokens counts every window's tokens.
//  - Rollouts: a live answer of a version the rollout tracks goes to RolloutHook::Watch (rerank:
//    before the quota; token rows: after the quota and the breaker), which is told once the rows
//    are queued and is given the answer before `done`.
//  - Thread-safe. The metrics and the hook (may be null) must outlive the object.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "serving/call.h"
#include "serving/inference_request.h"
#include "serving/rollout_hook.h"
#include "serving/score_cache.h"
#include "serving/scoring.h"
#include "serving/served_model.h"
#include "serving/serving_metrics.h"
#include "serving/tensor_rows.h"
#include "tokenizer/tokenizer.h"

namespace tide::serving {

struct ScoringPipelineOptions {
  // Bytes of the per-pair score cache (score_cache.h); 0: no cache.
  size_t score_cache_bytes = 0;
  // Who shares its entries: each tenant its own (a hit never reveals another tenant's pair), or
  // every caller (more hits; see ScoreCacheScope).
  ScoreCacheScope score_cache_scope = ScoreCacheScope::kTenant;
  // Bytes of the embedding cache (an embedding model's vector per input); 0: no cache. Shared as
  // score_cache_scope says.
  size_t embed_cache_bytes = 0;
};

// A text input of Tokenize: a text or a (text, text_pair) pair.
// With a model's prompt_template a pair is its (query, document), encoded as the prompt with
// `instruction` (unset: the model's default_instruction); a single text is encoded as it is.
struct TextInput {
  std::string_view text;
  std::optional<std::string_view> text_pair;
  std::optional<std::string> instruction;
};

// Token rows' answer: the model's result, or (breaker open) a fallback's.
struct InferOutcome {
  InferenceResult result;
  const char* fallback = nullptr;  // set: degraded; the fallback's name (kFallbackDefault)
};
using InferDone = absl::AnyInvocable<void(absl::StatusOr<InferOutcome>) &&>;

// Charges a call's rows to its key's quota (Admission::ChargePairs).
using ChargePairsFn = std::function<absl::Status(const Call& call, size_t pairs)>;

class ScoringPipeline {
 public:
  // `charge_pairs` is required; `rollouts` may be null (no rollouts).
  ScoringPipeline(ServingMetrics* metrics, ChargePairsFn charge_pairs, RolloutHook* rollouts,
                  const ScoringPipelineOptions& options);
  ScoringPipeline(const ScoringPipeline&) = delete;
  ScoringPipeline& operator=(const ScoringPipeline&) = delete;

  std::optional<absl::StatusOr<RerankScores>> RerankFromCache(const Call& call, const ServedModel& model,
                                                              std::string_view query,
                                                              std::span<const std::string_view> documents,
                                                              const PairOptions& options, bool raw_scores);
  // `documents` need only live until this call returns.
  void Rerank(const CallPtr& call, std::shared_ptr<ServedModel> model, std::string_view query,
              std::span<const std::string_view> documents, const PairOptions& options, bool raw_scores,
              RerankDone done);
  // `windows`: which input each row belongs to when long documents were split (what the edge
  // folds the answer with); a rollout compares per input.
  void Infer(const CallPtr& call, std::shared_ptr<ServedModel> model, std::vector<tokenizer::Encoding> rows,
             InferDone done, TensorWindows windows = {});
  // An embedding model's rows through the embedding cache (see the contract), then as Infer.
  void Embed(const CallPtr& call, std::shared_ptr<ServedModel> model, std::vector<tokenizer::Encoding> rows,
             InferDone done);
  // An embedding model's rows with their token states (see the contract).
  void EmbedAll(const CallPtr& call, std::shared_ptr<ServedModel> model, std::vector<tokenizer::Encoding> rows,
                InferDone done);
  // Encodes each input with the model's tokenizer, cut to its max_sequence_length from the end
  // `direction` names (unset: the tokenizer's own; see Encoding::truncated to refuse a cut input).
  // A pair for a model with a prompt_template is its prompt (only the document cut; direction
  // unset: the model's truncation_direction).
  absl::Status Tokenize(const Call& call, const ServedModel& model, std::span<const TextInput> inputs,
                        bool add_special_tokens, std::vector<tokenizer::Encoding>* out,
                        std::optional<tokenizer::TruncationDirection> direction) const;

  const ScoreCache* score_cache() const { return cache_.get(); }
  const ScoreCache* embed_cache() const { return embed_cache_.get(); }
  // Mirrors the cache's evictions and size into the metrics.
  void RefreshMetrics() const;

 private:
  // Implementation details follow. In call order: Rerank -> RerankDocuments (long documents,
  // quota) -> ScoreRows (cache, then ScoreOrFallback, then the cache's store).
  void RerankDocuments(const CallPtr& call, std::shared_ptr<ServedModel> model, std::string_view query,
                       std::span<const std::string_view> documents, const PairOptions& options, bool raw_scores,
                       RerankDone done);
  // Infer after the quota: the breaker, the rollout's watch, the batcher.
  // `token_states`: the rows also want the model's token states (EmbedAll).
  void SubmitRows(const CallPtr& call, std::shared_ptr<ServedModel> model, std::vector<tokenizer::Encoding> rows,
                  InferDone done, TensorWindows windows, bool token_states = false);
  void ScoreRows(const CallPtr& call, std::shared_ptr<ServedModel> model, std::string_view query,
                 std::span<const std::string_view> documents, const PairOptions& options, bool raw_scores,
                 RerankDone done);

  ServingMetrics* const metrics_;
  const ChargePairsFn charge_pairs_;
  RolloutHook* const rollouts_;
  const ScoringPipelineOptions options_;
  std::unique_ptr<ScoreCache> cache_;        // null: no score cache
  std::unique_ptr<ScoreCache> embed_cache_;  // null: no embedding cache
  mutable absl::Mutex refresh_mu_;
  mutable uint64_t mirrored_evictions_ ABSL_GUARDED_BY(refresh_mu_) = 0;
  mutable uint64_t mirrored_embed_evictions_ ABSL_GUARDED_BY(refresh_mu_) = 0;
};

}  // namespace tide::serving
