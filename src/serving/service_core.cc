#include "serving/service_core.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "serving/kserve_answers.h"

namespace tide::serving {

absl::StatusOr<ServiceCore::Parts> ServiceCore::BuildParts(ModelManager* models, ServingMetrics* metrics,
                                                           const ServiceCoreOptions& options) {
  if (models == nullptr || metrics == nullptr) return absl::InvalidArgumentError("models and metrics are required");
  Parts parts;
  parts.rollouts = RolloutCoordinator::Create(models, metrics, options, options.clock);
  auto admission = Admission::Create(models, metrics, options, options.clock, parts.rollouts.get());
  if (!admission.ok()) return admission.status();
  parts.admission = *std::move(admission);
  parts.scoring = std::make_unique<ScoringPipeline>(
      metrics, [a = parts.admission.get()](const Call& call, size_t pairs) { return a->ChargePairs(call, pairs); },
      parts.rollouts.get(), options);
  return parts;
}

absl::StatusOr<std::unique_ptr<ServiceCore>> ServiceCore::Create(ModelManager* models, ServingMetrics* metrics,
                                                                 const ServiceCoreOptions& options) {
  auto parts = BuildParts(models, metrics, options);
  if (!parts.ok()) return parts.status();
  return Create(models, metrics, options, *std::move(parts));
}

absl::StatusOr<std::unique_ptr<ServiceCore>> ServiceCore::Create(ModelManager* models, ServingMetrics* metrics,
                                                                 const ServiceCoreOptions& options, Parts parts) {
  if (models == nullptr || metrics == nullptr) return absl::InvalidArgumentError("models and metrics are required");
  if (parts.rollouts == nullptr || parts.admission == nullptr || parts.scoring == nullptr) {
    return absl::InvalidArgumentError("every part of the service core is required");
  }
  return std::unique_ptr<ServiceCore>(new ServiceCore(models, metrics, options, std::move(parts)));
}

ServiceCore::ServiceCore(ModelManager* models, ServingMetrics* metrics, const ServiceCoreOptions& options,
                         Parts parts)
    : models_(models),
      metrics_(metrics),
      options_(options),
      rollouts_(std::move(parts.rollouts)),
      scoring_(std::move(parts.scoring)),
      admission_(std::move(parts.admission)) {}

ServiceCore::~ServiceCore() {
  rollouts_->Stop();   // the timer's tick and the shadow lanes' threads
  admission_.reset();  // the workers: queued work is destroyed unrun, running work finishes
}

void ServiceCore::Start(const CallInfo& info, Work work, Attempt attempt) {
  // Only the score cache answers a call before a worker: without it, no attempt.
  if (scoring_->score_cache() == nullptr) attempt = nullptr;
  admission_->Start(info, std::move(work), std::move(attempt));
}

absl::StatusOr<std::shared_ptr<ServedModel>> ServiceCore::FindModel(std::string_view name,
                                                                    std::string_view version) const {
  if (name.empty()) return models_->Default();
  return models_->Find(name, version);
}

absl::StatusOr<std::shared_ptr<ServedModel>> ServiceCore::NamedModel(std::string_view name,
                                                                     std::string_view version) const {
  return models_->Find(name, version);
}

api::ModelMetadata ServiceCore::MetadataOf(const ServedModel& model) const { return ModelMetadataOf(*models_, model); }

bool ServiceCore::Ready() const { return !draining() && models_->AllReady(); }

ServiceCore::Load ServiceCore::CurrentLoad() const {
  Load load;
  load.ready = Ready();
  load.in_flight = admission_->in_flight();
  load.max_concurrent_requests = admission_->max_concurrent_requests();
  for (const auto& model : models_->All()) {
    const batching::BatcherStats stats = model->GetStats().batcher;
    load.queues.push_back(QueueLoad{.queued_tasks = stats.queued_tasks, .queued_tokens = stats.queued_tokens});
  }
  return load;
}

ServiceLimits ServiceCore::Limits() const {
  ServiceLimits limits;
  limits.max_concurrent_requests = options_.max_concurrent_requests;
  const int workers = options_.tokenization_workers;
  limits.tokenization_workers = workers > 0 ? workers : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return limits;
}

void ServiceCore::RefreshMetrics() const {
  models_->RefreshMetrics();
  scoring_->RefreshMetrics();
  admission_->RefreshMetrics();
}

std::string ServiceCore::MetricsText(bool openmetrics) const {
  RefreshMetrics();
  return openmetrics ? metrics_->registry.RenderOpenMetrics() : metrics_->registry.RenderText();
}

}  // namespace tide::serving
