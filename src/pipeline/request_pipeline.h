// tide::pipeline::RequestPipeline — the protocol-neutral request path between the edges and the
// serving core. An edge decodes its wire format into an api:: request (HTTP from JSON or binary
// tensors, gRPC from protobuf), starts the call (ServiceCore::Start: admission), hands the request
// and the admitted call here, and renders the domain answer it gets back. Both edges therefore
// answer the same question the same way: the version a call gets (ServiceCore::FindModel with the
// call: a rollout's split), the options a rerank runs with, the classification of a KServe
// output, the offsets of a token, what /info says.
//
//   Rerank        TEI rerank (HTTP /rerank, gRPC tei.v1.Rerank)       -> scores (RerankAnswer)
//   CohereRerank  Cohere /v1/rerank, /v2/rerank                       -> scores
//   Predict       TEI predict (/predict, tei.v1.Predict)              -> logits + label names
//   Embed         TEI /embed, OpenAI /v1/embeddings, Cohere /v2/embed, tei.v1.Embed -> vectors
//                 (embed_pipeline.cc: an embedding model's pooled vectors, cut and normalized)
//   EmbedAll      TEI /embed_all, tei.v1.Embed/EmbedAll -> per-token states (embed_pipeline.cc)
//   Infer         KServe v2 infer (HTTP and gRPC), with Triton's classification -> api::InferResponse
//   Tokenize      TEI tokenize                                        -> tokens with byte offsets
//   Decode        TEI decode                                          -> texts
//   Info          TEI info                                            -> api::TeiInfo
//   Model...      the models metadata, readiness and statistics answers name
//
// Contract:
//  - Every answer carries an Outcome (outcome.h): OK or the error with its kind, the version that
//    answered (set as soon as one is chosen, so an error after that names it), the fallback of a
//    degraded answer, cache hits, stage timings. The edges record it with the CompletionRecorder.
//  - Rerank, CohereRerank, Predict and Infer run on the tokenization worker of the admitted call
//    and call `done` exactly once: on that thread for an error or a fallback, else on the
//    instance thread that finished the last row (ServiceCore::Rerank / Infer).
//  - Tokenize, Decode, Info and the model lookups answer synchronously.
//  - Thread-safe; the core (and the recorder's metrics and access log) must outlive the pipeline.
//  - One pipeline serves both edges: the composition root (cli/serve_command.cc) builds it with
//    the completion recorder and the request limits, and hands it to the HTTP service and the gRPC
//    server, so the two cannot be built with different limits, versions or recorders.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "api/cohere_rerank.h"
#include "api/embed.h"
#include "api/kserve_infer.h"
#include "api/kserve_metadata.h"
#include "api/model_statistics.h"
#include "api/request_limits.h"
#include "api/rerank.h"
#include "api/tei_decode.h"
#include "api/tei_info.h"
#include "api/tei_predict.h"
#include "api/tokenize.h"
#include "common/version.h"
#include "pipeline/completion_recorder.h"
#include "pipeline/outcome.h"
#include "serving/call.h"
#include "serving/service_core.h"

namespace tide::pipeline {

struct PipelineOptions {
  // The request limits of both edges (--max-documents, --max-text-bytes, ...): the edges decode
  // under them.
  api::RequestLimits limits;
  // The server version /info and tei.v1.Info report.
  std::string version{Version()};
};

struct RerankAnswer {
  Outcome outcome;
  std::vector<float> scores;  // scores[i] belongs to the request's documents[i]
  size_t real_tokens = 0;     // tokens the model ran (0 for a fallback)
};
using RerankDone = absl::AnyInvocable<void(RerankAnswer) &&>;

struct PredictAnswer {
  Outcome outcome;
  std::vector<float> logits;        // [inputs x num_labels]
  int64_t num_labels = 0;
  std::vector<std::string> labels;  // the model's names of the num_labels labels
  size_t tokens = 0;                // tokens of every input (TEI's compute_tokens)
};
using PredictDone = absl::AnyInvocable<void(PredictAnswer) &&>;

struct EmbedAnswer {
  Outcome outcome;
  std::vector<float> vectors;  // [inputs, dim] row-major: cut to the request's dimensions, normalized
  size_t dim = 0;
  size_t tokens = 0;           // tokens of every input (OpenAI's prompt_tokens, Cohere's input_tokens)
};
using EmbedDone = absl::AnyInvocable<void(EmbedAnswer) &&>;

struct EmbedAllAnswer {
  Outcome outcome;
  std::vector<std::vector<float>> states;  // per input: [tokens, hidden] row-major, padding dropped
  size_t hidden = 0;
  size_t tokens = 0;                       // tokens of every input
};
using EmbedAllDone = absl::AnyInvocable<void(EmbedAllAnswer) &&>;

struct InferAnswer {
  Outcome outcome;
  // The decoded request (null when decoding failed), which the edge renders the response for.
  std::shared_ptr<const api::InferRequest> request;
  // The model's output tensor FP32 [rows, labels], or Triton's classification BYTES [rows, k] for
  // an output requested with parameters.classification = k; "parameters": {"degraded": true} for
  // a fallback's answer.
  api::InferResponse response;
};
using InferDone = absl::AnyInvocable<void(InferAnswer) &&>;
// Decodes the edge's infer request under `limits` (the token tensors' size depends on the model,
// so they are known only once the model is chosen).
using InferDecoder = absl::AnyInvocable<absl::StatusOr<api::InferRequest>(const api::RequestLimits& limits) &&>;

struct TokenizeAnswer {
  Outcome outcome;
  std::vector<std::vector<api::TokenInfo>> tokens;  // per input
};

struct DecodeAnswer {
  Outcome outcome;
  std::vector<std::string> texts;  // per id list
};

struct InfoAnswer {
  Outcome outcome;
  api::TeiInfo info;
};

class RequestPipeline {
 public:
  RequestPipeline(serving::ServiceCore* core, CompletionRecorder recorder, PipelineOptions options);

  const PipelineOptions& options() const { return options_; }
  serving::ServiceCore* core() const { return core_; }
  // Records finished requests (metrics, access log) for both edges.
  const CompletionRecorder& recorder() const { return recorder_; }

  // ---- inference, on an admitted call ----------------------------------------------------------

  // TEI rerank against the default model (its rollout's version for this call); a request without
  // truncation_direction / long_documents gets the model's.
  void Rerank(const serving::CallPtr& call, std::shared_ptr<const api::RerankRequest> request, RerankDone done) const;
  // The same answered whole from the score cache without a worker hop (serving::ServiceCore::
  // RerankFromCache): nullopt when the cache cannot answer all of it (or the default model is
  // unknown): then Rerank answers.
  std::optional<RerankAnswer> RerankFromCache(const serving::CallPtr& call, const api::RerankRequest& request) const;
  // Cohere rerank: the model the request names (else the default); always truncating, in the
  // model's direction, max_tokens_per_doc first.
  void CohereRerank(const serving::CallPtr& call, std::shared_ptr<const api::CohereRerankRequest> request,
                    RerankDone done) const;
  // TEI predict: every input classified by the default model; an input over the model's limit
  // with truncate false is refused (kFailedPrecondition naming inputs[i]).
  void Predict(const serving::CallPtr& call, std::shared_ptr<const api::PredictRequest> request,
               PredictDone done) const;
  // Embeddings (embed_pipeline.cc): the model the request names, else the default model when it is
  // an embedding model, else the first embedding model by name. A model whose task is not embed is
  // refused (kInvalidInput naming its task); so are a prompt_name the model lacks, `dimensions`
  // larger than the model's or not one of its matryoshka_dimensions, token ids outside its
  // vocabulary, and (truncate false) an input over its max_sequence_length. Each input gets the
  // prompt's prefix (the request's prompt_name, Cohere's input_type, else the model's
  // default_prompt_name), is tokenized with special tokens (token-id inputs are fed as they are),
  // and runs through the batcher (quota, breaker without fallback: 503 while open).
  void Embed(const serving::CallPtr& call, std::shared_ptr<const api::EmbedRequest> request, EmbedDone done) const;
  // TEI /embed_all (tei.v1.Embed/EmbedAll): Embed's model choice, prompt, tokenization and
  // truncation, then every input's per-token states (the graph's token_embeddings: raw, neither
  // pooled nor normalized), its real tokens only (special tokens included, padding never). A
  // model without that output: kModelUnsupported (TEI's 424). Never cached.
  void EmbedAll(const serving::CallPtr& call, std::shared_ptr<const api::EmbedRequest> request,
                EmbedAllDone done) const;
  // The name of the model a request without one should get for `task`: "" (the default model) when
  // the default model serves it or no model does, else the first model by name that does, so one
  // server answers /rerank with its reranker and /embed with its embedder.
  std::string DefaultModelFor(Task task) const;

  // KServe v2 infer on `model` (`version` empty: the rollout's choice for this call): decode, the
  // outputs checked (only the model's output; parameters.classification), the request parameters
  // timeout (us) / priority refining the call and long_documents, rows from the tensors, the
  // model (breaker fallback), windows folded, classification applied.
  void Infer(const serving::CallPtr& call, std::string_view model, std::string_view version, InferDecoder decode,
             InferDone done) const;
  // TEI tokenize with the default model: each token's id, special flag, and its byte offsets and
  // text in the input (a pair's second text from its first token of type 1) where the vocabulary
  // piece aligns with the text, else its piece without offsets (tokenizer/token_text.h).
  TokenizeAnswer Tokenize(const serving::Call& call, const api::TokenizeRequest& request) const;
  // TEI decode with the default model's tokenizer.
  DecodeAnswer Decode(const api::DecodeRequest& request) const;

  // Whether the default model is a classifier (TEI's default route answers predict then).
  bool DefaultIsClassifier() const;
  // Whether the default model is an embedding model (TEI's default route answers embed then).
  bool DefaultIsEmbedder() const;

  // ---- descriptions, without a call -------------------------------------------------------------

  // TEI info about the default model (one answer for GET /info and tei.v1.Info).
  InfoAnswer Info() const;
  // A model by name (and version; empty: the newest), for metadata, readiness and statistics.
  absl::StatusOr<std::shared_ptr<serving::ServedModel>> Model(std::string_view name, std::string_view version) const;
  api::ModelMetadata Metadata(const serving::ServedModel& model) const;
  // Every served version (all models' statistics, the repository index without a controller).
  std::vector<std::shared_ptr<serving::ServedModel>> AllModels() const;
  // The Prometheus text of every metric, refreshed first; OpenMetrics (with the latency
  // histograms' exemplars) when `openmetrics`.
  std::string MetricsText(bool openmetrics = false) const;

 private:
  void ScorePairs(const serving::CallPtr& call, std::shared_ptr<serving::ServedModel> model, std::string_view query,
                  const std::vector<std::string>& documents, const serving::PairOptions& pair_options, bool raw_scores,
                  RerankDone done) const;

  serving::ServiceCore* const core_;
  const PipelineOptions options_;
  const CompletionRecorder recorder_;
};

// `model` when its task fits a route that wants `wanted`, else kInvalidInput (422) naming the
// model, its task and what the route needs: an embedding model on a rerank or predict route
// (`wanted` rerank or classify: both take rerankers and classifiers), any other model on an
// embedding route (`wanted` embed). An error status passes through.
absl::StatusOr<std::shared_ptr<serving::ServedModel>> CheckedModel(
    absl::StatusOr<std::shared_ptr<serving::ServedModel>> model, Task wanted);

// The model's rollout (GET /v2/models/{m}/rollout); nullopt: it has none. A function of the core,
// so that no edge reaches into the core's parts.
std::optional<serving::RolloutStatus> RolloutStatusOf(const serving::ServiceCore& core, const std::string& model);

}  // namespace tide::pipeline
