#include "serving/service_core.h"

#include <malloc.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error.h"
#include "guard/api_key.h"
#include "serving/fallback.h"

namespace tide::serving {

ServiceCore::ServiceCore(ModelManager* models, ServingMetrics* metrics, const ServiceCoreOptions& options)
    : models_(models),
      metrics_(metrics),
      options_(options),
      clock_(options.clock != nullptr ? options.clock : SteadyClock::Get()) {}

ServiceCore::~ServiceCore() { pool_.reset(); }

absl::StatusOr<std::unique_ptr<ServiceCore>> ServiceCore::Create(ModelManager* models, ServingMetrics* metrics,
                                                                 const ServiceCoreOptions& options) {
  if (models == nullptr || metrics == nullptr) return absl::InvalidArgumentError("models and metrics are required");
  std::unique_ptr<ServiceCore> core(new ServiceCore(models, metrics, options));
  guard::MemoryBudget::Options budget;
  budget.capacity_bytes = options.max_inflight_bytes;
  budget.trim_above_bytes = options.malloc_trim_above_bytes;
  budget.trim_below_bytes = options.malloc_trim_above_bytes / 8;
  budget.on_drained = [c = core.get()] { c->TrimHeap(); };
  core->budget_ = std::make_unique<guard::MemoryBudget>(std::move(budget));
  WorkPoolOptions pool;
  pool.threads = options.tokenization_workers;
  pool.max_queue = std::max<size_t>(options.tokenization_queue, 1);
  pool.thread_name = "tide-tok";
  auto workers = WorkPool::Create(pool);
  if (!workers.ok()) return workers.status();
  core->pool_ = *std::move(workers);
  return core;
}

void ServiceCore::Shed(const char* reason) const { metrics_->shed->WithLabels({reason})->Increment(); }

absl::StatusOr<CallPtr> ServiceCore::Admit(const CallInfo& info) {
  if (draining()) {
    Shed("draining");
    return errors::Unavailable("server is shutting down");
  }
  if (!options_.api_key.empty() && !guard::ApiKeyMatches(info.authorization, options_.api_key)) {
    return errors::Unauthenticated("missing or invalid API key (Authorization: Bearer <key>)");
  }
  std::optional<guard::ConcurrencyLimiter::Permit> permit;
  if (options_.max_concurrent_requests > 0) {
    permit = limiter_.TryAcquire();
    if (!permit.has_value()) {
      Shed("max_concurrent_requests");
      return errors::Overloaded(absl::StrCat("too many requests in flight (max_concurrent_requests=",
                                             options_.max_concurrent_requests, ")"));
    }
  }
  // An unknown model is answered here, without queueing the body.
  if (!info.model.empty()) {
    if (auto found = models_->Find(info.model, info.model_version); !found.ok()) return found.status();
  }
  const int64_t estimate = guard::EstimateRequestBytes(info.body_bytes, options_.request_memory_factor,
                                                       options_.request_memory_fixed_bytes);
  if (!budget_->Fits(estimate)) {
    Shed("max_inflight_bytes");
    return errors::PayloadTooLarge(absl::StrCat(
        "request of ", info.body_bytes, " body bytes is estimated to need ", estimate,
        " bytes while it is parsed and tokenized, more than the whole budget max_inflight_bytes=",
        budget_->capacity_bytes()));
  }
  std::optional<guard::MemoryBudget::Lease> lease = budget_->TryAcquire(estimate);
  if (!lease.has_value()) {
    Shed("max_inflight_bytes");
    return errors::Overloaded(absl::StrCat("too many request bytes in flight (max_inflight_bytes=",
                                           budget_->capacity_bytes(), "); retry later"));
  }
  auto admission = AdmissionFor(info, options_.default_timeout);
  if (!admission.ok()) return admission.status();
  auto call = std::make_shared<Call>(clock_, *std::move(admission), info.received_at, options_.default_timeout,
                                     info.timeout_us.has_value(), info.priority.has_value());
  call->permit_ = std::move(permit);
  call->lease_ = std::move(lease);
  return call;
}

void ServiceCore::Start(const CallInfo& info, Work work) {
  absl::StatusOr<CallPtr> call = Admit(info);
  if (!call.ok()) return std::move(work)(call.status());
  struct Job {
    CallPtr call;
    Work work;
  };
  auto job = std::make_shared<Job>(Job{*std::move(call), std::move(work)});
  WorkPool::Task task = [job]() {
    // A call that waited for a worker past its deadline, or whose client left, is not parsed.
    if (absl::Status s = job->call->StillWanted("waiting for a tokenization worker"); !s.ok()) {
      return std::move(job->work)(s);
    }
    std::move(job->work)(std::move(job->call));
  };
  const WorkPool::Lane lane =
      info.body_bytes <= options_.light_body_bytes ? WorkPool::Lane::kLight : WorkPool::Lane::kHeavy;
  if (absl::Status s = pool_->Submit(task, lane); !s.ok()) {
    if (s.code() == absl::StatusCode::kResourceExhausted) {
      Shed("tokenization_queue");
      s = errors::Overloaded(s.message());
    }
    job->call.reset();  // the permit and the lease go back before the refusal is answered
    std::move(job->work)(s);
  }
}

absl::StatusOr<std::shared_ptr<ServedModel>> ServiceCore::FindModel(std::string_view name,
                                                                    std::string_view version) const {
  if (name.empty()) return models_->Default();
  return models_->Find(name, version);
}

void ServiceCore::Rerank(const CallPtr& call, std::shared_ptr<ServedModel> model, std::string_view query,
                         std::span<const std::string_view> documents, const PairOptions& options, bool raw_scores,
                         RerankDone done) {
  ScoreOrFallback(
      std::move(model), call->admission(), query, documents, options, raw_scores, metrics_,
      [&call] { return call->StillWanted("tokenizing"); },
      [call, done = std::move(done)](absl::StatusOr<RerankScores> scores) mutable {
        std::move(done)(std::move(scores));
      });
}

void ServiceCore::Infer(const CallPtr& call, std::shared_ptr<ServedModel> model,
                        std::vector<tokenizer::Encoding> rows, InferDone done) {
  if (absl::Status s = call->StillWanted("parsing"); !s.ok()) return std::move(done)(s);
  if (!model->AdmitToModel()) {
    // Breaker open. A classifier with a breaker_default_result answers it for every row, marked
    // degraded; every other model answers 503 (tensors have no lightweight fallback).
    const std::vector<float>& row = model->parameters().breaker_default_result;
    if (row.empty()) return std::move(done)(DegradedUnavailableError(model->name()));
    metrics_->degraded->WithLabels({model->name(), std::to_string(model->version()), kFallbackDefault})->Increment();
    return std::move(done)(InferOutcome{DefaultResult(row, static_cast<int64_t>(rows.size())), kFallbackDefault});
  }
  ServedModel* m = model.get();
  m->Submit(rows, call->admission(),
            [call, model = std::move(model), done = std::move(done)](absl::StatusOr<InferenceResult> result) mutable {
              if (!result.ok()) return std::move(done)(result.status());
              std::move(done)(InferOutcome{*std::move(result), nullptr});
            });
}

absl::Status ServiceCore::Tokenize(const Call& call, const ServedModel& model, std::span<const TextInput> inputs,
                                   bool add_special_tokens, std::vector<tokenizer::Encoding>* out,
                                   std::optional<tokenizer::TruncationDirection> direction) const {
  tokenizer::EncodeOptions opts;
  opts.max_length = model.max_sequence_length();
  opts.direction = direction;
  opts.add_special_tokens = add_special_tokens;
  out->assign(inputs.size(), tokenizer::Encoding{});
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i % kTokenizeChunkDocuments == 0) {
      if (absl::Status s = call.StillWanted("tokenizing"); !s.ok()) return s;
    }
    if (absl::Status s = model.tokenizer().Encode(inputs[i].text, inputs[i].text_pair, opts, &(*out)[i]); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

bool ServiceCore::Ready() const { return !draining() && models_->AllReady(); }

ServiceCore::Load ServiceCore::CurrentLoad() const {
  Load load;
  load.ready = Ready();
  load.in_flight = limiter_.in_flight();
  load.max_concurrent_requests = limiter_.max_concurrent_requests();
  for (const auto& model : models_->All()) load.queues.push_back(model->GetStats().batcher);
  return load;
}

void ServiceCore::RefreshMetrics() const {
  models_->RefreshMetrics();
  metrics_->inflight_bytes->WithLabels({})->Set(static_cast<double>(budget_->in_flight_bytes()));
  metrics_->tokenization_queue->WithLabels({})->Set(static_cast<double>(pool_->queued()));
}

void ServiceCore::TrimHeap() {
  // glibc keeps freed chunks of its per-thread arenas; after a burst of large requests that is
  // hundreds of MB of RSS the process no longer uses (bench/results/memory-burst.txt). One trim at
  // a time, on a tokenization worker's light lane rather than on the inference thread that released
  // the last bytes; none while the pool is being destroyed (~ServiceCore resets pool_ first).
  if (pool_ == nullptr || trim_pending_.exchange(true)) return;
  WorkPool::Task task = [this] {
    malloc_trim(0);
    trim_pending_.store(false);
  };
  if (!pool_->Submit(task, WorkPool::Lane::kLight).ok()) trim_pending_.store(false);
}

}  // namespace tide::serving
