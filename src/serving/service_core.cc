#include "serving/service_core.h"

#include <malloc.h>

#include <algorithm>
#include <array>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error.h"
#include "common/error_echo.h"
#include "serving/fallback.h"
#include "serving/long_documents.h"
#include "spdlog/spdlog.h"

namespace tide::serving {

ServiceCore::ServiceCore(ModelManager* models, ServingMetrics* metrics, const ServiceCoreOptions& options)
    : models_(models),
      metrics_(metrics),
      options_(options),
      clock_(options.clock != nullptr ? options.clock : SteadyClock::Get()) {}

ServiceCore::~ServiceCore() {
  // The rollout timer's on_tick uses this core (shadow answers may keep rollouts_ alive longer).
  if (rollouts_ != nullptr) rollouts_->StopTimer();
  std::map<std::string, LaneEntry> lanes;
  {
    absl::MutexLock lock(&lanes_mu_);
    lanes.swap(lanes_);
  }
  lanes.clear();  // joins the shadow lanes' threads
  pool_.reset();
}

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
  if (options.score_cache_bytes > 0) core->cache_ = std::make_unique<ScoreCache>(options.score_cache_bytes);
  RolloutsOptions rollouts;
  rollouts.clock = core->clock_;
  rollouts.check_interval = options.rollout_check_interval;
  rollouts.on_tick = [c = core.get()] {
    c->ApplySavedRollouts();
    c->ApplyDeclaredRollouts();
    c->SyncShadowLanes();
    c->PersistRollouts();
  };
  core->rollouts_ = std::make_shared<Rollouts>(metrics, rollouts);
  if (absl::Status s = core->SetKeys(options.api_key, options.admin_api_key, options.api_keys); !s.ok()) return s;
  return core;
}

void ServiceCore::Shed(const char* reason) const { metrics_->shed->WithLabels({reason})->Increment(); }

void ServiceCore::CountKey(const guard::Tenant& tenant, const char* outcome) const {
  metrics_->key_requests->WithLabels({tenant.name(), outcome})->Increment();
}

std::shared_ptr<guard::ApiKeys> ServiceCore::Keys() const {
  absl::ReaderMutexLock lock(&keys_mu_);
  return keys_;
}

absl::Status ServiceCore::SetKeys(std::string api_key, std::string admin_api_key,
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

absl::StatusOr<std::shared_ptr<guard::Tenant>> ServiceCore::Authorize(guard::Access access,
                                                                      std::string_view authorization,
                                                                      guard::Listener listener) const {
  std::shared_ptr<guard::ApiKeys> keys = Keys();
  return guard::Authorize(keys.get(), access, authorization, options_.access, listener);
}

namespace {

int64_t CeilMs(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d + std::chrono::milliseconds(1) -
                                                               Clock::duration(1)).count();
}

}  // namespace

absl::Status ServiceCore::ChargePairs(const Call& call, size_t pairs) const {
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

absl::StatusOr<CallPtr> ServiceCore::Admit(const CallInfo& info) {
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
      return WithKeyName(errors::Overloaded(absl::StrCat("API key '", t.name(), "' has ",
                                                                 t.quota().max_concurrent,
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
  if (info.header && rollouts_->HasSticky()) {
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

void ServiceCore::Start(const CallInfo& info, Work work) { Start(info, std::move(work), nullptr); }

namespace {
std::string PairOptionsKey(const PairOptions& o);

// The score cache partition of a call's pairs (score_cache.h): its tenant's name unless shared.
std::string_view CachePartition(ScoreCacheScope scope, const Call& call) {
  if (scope == ScoreCacheScope::kShared || call.tenant() == nullptr) return {};
  return call.tenant()->name();
}
}  // namespace

std::optional<absl::StatusOr<RerankScores>> ServiceCore::RerankFromCache(const Call& call, const ServedModel& model,
                                                                         std::string_view query,
                                                                         std::span<const std::string_view> documents,
                                                                         const PairOptions& options, bool raw_scores) {
  if (cache_ == nullptr || call.no_cache() || options.long_documents != LongDocuments::kTruncate ||
      documents.empty() || rollouts_->Tracks(model.name(), model.version())) {
    return std::nullopt;
  }
  const std::string options_key = PairOptionsKey(options);
  const std::string_view partition = CachePartition(options_.score_cache_scope, call);
  const config::ScoreActivation activation = model.parameters().score_activation;
  RerankScores out;
  out.scores.reserve(documents.size());
  for (std::string_view document : documents) {
    std::optional<std::vector<float>> row =
        cache_->Lookup(ScoreCache::Key(model.generation(), partition, options_key, query, document));
    if (!row.has_value()) return std::nullopt;
    out.scores.push_back(RerankScore(*row, activation, raw_scores));
  }
  if (absl::Status s = ChargePairs(call, documents.size()); !s.ok()) return absl::StatusOr<RerankScores>(s);
  out.cache_hits = documents.size();
  call.cache_hits_.fetch_add(static_cast<int64_t>(documents.size()), std::memory_order_relaxed);
  metrics_->score_cache_hits->WithLabels({model.name(), std::to_string(model.version())})
      ->Increment(static_cast<double>(documents.size()));
  return absl::StatusOr<RerankScores>(std::move(out));
}

void ServiceCore::Start(const CallInfo& info, Work work, Attempt attempt) {
  absl::StatusOr<CallPtr> call = Admit(info);
  if (!call.ok()) return std::move(work)(call.status());
  if (attempt && cache_ != nullptr && info.body_bytes <= options_.light_body_bytes && attempt(*call)) return;
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

absl::StatusOr<std::shared_ptr<ServedModel>> ServiceCore::FindModel(const Call& call, std::string_view name,
                                                                    std::string_view version) const {
  if (!version.empty()) {
    call.named_version_.store(true, std::memory_order_relaxed);
    return FindModel(name, version);
  }
  auto model = FindModel(name);
  if (!model.ok()) return model;
  const std::string& model_name = (*model)->name();
  std::optional<int64_t> routed = rollouts_->Route(model_name, call.StickyValue(rollouts_->StickyHeaderOf(model_name)));
  if (!routed.has_value() || *routed == (*model)->version()) return model;
  auto chosen = models_->Find(model_name, std::to_string(*routed));
  // A version the rollout names that is no longer loaded: the newest answers, as without a rollout.
  return chosen.ok() ? chosen : model;
}

absl::Status ServiceCore::StartRollout(const std::string& model, const RolloutDeclaration& declaration) {
  RolloutSpec spec = declaration.spec;
  if (!declaration.stable.has_value()) {
    spec.stable = 0;
    if (std::optional<RolloutStatus> current = rollouts_->Get(model);
        current.has_value() && current->state != RolloutState::kIdle) {
      spec.stable = current->spec.stable;
    }
    if (spec.stable == 0 || spec.stable == spec.candidate) {
      spec.stable = 0;
      for (int64_t v : models_->Versions(model)) {
        if (v != spec.candidate) spec.stable = std::max(spec.stable, v);
      }
    }
    if (spec.stable == 0) {
      return errors::NotFound(
          absl::StrCat("model ", model, " has no loaded version besides the candidate ", spec.candidate));
    }
  }
  for (int64_t v : {spec.stable, spec.candidate}) {
    if (auto found = models_->Find(model, std::to_string(v)); !found.ok()) return found.status();
  }
  if (absl::Status s = rollouts_->Start(model, spec); !s.ok()) return s;
  PersistRollouts();
  SyncShadowLanes();
  return absl::OkStatus();
}

absl::Status ServiceCore::PromoteRollout(const std::string& model) {
  if (absl::Status s = rollouts_->Promote(model); !s.ok()) return s;
  PersistRollouts();
  SyncShadowLanes();  // the rollout no longer compares: its lane closes
  return absl::OkStatus();
}

absl::Status ServiceCore::RollbackRollout(const std::string& model, std::string_view reason) {
  if (absl::Status s = rollouts_->Rollback(model, reason); !s.ok()) return s;
  PersistRollouts();
  SyncShadowLanes();
  return absl::OkStatus();
}

absl::Status ServiceCore::LoadRolloutState() {
  if (options_.rollout_state_file.empty()) return absl::OkStatus();
  auto text = ReadFileIfExists(options_.rollout_state_file);
  if (!text.ok()) return text.status();
  if (!text->has_value()) {
    spdlog::info("--rollout-state-file {}: none yet; it is written on the first rollout change",
                 options_.rollout_state_file);
    return absl::OkStatus();
  }
  auto saved = ParseRolloutState(**text);
  if (!saved.ok()) {
    return absl::Status(saved.status().code(),
                        absl::StrCat("--rollout-state-file ", options_.rollout_state_file, ": ", saved.status().message()));
  }
  spdlog::info("--rollout-state-file {}: {} saved rollout(s)", options_.rollout_state_file, saved->size());
  {
    absl::MutexLock lock(&state_mu_);
    saved_ = *std::move(saved);
  }
  ApplySavedRollouts();
  return absl::OkStatus();
}

void ServiceCore::ApplySavedRollouts() {
  std::vector<SavedRollout> pending;
  {
    absl::MutexLock lock(&state_mu_);
    if (saved_.empty()) return;
    pending.swap(saved_);
  }
  std::vector<SavedRollout> later;
  bool restored = false;
  for (SavedRollout& r : pending) {
    // A rollout the model's newest version declares in config.pbtxt wins over the saved one.
    std::shared_ptr<ServedModel> newest;
    for (const auto& m : models_->All()) {
      if (m->name() == r.model && (newest == nullptr || m->version() > newest->version())) newest = m;
    }
    if (newest != nullptr && !newest->parameters().rollout.empty()) {
      spdlog::info("model {}: its config.pbtxt declares a rollout; the saved one is not restored", EscapeForLog(r.model));
      continue;
    }
    const bool loaded = models_->Find(r.model, std::to_string(r.spec.stable)).ok() &&
                        models_->Find(r.model, std::to_string(r.spec.candidate)).ok() &&
                        (r.promoted_from == 0 || models_->Find(r.model, std::to_string(r.promoted_from)).ok() ||
                         r.state != RolloutState::kPromoted);
    if (!loaded) {
      later.push_back(std::move(r));  // the versions may still be loading (poll, explicit): next tick
      continue;
    }
    if (absl::Status s = rollouts_->Restore(r.model, r.spec, r.state, r.reason, r.promoted_from); !s.ok()) {
      spdlog::error("model {}: the saved rollout was not restored: {}", EscapeForLog(r.model), EscapeForLog(s.ToString()));
      continue;
    }
    restored = true;
  }
  {
    absl::MutexLock lock(&state_mu_);
    for (SavedRollout& r : later) saved_.push_back(std::move(r));
  }
  if (restored) SyncShadowLanes();
}

void ServiceCore::PersistRollouts() {
  if (options_.rollout_state_file.empty()) return;
  absl::MutexLock lock(&state_mu_);
  const uint64_t changes = rollouts_->changes();
  if (persisted_once_ && changes == persisted_changes_) return;
  if (!persisted_once_ && changes == 0) return;  // nothing ever changed: keep the file as it is
  std::vector<SavedRollout> all;
  for (const std::string& model : rollouts_->Models()) {
    std::optional<RolloutStatus> st = rollouts_->Get(model);
    if (!st.has_value()) continue;
    all.push_back({model, st->spec, st->state, st->reason, st->promoted_from});
  }
  // Saved rollouts still waiting for their versions stay in the file.
  for (const SavedRollout& r : saved_) {
    if (std::none_of(all.begin(), all.end(), [&](const SavedRollout& a) { return a.model == r.model; })) all.push_back(r);
  }
  if (absl::Status s = WriteFileAtomically(options_.rollout_state_file, RolloutStateJson(all)); !s.ok()) {
    spdlog::error("--rollout-state-file: {}", EscapeForLog(s.ToString()));
    return;
  }
  persisted_changes_ = changes;
  persisted_once_ = true;
}

void ServiceCore::ApplyDeclaredRollouts() {
  // The newest version's declaration of each model.
  std::map<std::string, std::pair<int64_t, std::string>> declared;
  for (const auto& m : models_->All()) {
    auto& [version, text] = declared[m->name()];
    if (m->version() >= version) {
      version = m->version();
      text = m->parameters().rollout;
    }
  }
  for (const auto& [model, entry] : declared) {
    const std::string& text = entry.second;
    {
      absl::MutexLock lock(&declared_mu_);
      auto it = declared_.find(model);
      if (text.empty() || (it != declared_.end() && it->second == text)) continue;
    }
    auto declaration = ParseRolloutJson(text);
    absl::Status s = declaration.ok() ? StartRollout(model, *declaration) : declaration.status();
    if (!s.ok() && absl::IsNotFound(s)) continue;  // the candidate may still be loading: next tick
    absl::MutexLock lock(&declared_mu_);
    declared_[model] = text;
    if (s.ok()) {
      spdlog::info("model {}: started the rollout its config.pbtxt declares", EscapeForLog(model));
    } else {
      spdlog::error("model {}: the rollout its config.pbtxt declares was not started: {}", EscapeForLog(model),
                    EscapeForLog(s.ToString()));
    }
  }
}

namespace {

// Whether an answer counts for or against a version in its rollout: client mistakes, overload,
// deadlines and cancellations say nothing about the version and are not counted.
std::optional<bool> RolloutOutcome(const absl::Status& status, bool degraded) {
  if (status.ok()) return !degraded;
  switch (KindOf(status)) {
    case ErrorKind::kBackend:
    case ErrorKind::kInternal:
    case ErrorKind::kUnavailable: return false;
    default: return std::nullopt;
  }
}

// The tokenization options that change a pair's model input, as part of a score cache key.
std::string PairOptionsKey(const PairOptions& o) {
  std::string key;
  key.push_back(o.truncate ? 't' : 'f');
  key.push_back(!o.direction.has_value() ? 'u' : (*o.direction == tokenizer::TruncationDirection::kLeft ? 'l' : 'r'));
  // (Windows of long documents are keyed by their own text, so the chunking mode needs no place.)
  if (o.max_tokens_per_doc.has_value()) key.append(std::to_string(*o.max_tokens_per_doc));
  return key;
}

}  // namespace

// The two answers of a compared request; whichever arrives second compares them.
struct RolloutComparison {
  std::shared_ptr<Rollouts> rollouts;
  std::string model;
  bool live_is_stable = true;
  absl::Mutex mu;
  std::optional<std::vector<float>> live ABSL_GUARDED_BY(mu);
  std::optional<std::vector<float>> other ABSL_GUARDED_BY(mu);
  int arrived ABSL_GUARDED_BY(mu) = 0;

  // `scores` null: that side failed (nothing is compared).
  void Offer(bool is_live, const std::vector<float>* scores) {
    std::vector<float> a, b;
    {
      absl::MutexLock lock(&mu);
      if (scores != nullptr) (is_live ? live : other) = *scores;
      if (++arrived < 2 || !live.has_value() || !other.has_value()) return;
      a = std::move(*live);
      b = std::move(*other);
    }
    if (live_is_stable) {
      rollouts->RecordComparison(model, a, b);
    } else {
      rollouts->RecordComparison(model, b, a);
    }
  }
};

// A rollout's other version scores the live request's rows on its shadow lane: the comparison
// both answers go to, or null (counted) when the lane did not take the job. `fold`: the rows are
// windows of long documents (KServe), folded per input before comparing.
std::shared_ptr<RolloutComparison> ServiceCore::OfferShadow(const std::string& name, int64_t other_version,
                                                            bool live_is_stable, ShadowJob job, TensorWindows fold) {
  metrics::Family<metrics::Counter>* counted = metrics_->rollout_shadow;
  auto count = [counted, name](std::string_view outcome) {
    if (counted != nullptr) counted->WithLabels({name, std::string(outcome)})->Increment();
  };
  auto compare = std::make_shared<RolloutComparison>();
  compare->rollouts = rollouts_;
  compare->model = name;
  compare->live_is_stable = live_is_stable;
  // Runs on the lane's reporter thread (normal priority), never on its idle worker.
  job.done = [rollouts = rollouts_, name, other_version, live_is_stable, compare, count,
              fold = std::move(fold)](absl::StatusOr<ShadowOutcome> scored) mutable {
    if (scored.ok()) {
      count("scored");
      // A shadow answer is all the candidate has to show; a canary duplicate on the stable
      // version would only blur the stable version's figures. Its time is a latency sample
      // only when no live row contended with it (idle-priority time is not the model's).
      if (live_is_stable) {
        rollouts->RecordOutcome(name, other_version, true,
                                scored->contended ? std::nullopt : std::optional<Clock::duration>(scored->run_time));
      }
      if (fold.split()) scored->scores = FoldWindowScores(fold.mode, fold.owner, scored->scores, fold.inputs);
      compare->Offer(false, &scored->scores);
      return;
    }
    switch (scored.status().code()) {
      case absl::StatusCode::kUnavailable: count("dropped_live_waiting"); break;
      case absl::StatusCode::kDeadlineExceeded: count("dropped_deadline"); break;
      case absl::StatusCode::kCancelled: count("dropped_closed"); break;
      // Its batch stopped for live rows (shadow_lane.h): dropped, never the version's error.
      case absl::StatusCode::kAborted: count("preempted"); break;
      default:
        count("failed");
        if (live_is_stable) rollouts->RecordOutcome(name, other_version, false, std::nullopt);
    }
    compare->Offer(false, nullptr);
  };
  ShadowLane::Refusal refusal = ShadowLane::Refusal::kNotReady;
  {
    absl::ReaderMutexLock lock(&lanes_mu_);
    auto it = lanes_.find(name);
    if (it != lanes_.end() && it->second.wanted.scored == other_version) {
      refusal = it->second.lane->Offer(std::move(job));
    }
  }
  if (refusal != ShadowLane::Refusal::kNone) {
    count(absl::StrCat("dropped_", std::string(ShadowRefusalName(refusal))));
    return nullptr;
  }
  return compare;
}

void ServiceCore::Rerank(const CallPtr& call, std::shared_ptr<ServedModel> model, std::string_view query,
                         std::span<const std::string_view> documents, const PairOptions& options, bool raw_scores,
                         RerankDone done) {
  const std::string name = model->name();
  const int64_t version = model->version();
  if (!rollouts_->Tracks(name, version)) {
    return RerankLive(call, std::move(model), query, documents, options, raw_scores, std::move(done));
  }
  // The other version scores the same pairs when the rollout asks for it, on its shadow lane.
  // A call that named its version bypasses the rollout: its answer is recorded, never compared.
  bool live_is_stable = true;
  std::optional<int64_t> other_version;
  if (!call->named_version()) {
    other_version = rollouts_->ShadowOf(name, version);
    if (!other_version.has_value()) {
      other_version = rollouts_->DuplicateOf(name, version);
      live_is_stable = false;
    }
  }
  std::shared_ptr<RolloutComparison> compare;
  // Set once this request's live rows are queued: its shadow starts after them, so that their
  // arrival does not stop it (ServedModel::live_preemption).
  auto live_submitted = std::make_shared<std::atomic<bool>>(false);
  if (other_version.has_value()) {
    ShadowJob job;
    job.query = std::string(query);
    job.documents.assign(documents.begin(), documents.end());
    job.options = options;  // long documents: split and folded on the lane, compared per document
    job.raw_scores = raw_scores;
    job.deadline = call->admission().deadline;
    job.live_submitted = live_submitted;
    compare = OfferShadow(name, *other_version, live_is_stable, std::move(job), {});
  }
  const Clock::time_point start = clock_->Now();
  RerankLive(call, std::move(model), query, documents, options, raw_scores,
             [rollouts = rollouts_, clock = clock_, name, version, start, compare,
              done = std::move(done)](absl::StatusOr<RerankScores> scores) mutable {
               const bool degraded = scores.ok() && scores->fallback != nullptr;
               if (auto ok = RolloutOutcome(scores.status(), degraded); ok.has_value()) {
                 rollouts->RecordOutcome(name, version, *ok, clock->Now() - start);
               }
               if (compare != nullptr) compare->Offer(true, scores.ok() && !degraded ? &scores->scores : nullptr);
               std::move(done)(std::move(scores));
             });
  live_submitted->store(true, std::memory_order_release);
}

void ServiceCore::SyncShadowLanes() {
  absl::MutexLock sync(&sync_mu_);  // the only writer of lanes_
  auto find = [this](const std::string& model, int64_t version) -> std::shared_ptr<ServedModel> {
    auto found = models_->Find(model, std::to_string(version));
    return found.ok() ? *std::move(found) : nullptr;
  };
  auto gen = [](const std::shared_ptr<ServedModel>& m) -> uint64_t { return m != nullptr ? m->generation() : 0; };
  // What should be open now, with the versions' current objects.
  std::map<std::string, LaneEntry> wanted;
  std::map<std::string, std::array<std::shared_ptr<ServedModel>, 3>> served;
  for (const Rollouts::LaneWanted& w : rollouts_->ShadowLanesWanted()) {
    std::array<std::shared_ptr<ServedModel>, 3> v = {find(w.model, w.scored), find(w.model, w.stable),
                                                     find(w.model, w.candidate)};
    if (v[0] == nullptr || v[1] == nullptr || v[2] == nullptr) continue;
    LaneEntry& e = wanted[w.model];
    e.wanted = w;
    e.scored_generation = gen(v[0]);
    e.stable_generation = gen(v[1]);
    e.candidate_generation = gen(v[2]);
    served[w.model] = std::move(v);
  }
  auto same = [](const LaneEntry& a, const LaneEntry& b) {
    return a.wanted.scored == b.wanted.scored && a.wanted.stable == b.wanted.stable &&
           a.wanted.candidate == b.wanted.candidate && a.scored_generation == b.scored_generation &&
           a.stable_generation == b.stable_generation && a.candidate_generation == b.candidate_generation;
  };
  std::set<std::string> kept;
  {
    absl::ReaderMutexLock lock(&lanes_mu_);
    for (const auto& [model, entry] : lanes_) {
      auto it = wanted.find(model);
      if (it != wanted.end() && same(it->second, entry)) {
        kept.insert(model);
        wanted.erase(it);
      }
    }
  }
  // What is left in `wanted` gets a new lane (its backend opens on the lane's own idle thread).
  for (auto& [model, entry] : wanted) {
    auto& [scored, stable, candidate] = served[model];
    ShadowLaneOptions lo;
    // Live rows waiting for either version: the lane yields (both share the CPU with it).
    lo.live_waiting = [stable = stable, candidate = candidate] {
      return stable->QueuedRows() > 0 || candidate->QueuedRows() > 0;
    };
    // ... and starts a batch only once both were idle for the hold-off ...
    lo.live_idle_for = [stable = stable, candidate = candidate](Clock::duration quiet) {
      return stable->LiveIdleFor(quiet) && candidate->LiveIdleFor(quiet);
    };
    lo.hold_off = options_.shadow_hold_off;
    // ... and their live rows stop its running batch at once.
    lo.preempted_by = {stable, candidate};
    lo.max_queued_jobs = std::max<size_t>(options_.shadow_max_queued_jobs, 1);
    lo.max_yield = options_.shadow_max_yield;
    lo.idle_scheduling = options_.shadow_idle_scheduling;
    lo.nice = options_.shadow_nice;
    lo.clock = clock_;
    entry.lane = ShadowLane::Create(scored, std::move(lo));
  }
  std::vector<std::unique_ptr<ShadowLane>> closed;
  {
    absl::MutexLock lock(&lanes_mu_);
    for (auto it = lanes_.begin(); it != lanes_.end();) {
      if (!kept.contains(it->first)) {
        closed.push_back(std::move(it->second.lane));
        it = lanes_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto& [model, entry] : wanted) lanes_[model] = std::move(entry);
  }
  for (auto& lane : closed) {
    spdlog::info("model {} version {}: shadow lane closed", EscapeForLog(lane->model().name()), lane->model().version());
  }
  closed.clear();  // joins the lanes' threads, outside every lock live requests take
}

std::optional<ShadowLane::Stats> ServiceCore::ShadowLaneStats(const std::string& model) const {
  absl::ReaderMutexLock lock(&lanes_mu_);
  auto it = lanes_.find(model);
  if (it == lanes_.end()) return std::nullopt;
  return it->second.lane->GetStats();
}

bool ServiceCore::ShadowLaneReady(const std::string& model, int64_t version) const {
  absl::ReaderMutexLock lock(&lanes_mu_);
  auto it = lanes_.find(model);
  return it != lanes_.end() && it->second.wanted.scored == version && it->second.lane->ready();
}

void ServiceCore::RerankLive(const CallPtr& call, std::shared_ptr<ServedModel> model, std::string_view query,
                             std::span<const std::string_view> documents, const PairOptions& options, bool raw_scores,
                             RerankDone done) {
  if (options.long_documents == LongDocuments::kTruncate) {
    if (absl::Status s = ChargePairs(*call, documents.size()); !s.ok()) return std::move(done)(s);
    return RerankRows(call, std::move(model), query, documents, options, raw_scores, std::move(done));
  }
  // Long documents scored whole: every window is a row; its scores fold back into the document's.
  if (absl::Status s = call->StillWanted("tokenizing"); !s.ok()) return std::move(done)(s);
  DocumentWindows split;
  if (absl::Status s = SplitLongDocuments(*model, query, documents, ChunkOptionsFor(*model, options.long_documents), &split);
      !s.ok()) {
    return std::move(done)(s);
  }
  // Windows count toward the key's pairs quota (and, as rows, toward every queue bound).
  if (absl::Status s = ChargePairs(*call, split.windows.size()); !s.ok()) return std::move(done)(s);
  if (!split.split) return RerankRows(call, std::move(model), query, documents, options, raw_scores, std::move(done));
  RerankRows(call, std::move(model), query, split.windows, options, raw_scores,
             [done = std::move(done), owner = std::move(split.owner), mode = options.long_documents,
              n = documents.size()](absl::StatusOr<RerankScores> rows) mutable {
               if (!rows.ok()) return std::move(done)(rows.status());
               rows->scores = FoldWindowScores(mode, owner, rows->scores, n);
               rows->logits.clear();  // per window; the document scores are folded
               std::move(done)(std::move(rows));
             });
}

void ServiceCore::RerankRows(const CallPtr& call, std::shared_ptr<ServedModel> model, std::string_view query,
                             std::span<const std::string_view> documents, const PairOptions& options, bool raw_scores,
                             RerankDone done) {
  auto between_chunks = [&call] { return call->StillWanted("tokenizing"); };
  if (cache_ == nullptr) {
    return ScoreOrFallback(std::move(model), call->admission(), query, documents, options, raw_scores, metrics_,
                           between_chunks, [call, done = std::move(done)](absl::StatusOr<RerankScores> s) mutable {
                             std::move(done)(std::move(s));
                           });
  }
  // Split the pairs into those the cache has and those the model must score.
  const size_t n = documents.size();
  const std::string options_key = PairOptionsKey(options);
  std::vector<std::string> keys(n);
  std::vector<std::optional<std::vector<float>>> cached(n);
  std::vector<size_t> missing;
  std::vector<std::string_view> missing_docs;
  for (size_t i = 0; i < n; ++i) {
    keys[i] = ScoreCache::Key(model->generation(), CachePartition(options_.score_cache_scope, *call), options_key,
                              query, documents[i]);
    if (!call->no_cache()) cached[i] = cache_->Lookup(keys[i]);
    if (!cached[i].has_value()) {
      missing.push_back(i);
      missing_docs.push_back(documents[i]);
    }
  }
  const size_t hits = n - missing.size();
  call->cache_hits_.fetch_add(static_cast<int64_t>(hits), std::memory_order_relaxed);
  if (!call->no_cache()) {
    const std::string version = std::to_string(model->version());
    metrics_->score_cache_hits->WithLabels({model->name(), version})->Increment(static_cast<double>(hits));
    metrics_->score_cache_misses->WithLabels({model->name(), version})->Increment(static_cast<double>(missing.size()));
  }
  const config::ScoreActivation activation = model->parameters().score_activation;
  // Fills `out` with the cached rows (and the model's, already in out) for every document.
  auto merge = [hits, activation, raw_scores](std::vector<std::optional<std::vector<float>>>& rows,
                                               RerankScores& out) {
    out.scores.resize(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      if (!rows[i].has_value()) continue;
      out.scores[i] = RerankScore(*rows[i], activation, raw_scores);
    }
    out.cache_hits = hits;
  };
  if (missing.empty()) {
    RerankScores out;
    merge(cached, out);
    return std::move(done)(std::move(out));
  }
  // The fallback answers synchronously, while `query` and `documents` are still valid.
  auto in_call = std::make_shared<std::atomic<bool>>(true);
  ScoreOrFallback(
      model, call->admission(), query, missing_docs, options, raw_scores, metrics_, between_chunks,
      [call, done = std::move(done), cache = cache_.get(), model, keys = std::move(keys), cached = std::move(cached),
       missing = std::move(missing), merge, in_call, query, documents,
       raw_scores](absl::StatusOr<RerankScores> sub) mutable {
        if (!sub.ok()) return std::move(done)(sub.status());
        if (sub->fallback != nullptr) {
          if (missing.size() == cached.size()) return std::move(done)(std::move(sub));
          // Degraded answers are degraded for every document: never cached model scores beside BM25.
          if (!in_call->load()) return std::move(done)(errors::Internal("fallback answered after the call"));
          auto all = FallbackScores(*model, query, documents, raw_scores);
          if (!all.ok()) return std::move(done)(all.status());
          all->timings = sub->timings;
          return std::move(done)(*std::move(all));
        }
        const size_t labels = static_cast<size_t>(sub->num_labels);
        for (size_t j = 0; j < missing.size(); ++j) {
          std::vector<float> row(sub->logits.begin() + j * labels, sub->logits.begin() + (j + 1) * labels);
          cache->Insert(std::move(keys[missing[j]]), row);
          cached[missing[j]] = std::move(row);
        }
        RerankScores out;
        out.real_tokens = sub->real_tokens;
        out.timings = sub->timings;
        out.num_labels = sub->num_labels;
        merge(cached, out);
        std::move(done)(std::move(out));
      });
  in_call->store(false);
}

void ServiceCore::Infer(const CallPtr& call, std::shared_ptr<ServedModel> model,
                        std::vector<tokenizer::Encoding> rows, InferDone done, TensorWindows windows) {
  if (absl::Status s = call->StillWanted("parsing"); !s.ok()) return std::move(done)(s);
  if (absl::Status s = ChargePairs(*call, rows.size()); !s.ok()) return std::move(done)(s);
  if (!model->AdmitToModel()) {
    // Breaker open. A classifier with a breaker_default_result answers it for every row, marked
    // degraded; every other model answers 503 (tensors have no lightweight fallback).
    const std::vector<float>& row = model->parameters().breaker_default_result;
    if (row.empty()) return std::move(done)(DegradedUnavailableError(model->name()));
    metrics_->degraded->WithLabels({model->name(), std::to_string(model->version()), kFallbackDefault})->Increment();
    return std::move(done)(InferOutcome{DefaultResult(row, static_cast<int64_t>(rows.size())), kFallbackDefault});
  }
  ServedModel* m = model.get();
  std::shared_ptr<Rollouts> rollouts;
  if (rollouts_->Tracks(m->name(), m->version())) rollouts = rollouts_;
  // A reranker's rows, compared as one ranked list (per input when long documents were split)
  // with the other version's scores of the same rows on its shadow lane.
  std::shared_ptr<RolloutComparison> compare;
  auto live_submitted = std::make_shared<std::atomic<bool>>(false);
  if (rollouts != nullptr && m->num_labels() == 1 && !call->named_version()) {
    bool live_is_stable = true;
    std::optional<int64_t> other_version = rollouts_->ShadowOf(m->name(), m->version());
    if (!other_version.has_value()) {
      other_version = rollouts_->DuplicateOf(m->name(), m->version());
      live_is_stable = false;
    }
    if (other_version.has_value()) {
      // The rows were encoded for this version: the other one must read the same ids and fit them.
      auto other = models_->Find(m->name(), std::to_string(*other_version));
      size_t longest = 0;
      for (const tokenizer::Encoding& e : rows) longest = std::max(longest, e.ids.size());
      if (!other.ok() || (*other)->num_labels() != 1 ||
          (*other)->tokenizer().vocab_size() != m->tokenizer().vocab_size() ||
          longest > (*other)->max_sequence_length()) {
        if (metrics_->rollout_shadow != nullptr) {
          metrics_->rollout_shadow->WithLabels({m->name(), "dropped_incompatible"})->Increment();
        }
      } else {
        ShadowJob job;
        job.rows = rows;
        job.raw_scores = true;
        job.deadline = call->admission().deadline;
        job.live_submitted = live_submitted;
        compare = OfferShadow(m->name(), *other_version, live_is_stable, std::move(job), windows);
      }
    }
  }
  m->Submit(rows, call->admission(),
            [call, model = std::move(model), done = std::move(done), rollouts, clock = clock_,
             start = clock_->Now(), compare, windows = std::move(windows)](absl::StatusOr<InferenceResult> result) mutable {
              if (rollouts != nullptr) {
                if (auto ok = RolloutOutcome(result.status(), false); ok.has_value()) {
                  rollouts->RecordOutcome(model->name(), model->version(), *ok, clock->Now() - start);
                }
              }
              if (compare != nullptr) {
                if (!result.ok()) {
                  compare->Offer(true, nullptr);
                } else {
                  // The raw logit of every row (one label), folded per input as the edge will.
                  std::vector<float> scores(result->logits.begin(), result->logits.end());
                  if (windows.split()) scores = FoldWindowScores(windows.mode, windows.owner, scores, windows.inputs);
                  compare->Offer(true, &scores);
                }
              }
              if (!result.ok()) return std::move(done)(result.status());
              std::move(done)(InferOutcome{*std::move(result), nullptr});
            });
  live_submitted->store(true, std::memory_order_release);
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
  if (cache_ != nullptr) {
    absl::MutexLock lock(&refresh_mu_);
    const uint64_t evictions = cache_->evictions();
    metrics_->score_cache_evictions->WithLabels({})->Increment(static_cast<double>(evictions - mirrored_evictions_));
    mirrored_evictions_ = evictions;
    metrics_->score_cache_bytes->WithLabels({})->Set(static_cast<double>(cache_->bytes()));
  }
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
