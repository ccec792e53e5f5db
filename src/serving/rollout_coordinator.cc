#include "serving/rollout_coordinator.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error.h"
#include "common/error_echo.h"
#include "serving/long_documents.h"
#include "spdlog/spdlog.h"

namespace tide::serving {

RolloutCoordinator::RolloutCoordinator(ModelManager* models, ServingMetrics* metrics,
                                       const RolloutCoordinatorOptions& options, const Clock* clock)
    : models_(models),
      metrics_(metrics),
      options_(options),
      clock_(clock != nullptr ? clock : SteadyClock::Get()),
      lanes_(models, ShadowLanesOptions{.idle_scheduling = options.shadow_idle_scheduling,
                                        .nice = options.shadow_nice,
                                        .max_queued_jobs = options.shadow_max_queued_jobs,
                                        .max_yield = options.shadow_max_yield,
                                        .hold_off = options.shadow_hold_off,
                                        .clock = clock_}) {
  // Last: the timer may tick as soon as Rollouts exists, and its tick uses every member above.
  RolloutsOptions rollouts;
  rollouts.clock = clock_;
  rollouts.check_interval = options.rollout_check_interval;
  rollouts.on_tick = [this] {
    ApplySavedRollouts();
    ApplyDeclaredRollouts();
    SyncShadowLanes();
    PersistRollouts();
  };
  rollouts_ = std::make_shared<Rollouts>(metrics, rollouts);
}

std::unique_ptr<RolloutCoordinator> RolloutCoordinator::Create(ModelManager* models, ServingMetrics* metrics,
                                                               const RolloutCoordinatorOptions& options,
                                                               const Clock* clock) {
  return std::unique_ptr<RolloutCoordinator>(new RolloutCoordinator(models, metrics, options, clock));
}

RolloutCoordinator::~RolloutCoordinator() { Stop(); }

void RolloutCoordinator::Stop() {
  // The timer's on_tick uses this object (shadow answers may keep rollouts_ alive longer).
  rollouts_->StopTimer();
  lanes_.CloseAll();
}

// ---- Routing: which version answers a call.

absl::StatusOr<std::shared_ptr<ServedModel>> RolloutCoordinator::Pick(const Call& call, std::string_view name,
                                                                      std::string_view version) const {
  if (!version.empty()) {
    call.named_version_.store(true, std::memory_order_relaxed);
    if (name.empty()) return models_->Default();
    return models_->Find(name, version);
  }
  auto model = name.empty() ? models_->Default() : models_->Find(name, {});
  if (!model.ok()) return model;
  const std::string& model_name = (*model)->name();
  std::optional<int64_t> routed = rollouts_->Route(model_name, call.StickyValue(rollouts_->StickyHeaderOf(model_name)));
  if (!routed.has_value() || *routed == (*model)->version()) return model;
  auto chosen = models_->Find(model_name, std::to_string(*routed));
  // A version the rollout names that is no longer loaded: the newest answers, as without a rollout.
  return chosen.ok() ? chosen : model;
}

std::vector<std::string> RolloutCoordinator::StickyHeaders() const {
  if (!rollouts_->HasSticky()) return {};
  return rollouts_->StickyHeaders();
}

bool RolloutCoordinator::Tracks(const ServedModel& model) const {
  return rollouts_->Tracks(model.name(), model.version());
}

// ---- Watching and mirroring a live answer.

namespace {

// An embedding model's rows are compared as vectors (cosine), not as one score each.
bool IsEmbedder(const ServedModel& model) { return model.parameters().task == config::Task::kEmbed; }

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

// The two answers of a compared request; whichever arrives second compares them.
struct Comparison {
  std::shared_ptr<Rollouts> rollouts;
  std::string model;
  bool live_is_stable = true;
  size_t dim = 0;  // > 0: an embedding model's vectors [rows, dim], compared by cosine
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
      rollouts->RecordComparison(model, a, b, dim);
    } else {
      rollouts->RecordComparison(model, b, a, dim);
    }
  }
};

}  // namespace

class RolloutCoordinator::Watched final : public AnswerWatch {
 public:
  std::shared_ptr<Rollouts> rollouts;
  const Clock* clock = nullptr;
  std::string model;
  int64_t version = 0;
  Clock::time_point start{};
  std::shared_ptr<Comparison> compare;  // null: not compared
  std::shared_ptr<ShadowTrace> trace;   // null: no span for the comparison (serving/shadow_trace.h)
  TensorWindows fold;                   // token rows of long documents: folded per input first
  // Set once the live rows are queued: the shadow starts after them, so that their arrival does
  // not stop it (ServedModel::live_preemption).
  std::shared_ptr<std::atomic<bool>> live_submitted = std::make_shared<std::atomic<bool>>(false);

  void Submitted() override { live_submitted->store(true, std::memory_order_release); }

  void Answered(const absl::Status& status, bool degraded, std::span<const float> scores) override {
    if (auto ok = RolloutOutcome(status, degraded); ok.has_value()) {
      rollouts->RecordOutcome(model, version, *ok, clock->Now() - start);
    }
    if (compare == nullptr || !status.ok() || degraded) {
      if (trace != nullptr) trace->Live(nullptr);
      if (compare != nullptr) compare->Offer(true, nullptr);
      return;
    }
    std::vector<float> compared(scores.begin(), scores.end());
    if (fold.split()) compared = FoldWindowScores(fold.mode, fold.owner, compared, fold.inputs);
    if (trace != nullptr) trace->Live(&compared);
    compare->Offer(true, &compared);
  }
};

std::optional<RolloutCoordinator::Other> RolloutCoordinator::OtherVersion(const std::string& model, int64_t version) {
  if (std::optional<int64_t> shadow = rollouts_->ShadowOf(model, version); shadow.has_value()) {
    return Other{*shadow, /*live_is_stable=*/true};
  }
  if (std::optional<int64_t> duplicate = rollouts_->DuplicateOf(model, version); duplicate.has_value()) {
    return Other{*duplicate, /*live_is_stable=*/false};
  }
  return std::nullopt;
}

namespace {
std::optional<std::string> TemplateSource(const ServedModel& model) {
  const auto& t = model.parameters().prompt_template;
  return t.has_value() ? std::optional<std::string>(t->source()) : std::nullopt;
}
}  // namespace

bool RolloutCoordinator::ReadsTheSameRows(const ServedModel& model, int64_t other_version,
                                          const std::vector<tokenizer::Encoding>& rows) const {
  auto other = models_->Find(model.name(), std::to_string(other_version));
  size_t longest = 0;
  for (const tokenizer::Encoding& e : rows) longest = std::max(longest, e.ids.size());
  // A reranker's rows are compared as one score each; an embedding model's as vectors of the
  // same dimension. Rows another tokenizer file or prompt template made mean other texts to it
  // (versions of different families, config/model_repository.h): those are never compared on rows.
  const bool embed = IsEmbedder(model);
  return other.ok() && IsEmbedder(**other) == embed &&
         (embed ? (*other)->num_labels() == model.num_labels() : (*other)->num_labels() == 1) &&
         (*other)->tokenizer().vocab_size() == model.tokenizer().vocab_size() &&
         (*other)->loaded()->tokenizer_digest == model.loaded()->tokenizer_digest &&
         TemplateSource(**other) == TemplateSource(model) &&
         longest <= (*other)->max_sequence_length();
}

void RolloutCoordinator::CountShadow(const std::string& model, std::string_view outcome) const {
  if (metrics_->rollout_shadow != nullptr) metrics_->rollout_shadow->WithLabels({model, std::string(outcome)})->Increment();
}

std::shared_ptr<AnswerWatch> RolloutCoordinator::Watch(const Call& call, const ServedModel& model,
                                                       const MirrorRequest& mirror) {
  const std::string& name = model.name();
  const std::optional<bool> candidate = rollouts_->IsCandidate(name, model.version());
  if (!candidate.has_value()) return nullptr;
  if (!call.named_version()) call.rollout_arm_.store(*candidate ? kArmCanary : kArmStable, std::memory_order_relaxed);
  auto watch = std::make_shared<Watched>();
  watch->rollouts = rollouts_;
  watch->clock = clock_;
  watch->model = name;
  watch->version = model.version();
  // The other version scores the same request when the rollout asks for it, on its shadow lane.
  // A call that named its version bypasses the rollout: its answer is recorded, never compared;
  // token rows are compared only for a reranker (one label) and an embedding model (its vectors).
  const bool rows = mirror.rows != nullptr;
  const bool vectors = rows && IsEmbedder(model);
  std::optional<Other> other;
  if (!call.named_version() && (!rows || vectors || model.num_labels() == 1)) {
    other = OtherVersion(name, model.version());
  }
  if (other.has_value() && rows && !ReadsTheSameRows(model, other->version, *mirror.rows)) {
    CountShadow(name, "dropped_incompatible");  // the rows were encoded for this version
    other.reset();
  }
  if (other.has_value()) {
    ShadowJob job;
    if (rows) {
      job.rows = *mirror.rows;
      job.raw_scores = true;
      job.vectors = vectors;
      if (mirror.windows != nullptr) watch->fold = *mirror.windows;
    } else {
      job.query = std::string(mirror.query);
      job.documents.assign(mirror.documents.begin(), mirror.documents.end());
      job.options = mirror.options;  // long documents: split and folded on the lane, compared per document
      job.raw_scores = mirror.raw_scores;
    }
    job.deadline = call.admission().deadline;
    job.live_submitted = watch->live_submitted;
    auto compare = std::make_shared<Comparison>();
    compare->rollouts = rollouts_;
    compare->model = name;
    compare->live_is_stable = other->live_is_stable;
    if (vectors) compare->dim = static_cast<size_t>(std::max<int64_t>(model.num_labels(), 1));
    std::shared_ptr<ShadowTrace> trace = ShadowTrace::Start(options_.shadow_trace, call, name, model.version(),
                                                            other->live_is_stable, other->version, clock_,
                                                            compare->dim);
    // Runs on the lane's reporter thread (normal priority), never on its idle worker.
    job.done = [counted = metrics_->rollout_shadow, rollouts = rollouts_, name, other = *other, compare,
                fold = watch->fold, trace](absl::StatusOr<ShadowOutcome> scored) mutable {
      std::string_view counted_as;
      auto count = [&](std::string_view outcome) {
        counted_as = outcome;
        if (counted != nullptr) counted->WithLabels({name, std::string(outcome)})->Increment();
      };
      if (scored.ok()) {
        count("scored");
        // A shadow answer is all the candidate has to show; a canary duplicate on the stable
        // version would only blur the stable version's figures. Its time is a latency sample
        // only when no live row contended with it (idle-priority time is not the model's).
        if (other.live_is_stable) {
          rollouts->RecordOutcome(name, other.version, true,
                                  scored->contended ? std::nullopt : std::optional<Clock::duration>(scored->run_time));
        }
        if (fold.split()) scored->scores = FoldWindowScores(fold.mode, fold.owner, scored->scores, fold.inputs);
        if (trace != nullptr) trace->Shadow(scored->scores, scored->run_time);
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
          if (other.live_is_stable) rollouts->RecordOutcome(name, other.version, false, std::nullopt);
      }
      if (trace != nullptr && counted_as == "failed") {
        trace->Failed(counted_as);
      } else if (trace != nullptr) {
        trace->Dropped(counted_as);
      }
      compare->Offer(false, nullptr);
    };
    if (ShadowLane::Refusal refusal = lanes_.Offer(name, other->version, std::move(job));
        refusal != ShadowLane::Refusal::kNone) {
      const std::string dropped = absl::StrCat("dropped_", std::string(ShadowRefusalName(refusal)));
      CountShadow(name, dropped);
      if (trace != nullptr) trace->Dropped(dropped);
    } else {
      watch->compare = std::move(compare);
    }
    watch->trace = std::move(trace);
  }
  watch->start = clock_->Now();
  return watch;
}

void RolloutCoordinator::SyncShadowLanes() { lanes_.Sync(rollouts_->ShadowLanesWanted()); }

// ---- The rollout API.

absl::Status RolloutCoordinator::StartRollout(const std::string& model, const RolloutDeclaration& declaration) {
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

absl::Status RolloutCoordinator::PromoteRollout(const std::string& model) {
  if (absl::Status s = rollouts_->Promote(model); !s.ok()) return s;
  PersistRollouts();
  SyncShadowLanes();  // the rollout no longer compares: its lane closes
  return absl::OkStatus();
}

absl::Status RolloutCoordinator::RollbackRollout(const std::string& model, std::string_view reason) {
  if (absl::Status s = rollouts_->Rollback(model, reason); !s.ok()) return s;
  PersistRollouts();
  SyncShadowLanes();
  return absl::OkStatus();
}

// ---- Rollouts declared in config.pbtxt.

void RolloutCoordinator::ApplyDeclaredRollouts() {
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

// ---- Persistence: --rollout-state-file.

absl::Status RolloutCoordinator::LoadRolloutState() {
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

void RolloutCoordinator::ApplySavedRollouts() {
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

void RolloutCoordinator::PersistRollouts() {
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

}  // namespace tide::serving
