#include "serving/admission.h"

#include <malloc.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error.h"

namespace tide::serving {

Admission::Admission(ModelManager* models, ServingMetrics* metrics, const AdmissionOptions& options,
                     const Clock* clock, const RolloutHook* rollouts)
    : models_(models),
      metrics_(metrics),
      options_(options),
      clock_(clock != nullptr ? clock : SteadyClock::Get()),
      rollouts_(rollouts) {}

Admission::~Admission() { pool_.reset(); }

absl::StatusOr<std::unique_ptr<Admission>> Admission::Create(ModelManager* models, ServingMetrics* metrics,
                                                             const AdmissionOptions& options, const Clock* clock,
                                                             const RolloutHook* rollouts) {
  if (models == nullptr || metrics == nullptr) return absl::InvalidArgumentError("models and metrics are required");
  std::unique_ptr<Admission> a(new Admission(models, metrics, options, clock, rollouts));
  guard::MemoryBudget::Options budget;
  budget.capacity_bytes = options.max_inflight_bytes;
  budget.trim_above_bytes = options.malloc_trim_above_bytes;
  budget.trim_below_bytes = options.malloc_trim_above_bytes / 8;
  budget.on_drained = [p = a.get()] { p->TrimHeap(); };
  a->budget_ = std::make_unique<guard::MemoryBudget>(std::move(budget));
  WorkPoolOptions pool;
  pool.threads = options.tokenization_workers;
  pool.max_queue = std::max<size_t>(options.tokenization_queue, 1);
  pool.thread_name = "tide-tok";
  auto workers = WorkPool::Create(pool);
  if (!workers.ok()) return workers.status();
  a->pool_ = *std::move(workers);
  if (absl::Status s = a->SetKeys(options.api_key, options.admin_api_key, options.api_keys); !s.ok()) return s;
  return a;
}

// ---- A call's way in: Start, then Admit's steps in the documented order.

void Admission::Start(const CallInfo& info, Work work, Attempt attempt) {
  absl::StatusOr<CallPtr> call = Admit(info);
  if (!call.ok()) return std::move(work)(call.status());
  if (attempt && info.body_bytes <= options_.light_body_bytes && attempt(*call)) return;
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

namespace {

int64_t CeilMs(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d + std::chrono::milliseconds(1) -
                                                               Clock::duration(1)).count();
}

}  // namespace

absl::StatusOr<CallPtr> Admission::Admit(const CallInfo& info) {
  if (draining()) {
    Shed("draining");
    return errors::Unavailable("server is shutting down");
  }
  // The tenant the call runs as: the access table gives every admitted route the tenant role.
  auto tenant = Authorize(guard::Access::kTenant, info.authorization);
  if (!tenant.ok()) return tenant.status();
  std::optional<guard::ConcurrencyLimiter::Permit> tenant_permit;
  if (*tenant != nullptr) {
    guard::Tenant& t = **tenant;
    // In flight first, so that a call refused for it spends none of the key's rate.
    tenant_permit = t.concurrency().TryAcquire();
    if (!tenant_permit.has_value()) {
      CountKey(t, "over_concurrency");
      Shed("key_quota");
      return WithKeyName(errors::Overloaded(absl::StrCat("API key '", t.name(), "' has ", t.quota().max_concurrent,
                                                         " requests in flight (its max_concurrent)")),
                         t.name());
    }
    if (const Clock::duration wait = t.requests().TryTake(1); wait > Clock::duration::zero()) {
      CountKey(t, "over_requests");
      Shed("key_quota");
      return WithKeyName(
          WithRetryAfter(errors::Overloaded(absl::StrCat("API key '", t.name(), "' is over its quota of ",
                                                         t.quota().requests_per_second,
                                                         " requests per second; retry later")),
                         CeilMs(wait)),
          t.name());
    }
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
  CallInfo admitted = info;
  // A tenant asks for at most its max_priority (guard::ClampPriority); without keys, as asked.
  if (admitted.priority.has_value() && *tenant != nullptr && *admitted.priority >= 0) {
    admitted.priority = guard::ClampPriority(tenant->get(), *admitted.priority);
  }
  auto admission = AdmissionFor(admitted, options_.default_timeout);
  if (!admission.ok()) return admission.status();
  auto call = std::make_shared<Call>(clock_, *std::move(admission), info.received_at, options_.default_timeout,
                                     info.timeout_us.has_value(), info.priority.has_value());
  call->no_cache_ = info.no_cache;
  if (info.header && rollouts_ != nullptr) {
    for (std::string& name : rollouts_->StickyHeaders()) {
      std::string value(info.header(name));
      if (!value.empty()) call->sticky_values_.emplace_back(std::move(name), std::move(value));
    }
  }
  call->tenant_ = *std::move(tenant);
  call->tenant_permit_ = std::move(tenant_permit);
  call->permit_ = std::move(permit);
  call->lease_ = std::move(lease);
  if (call->tenant_ != nullptr) CountKey(*call->tenant_, "admitted");
  return call;
}

// ---- Keys and quotas.

std::shared_ptr<guard::ApiKeys> Admission::Keys() const {
  absl::ReaderMutexLock lock(&keys_mu_);
  return keys_;
}

absl::Status Admission::SetKeys(std::string api_key, std::string admin_api_key,
                                std::shared_ptr<guard::ApiKeys> file_keys) {
  std::shared_ptr<guard::ApiKeys> keys = std::move(file_keys);
  if (!api_key.empty()) {
    auto with = guard::ApiKeys::WithKey(keys, api_key, "default", guard::kRoleTenant, "--api-key", clock_);
    if (!with.ok()) return with.status();
    keys = *std::move(with);
  }
  if (!admin_api_key.empty()) {
    auto with = guard::ApiKeys::WithKey(keys, admin_api_key, "admin", guard::kRoleAdmin, "--admin-api-key", clock_);
    if (!with.ok()) return with.status();
    keys = *std::move(with);
  }
  absl::MutexLock lock(&keys_mu_);
  keys_ = std::move(keys);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<guard::Tenant>> Admission::Authorize(guard::Access access,
                                                                    std::string_view authorization,
                                                                    guard::Listener listener) const {
  std::shared_ptr<guard::ApiKeys> keys = Keys();
  return guard::Authorize(keys.get(), access, authorization, options_.access, listener);
}

absl::Status Admission::ChargePairs(const Call& call, size_t pairs) const {
  const std::shared_ptr<guard::Tenant>& tenant = call.tenant();
  if (tenant == nullptr) {
    call.pairs_.fetch_add(static_cast<int64_t>(pairs), std::memory_order_relaxed);
    return absl::OkStatus();
  }
  if (const Clock::duration wait = tenant->pairs().TryTake(static_cast<double>(pairs)); wait > Clock::duration::zero()) {
    CountKey(*tenant, "over_pairs");
    Shed("key_quota");
    return WithRetryAfter(errors::Overloaded(absl::StrCat("API key '", tenant->name(), "' is over its quota of ",
                                                          tenant->quota().pairs_per_second,
                                                          " pairs per second; retry later")),
                          CeilMs(wait));
  }
  metrics_->key_pairs->WithLabels({tenant->name()})->Increment(static_cast<double>(pairs));
  call.pairs_.fetch_add(static_cast<int64_t>(pairs), std::memory_order_relaxed);
  return absl::OkStatus();
}

// ---- Counters, gauges and the heap.

void Admission::Shed(const char* reason) const { metrics_->shed->WithLabels({reason})->Increment(); }

void Admission::CountKey(const guard::Tenant& tenant, const char* outcome) const {
  metrics_->key_requests->WithLabels({tenant.name(), outcome})->Increment();
}

void Admission::RefreshMetrics() const {
  metrics_->inflight_bytes->WithLabels({})->Set(static_cast<double>(budget_->in_flight_bytes()));
  metrics_->tokenization_queue->WithLabels({})->Set(static_cast<double>(pool_->queued()));
}

void Admission::TrimHeap() {
  // glibc keeps freed chunks of its per-thread arenas; after a burst of large requests that is
  // hundreds of MB of RSS the process no longer uses (bench/results/memory-burst.txt). One trim at
  // a time, on a tokenization worker's light lane rather than on the inference thread that released
  // the last bytes; none while the pool is being destroyed (~Admission resets pool_ first).
  if (pool_ == nullptr || trim_pending_.exchange(true)) return;
  WorkPool::Task task = [this] {
    malloc_trim(0);
    trim_pending_.store(false);
  };
  if (!pool_->Submit(task, WorkPool::Lane::kLight).ok()) trim_pending_.store(false);
}

}  // namespace tide::serving
