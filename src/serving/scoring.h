// tide::serving scoring — the two ends of a rerank request around the model: (query, document)
// pairs to token rows, and logits to relevance scores.
//
// Contract: pure functions of an immutable model; thread-safe.
//  - TokenizePairs encodes every (query, document) pair with truncation to the model's
//    max_sequence_length (LongestFirst, as HF's cross-encoders do). With `truncate` false an input
//    that would need cutting is refused with FAILED_PRECONDITION (HTTP 422) naming the document
//    and the lengths.
//  - A model with a prompt_template (decoder-only rerankers) encodes each pair as its prompt
//    instead (tokenizer/prompt_encoder.h): the instruction is the request's, else the model's
//    default_instruction; only the document is cut. ResolveInstruction answers INVALID_INPUT
//    (422) naming `instruction` for an instruction the model cannot take (no template, or a
//    template without an {instruction} slot) and for a template that needs one the request and
//    the model lack; a prompt whose frame leaves no room for the document is INVALID_INPUT too.
//  - RerankScore: the model's relevance logit is its last output label (a 1-label reranker's only
//    one; a 2-label classifier's "positive" one). score_activation sigmoid (default) maps it to
//    0..1, softmax takes the probability of the last label, none returns the logit; raw=true always
//    returns the logit (TEI's raw_scores).
//  - ScoreOrFallback: the whole rerank path between a parsed request and its renderer, shared by
//    every edge (TEI, Cohere; a future gRPC one): tokenize, then the model's scores, or while its
//    breaker is open a fallback's (BM25; a classifier's breaker_default_result), marked degraded.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "domain/long_documents_mode.h"
#include "serving/inference_request.h"
#include "serving/served_model.h"
#include "serving/serving_metrics.h"
#include "tokenizer/prompt_encoder.h"
#include "tokenizer/tokenizer.h"

namespace tide::serving {

struct PairOptions {
  bool truncate = true;
  // Unset: the model's truncation_direction parameter (right unless config.pbtxt says left).
  std::optional<tokenizer::TruncationDirection> direction;
  // Cohere's max_tokens_per_doc: additionally cut each document to this many tokens.
  std::optional<size_t> max_tokens_per_doc;
  // A document longer than what fits beside the query: cut (truncate) or scored as windows
  // (ServiceCore::Rerank; serving/long_documents.h).
  LongDocuments long_documents = LongDocuments::kTruncate;
  // The request's instruction (decoder-only rerankers' prompt_template); unset: the model's
  // default_instruction. Owned: a mirrored request outlives the call's strings.
  std::optional<std::string> instruction;
};

// The instruction `model`'s prompt renders with (empty for a template without an {instruction}
// slot), or INVALID_INPUT naming `instruction` (see the contract above).
absl::StatusOr<std::string_view> ResolveInstruction(const ServedModel& model,
                                                    const std::optional<std::string>& instruction);

// The prompt encoder of (instruction, query) for a model with a prompt_template, cut to
// `max_length` (unset: the model's max_sequence_length); statuses with their kinds.
absl::StatusOr<tokenizer::PromptEncoder> MakePromptEncoder(const ServedModel& model,
                                                           const std::optional<std::string>& instruction,
                                                           std::string_view query,
                                                           std::optional<size_t> max_length = std::nullopt);

// `between_chunks`, when set, is called before each chunk of kTokenizeChunkDocuments documents;
// a non-OK status stops tokenizing and is returned (the caller's deadline and client-gone check).
inline constexpr size_t kTokenizeChunkDocuments = 64;
absl::Status TokenizePairs(const ServedModel& model, std::string_view query,
                           std::span<const std::string_view> documents, const PairOptions& options,
                           std::vector<tokenizer::Encoding>* rows,
                           const std::function<absl::Status()>& between_chunks = nullptr);

float RerankScore(const InferenceResult& result, int64_t row, config::ScoreActivation activation, bool raw);
// The same for one row of `num_labels` logits.
float RerankScore(std::span<const float> logits_row, config::ScoreActivation activation, bool raw);

// The scores of a rerank request, ready for a renderer.
struct RerankScores {
  std::vector<float> scores;       // scores[i] belongs to documents[i]
  // The model's raw logits, [documents x num_labels] (empty for a fallback): what a score cache keeps.
  std::vector<float> logits;
  int64_t num_labels = 0;
  size_t cache_hits = 0;           // documents whose score came from the score cache
  size_t real_tokens = 0;          // tokens the model ran (0 for a fallback)
  StageTimings timings;            // tokenize, queue, inference (a fallback: tokenize only)
  const char* fallback = nullptr;  // set: degraded; the fallback's name (kFallbackBm25, kFallbackDefault)
};
using RerankDone = absl::AnyInvocable<void(absl::StatusOr<RerankScores>) &&>;

// Tokenizes the (query, document) pairs (calling `between_chunks` between chunks, see
// TokenizePairs), then submits them to `model`, or while its breaker is open scores them with its
// fallback (counted in metrics->degraded when `metrics` is set). A classifier without a default
// result answers DegradedUnavailableError. `done` is called exactly once: on this thread for an
// error or a fallback, on the instance thread that finished the last row otherwise. `documents`
// need only live until this call returns.
void ScoreOrFallback(std::shared_ptr<ServedModel> model, const RowTask::Admission& admission, std::string_view query,
                     std::span<const std::string_view> documents, const PairOptions& options, bool raw_scores,
                     ServingMetrics* metrics, const std::function<absl::Status()>& between_chunks, RerankDone done);

// What `model` answers while its breaker is open (fallback set; not counted in metrics).
absl::StatusOr<RerankScores> FallbackScores(const ServedModel& model, std::string_view query,
                                            std::span<const std::string_view> documents, bool raw_scores);

// kUnavailable (503) for a model whose breaker is open and that has no fallback, marked
// Degraded "unavailable" (common/error.h): edges answer `x-tide-degraded: unavailable`.
absl::Status DegradedUnavailableError(std::string_view model_name);
bool IsDegradedUnavailable(const absl::Status& status);

}  // namespace tide::serving
