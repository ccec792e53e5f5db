// tide::serving::ServiceCore — what every edge (HTTP routes, gRPC services) calls to serve an
// inference call: a small facade over three parts, each with its own contract and tests:
//  - Admission (serving/admission.h): keys and quotas, draining, concurrency, memory, deadlines,
//    the tokenization workers' queue and its light lane, malloc_trim after a burst. Start's
//    admission order and refusals, Authorize, SetKeys and ChargePairs are its.
//  - ScoringPipeline (serving/scoring_pipeline.h): the model work of an admitted call, in call
//    order: score cache -> long documents -> quota -> batch -> score -> fallback (Rerank), quota ->
//    breaker -> batch (Infer), Tokenize; RerankFromCache.
//  - RolloutCoordinator (serving/rollout_coordinator.h) behind RolloutHook (serving/rollout_hook.h):
//    every version choice of a call (FindModel with a call), the rollouts' outcomes and
//    comparisons, shadow lanes, rollouts declared in config.pbtxt, --rollout-state-file, and the
//    rollout API.
// An edge only turns its wire format into the calls below and their answers back into its wire
// format.
//
// Contract (the facade's own):
//  - Create(models, metrics, options) builds the parts from options (BuildParts) and wires them:
//    admission and the pipeline see the coordinator only as a RolloutHook; the pipeline charges
//    quotas through Admission::ChargePairs. Create(models, metrics, options, parts) takes parts a
//    composition root (or a test) built.
//  - Start(info, work, attempt): Admission::Start; `attempt` is offered only while the score cache
//    is on (a request the cache has whole skips the worker queue).
//  - FindModel(name, version) is a plain lookup (`name` empty: the default model, the only one or
//    the first by name; `version` empty: the newest loaded); FindModel(call, ...) is the rollout's
//    Pick (RolloutHook).
//  - Ready: not draining and every model ready. CurrentLoad, RefreshMetrics read every part.
//  - The destructor stops the rollout timer and the shadow lanes, then the tokenization workers
//    (work still queued is destroyed unrun; running work finishes with every part alive).
//  - Thread-safe. The model manager and the metrics must outlive the core.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/kserve_metadata.h"
#include "common/clock.h"
#include "guard/access.h"
#include "guard/api_keys.h"
#include "serving/access_log.h"
#include "serving/admission.h"
#include "serving/call.h"
#include "serving/model_manager.h"
#include "serving/rollout.h"
#include "serving/rollout_coordinator.h"
#include "serving/rollout_json.h"
#include "serving/score_cache.h"
#include "serving/scoring.h"
#include "serving/scoring_pipeline.h"
#include "serving/service_load.h"
#include "serving/serving_metrics.h"
#include "serving/shadow_lane.h"
#include "serving/tensor_rows.h"

namespace tide::serving {

// Every part's options (their fields, commented there) plus the facade's own.
struct ServiceCoreOptions : AdmissionOptions, ScoringPipelineOptions, RolloutCoordinatorOptions {
  const Clock* clock = nullptr;  // StillWanted's and the rollouts' time source; null: the steady clock
  // The structured access log (--access-log, access_log.h) both edges write to; null: none.
  std::shared_ptr<AccessLog> access_log;
};

// The limits /info reports (TEI's info route, gRPC Info).
struct ServiceLimits {
  int64_t max_concurrent_requests = 0;  // 0: unlimited
  int tokenization_workers = 0;         // resolved: one per core when the option is 0
};

class ServiceCore {
 public:
  struct Parts {
    std::unique_ptr<RolloutCoordinator> rollouts;
    std::unique_ptr<Admission> admission;
    std::unique_ptr<ScoringPipeline> scoring;
  };
  static absl::StatusOr<Parts> BuildParts(ModelManager* models, ServingMetrics* metrics,
                                          const ServiceCoreOptions& options);
  static absl::StatusOr<std::unique_ptr<ServiceCore>> Create(ModelManager* models, ServingMetrics* metrics,
                                                             const ServiceCoreOptions& options);
  static absl::StatusOr<std::unique_ptr<ServiceCore>> Create(ModelManager* models, ServingMetrics* metrics,
                                                             const ServiceCoreOptions& options, Parts parts);
  ~ServiceCore();

  // ---- Admission (serving/admission.h).
  using Work = Admission::Work;
  void Start(const CallInfo& info, Work work) { admission_->Start(info, std::move(work)); }
  using Attempt = Admission::Attempt;
  void Start(const CallInfo& info, Work work, Attempt attempt);
  absl::StatusOr<std::shared_ptr<guard::Tenant>> Authorize(guard::Access access, std::string_view authorization,
                                                           guard::Listener listener = guard::Listener::kMain) const {
    return admission_->Authorize(access, authorization, listener);
  }
  absl::Status SetKeys(std::string api_key, std::string admin_api_key, std::shared_ptr<guard::ApiKeys> file_keys) {
    return admission_->SetKeys(std::move(api_key), std::move(admin_api_key), std::move(file_keys));
  }
  absl::Status ChargePairs(const Call& call, size_t pairs) const { return admission_->ChargePairs(call, pairs); }
  // Draining: readiness turns false and Start refuses new calls.
  void SetDraining(bool draining) { admission_->SetDraining(draining); }
  bool draining() const { return admission_->draining(); }

  // ---- Which model answers.
  absl::StatusOr<std::shared_ptr<ServedModel>> FindModel(std::string_view name = {},
                                                         std::string_view version = {}) const;
  absl::StatusOr<std::shared_ptr<ServedModel>> FindModel(const Call& call, std::string_view name = {},
                                                         std::string_view version = {}) const {
    return rollouts_->Pick(call, name, version);
  }
  // A model by name exactly (and version; empty: the newest), no default and no rollout: the
  // metadata, readiness and statistics routes describe the version they name.
  absl::StatusOr<std::shared_ptr<ServedModel>> NamedModel(std::string_view name, std::string_view version = {}) const;
  // Every loaded version (KServe's repository index and statistics), and one's KServe metadata.
  std::vector<std::shared_ptr<ServedModel>> AllModels() const { return models_->All(); }
  api::ModelMetadata MetadataOf(const ServedModel& model) const;

  // ---- The scoring pipeline (serving/scoring_pipeline.h).
  std::optional<absl::StatusOr<RerankScores>> RerankFromCache(const Call& call, const ServedModel& model,
                                                              std::string_view query,
                                                              std::span<const std::string_view> documents,
                                                              const PairOptions& options, bool raw_scores) {
    return scoring_->RerankFromCache(call, model, query, documents, options, raw_scores);
  }
  void Rerank(const CallPtr& call, std::shared_ptr<ServedModel> model, std::string_view query,
              std::span<const std::string_view> documents, const PairOptions& options, bool raw_scores,
              RerankDone done) {
    scoring_->Rerank(call, std::move(model), query, documents, options, raw_scores, std::move(done));
  }
  void Infer(const CallPtr& call, std::shared_ptr<ServedModel> model, std::vector<tokenizer::Encoding> rows,
             InferDone done, TensorWindows windows = {}) {
    scoring_->Infer(call, std::move(model), std::move(rows), std::move(done), std::move(windows));
  }
  absl::Status Tokenize(const Call& call, const ServedModel& model, std::span<const TextInput> inputs,
                        bool add_special_tokens, std::vector<tokenizer::Encoding>* out,
                        std::optional<tokenizer::TruncationDirection> direction = std::nullopt) const {
    return scoring_->Tokenize(call, model, inputs, add_special_tokens, out, direction);
  }
  void Embed(const CallPtr& call, std::shared_ptr<ServedModel> model, std::vector<tokenizer::Encoding> rows,
             InferDone done) {
    scoring_->Embed(call, std::move(model), std::move(rows), std::move(done));
  }
  void EmbedAll(const CallPtr& call, std::shared_ptr<ServedModel> model, std::vector<tokenizer::Encoding> rows,
                InferDone done) {
    scoring_->EmbedAll(call, std::move(model), std::move(rows), std::move(done));
  }
  const ScoreCache* score_cache() const { return scoring_->score_cache(); }
  const ScoreCache* embed_cache() const { return scoring_->embed_cache(); }

  // ---- Readiness, load, metrics.
  bool Ready() const;
  bool ModelReady(const ServedModel& model) const { return !draining() && model.ready(); }
  using Load = ServiceLoad;
  Load CurrentLoad() const;
  ServiceLimits Limits() const;
  // Mirrors the parts' and the models' state into the metrics' gauges (call before rendering).
  void RefreshMetrics() const;
  // The Prometheus text of every metric, refreshed first (/metrics).
  std::string MetricsText(bool openmetrics = false) const;

  // ---- Rollouts (serving/rollout_coordinator.h).
  absl::Status StartRollout(const std::string& model, const RolloutDeclaration& declaration) {
    return rollouts_->StartRollout(model, declaration);
  }
  absl::Status PromoteRollout(const std::string& model) { return rollouts_->PromoteRollout(model); }
  absl::Status RollbackRollout(const std::string& model, std::string_view reason) {
    return rollouts_->RollbackRollout(model, reason);
  }
  // The model's rollout as GET /v2/models/{m}/rollout shows it; nullopt: none.
  std::optional<RolloutStatus> RolloutStatusOf(const std::string& model) const { return rollouts_->Status(model); }
  void ApplyDeclaredRollouts() { rollouts_->ApplyDeclaredRollouts(); }
  void SyncShadowLanes() { rollouts_->SyncShadowLanes(); }
  absl::Status LoadRolloutState() { return rollouts_->LoadRolloutState(); }
  void ApplySavedRollouts() { rollouts_->ApplySavedRollouts(); }
  void PersistRollouts() { rollouts_->PersistRollouts(); }
  std::optional<ShadowLane::Stats> ShadowLaneStats(const std::string& model) const {
    return rollouts_->ShadowLaneStats(model);
  }
  bool ShadowLaneReady(const std::string& model, int64_t version) const {
    return rollouts_->ShadowLaneReady(model, version);
  }

  // ---- The rollouts' table itself, for serving's own tests (everything else uses the methods above).
  Rollouts& rollouts() const { return rollouts_->rollouts(); }

 private:
  ServiceCore(ModelManager* models, ServingMetrics* metrics, const ServiceCoreOptions& options, Parts parts);

  ModelManager* const models_;
  ServingMetrics* const metrics_;
  const ServiceCoreOptions options_;
  // Destroyed in reverse: the workers (admission) first, while the pipeline and the rollouts the
  // running work uses are still alive.
  std::unique_ptr<RolloutCoordinator> rollouts_;
  std::unique_ptr<ScoringPipeline> scoring_;
  std::unique_ptr<Admission> admission_;
};

}  // namespace tide::serving
