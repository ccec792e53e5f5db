#include "serving/rollout.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/error.h"
#include "common/error_echo.h"
#include "spdlog/spdlog.h"

namespace tide::serving {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A stable hash of a sticky value (FNV-1a, then mixed): the same value lands on the same version
// in every process and after every restart.
uint64_t StickyHash(std::string_view value) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : value) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return SplitMix64(h);
}

// Whether a uniform 64-bit draw falls in the first `percent` of the range (basis points).
bool InShare(uint64_t draw, double percent) {
  if (percent <= 0) return false;
  if (percent >= 100) return true;
  return static_cast<double>(draw % 1000000) < percent * 10000.0;
}

// The window's size for a spec: 0 means the default; never below guard.min_requests (the guard
// needs that many answers in it).
size_t EffectiveWindow(const RolloutSpec& spec) {
  const size_t window = spec.window == 0 ? 1000 : spec.window;
  return std::max<size_t>(window, static_cast<size_t>(spec.guard.min_requests));
}

absl::Status CheckSpecBounds(const RolloutSpec& spec) {
  if (!(spec.percent >= 0 && spec.percent <= 100)) return errors::InvalidInput("percent must be within 0..100");
  if (spec.guard.min_requests < 1 || spec.guard.min_requests > static_cast<int64_t>(kMaxRolloutWindow)) {
    return errors::InvalidInput(absl::StrCat("guard.min_requests must be within 1..", kMaxRolloutWindow));
  }
  if (spec.window > kMaxRolloutWindow) {
    return errors::InvalidInput(absl::StrCat("window must be within 1..", kMaxRolloutWindow));
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view RolloutModeName(RolloutMode mode) {
  switch (mode) {
    case RolloutMode::kNone: return "none";
    case RolloutMode::kCanary: return "canary";
    case RolloutMode::kShadow: return "shadow";
  }
  return "none";
}

std::string_view RolloutStateName(RolloutState state) {
  switch (state) {
    case RolloutState::kIdle: return "idle";
    case RolloutState::kRunning: return "running";
    case RolloutState::kPromoted: return "promoted";
    case RolloutState::kRolledBack: return "rolled_back";
  }
  return "idle";
}

std::optional<RolloutMode> ParseRolloutMode(std::string_view name) {
  if (name == "none") return RolloutMode::kNone;
  if (name == "canary") return RolloutMode::kCanary;
  if (name == "shadow") return RolloutMode::kShadow;
  return std::nullopt;
}

Rollouts::Rollouts(ServingMetrics* metrics, const RolloutsOptions& options)
    : metrics_(metrics), clock_(options.clock != nullptr ? options.clock : SteadyClock::Get()), options_(options) {
  if (options_.check_interval > std::chrono::milliseconds::zero()) timer_ = std::thread([this] { TimerLoop(); });
}

Rollouts::~Rollouts() { StopTimer(); }

void Rollouts::StopTimer() {
  {
    absl::MutexLock lock(&stop_mu_);
    stop_ = true;
  }
  stop_cv_.SignalAll();
  if (timer_.joinable() && timer_.get_id() != std::this_thread::get_id()) timer_.join();
}

void Rollouts::TimerLoop() {
  // The steady clock, not clock_: the timer bounds how late a rollback may come in real time.
  absl::MutexLock lock(&stop_mu_);
  while (!stop_) {
    stop_cv_.WaitWithTimeout(&stop_mu_, absl::FromChrono(options_.check_interval));
    if (stop_) break;
    stop_mu_.Unlock();
    if (options_.on_tick) options_.on_tick();
    CheckGuards();
    stop_mu_.Lock();
  }
}

absl::Status Rollouts::Start(const std::string& model, const RolloutSpec& spec) {
  if (spec.candidate == spec.stable) {
    return errors::InvalidInput(absl::StrCat("candidate and stable are the same version (", spec.stable, ")"));
  }
  if (absl::Status s = CheckSpecBounds(spec); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  Entry& e = rollouts_[model];  // a new rollout starts with empty windows
  e.spec = spec;
  e.reason.clear();
  e.spec.window = EffectiveWindow(spec);
  e.stable.Reset(e.spec.window);
  e.candidate.Reset(e.spec.window);
  e.comparisons.Reset(e.spec.window);
  e.state = spec.mode == RolloutMode::kNone ? RolloutState::kIdle : RolloutState::kRunning;
  bool sticky = false;
  for (const auto& [name, r] : rollouts_) sticky = sticky || !r.spec.sticky_header.empty();
  has_sticky_.store(sticky);
  spdlog::info("rollout of model {}: stable {} candidate {} mode {} percent {}", EscapeForLog(model), spec.stable,
               spec.candidate,
               RolloutModeName(spec.mode), spec.percent);
  ExportState(model, e);
  return absl::OkStatus();
}

absl::Status Rollouts::Restore(const std::string& model, const RolloutSpec& spec, RolloutState state,
                               std::string reason, int64_t promoted_from) {
  // A promoted rollout's stable version is its candidate: only a running one needs two versions.
  if (spec.candidate == spec.stable && state != RolloutState::kPromoted) {
    return errors::InvalidInput(absl::StrCat("candidate and stable are the same version (", spec.stable, ")"));
  }
  if (absl::Status s = CheckSpecBounds(spec); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  Entry& e = rollouts_[model];
  e = Entry{};
  e.spec = spec;
  e.spec.window = EffectiveWindow(spec);
  e.stable.Reset(e.spec.window);
  e.candidate.Reset(e.spec.window);
  e.comparisons.Reset(e.spec.window);
  e.state = state;
  e.reason = std::move(reason);
  e.promoted_from = state == RolloutState::kPromoted ? promoted_from : 0;
  bool sticky = false;
  for (const auto& [name, r] : rollouts_) sticky = sticky || !r.spec.sticky_header.empty();
  has_sticky_.store(sticky);
  spdlog::info("rollout of model {}: restored as {} (stable {} candidate {})", EscapeForLog(model), RolloutStateName(state),
               spec.stable, spec.candidate);
  ExportState(model, e);
  return absl::OkStatus();
}

std::vector<std::string> Rollouts::Models() const {
  std::vector<std::string> out;
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [name, e] : rollouts_) out.push_back(name);
  return out;
}

absl::Status Rollouts::Promote(const std::string& model) {
  absl::MutexLock lock(&mu_);
  auto it = rollouts_.find(model);
  if (it == rollouts_.end()) return errors::NotFound(absl::StrCat("model ", model, " has no rollout"));
  Entry& e = it->second;
  if (e.state != RolloutState::kRunning && e.state != RolloutState::kIdle) {
    return errors::InvalidInput(
        absl::StrCat("the rollout of model ", model, " is ", std::string(RolloutStateName(e.state)), ", not running"));
  }
  spdlog::info("rollout of model {}: version {} promoted to stable (was {})", EscapeForLog(model), e.spec.candidate,
               e.spec.stable);
  e.state = RolloutState::kPromoted;
  e.reason = absl::StrCat("version ", e.spec.candidate, " promoted (stable was ", e.spec.stable, ")");
  e.promoted_from = e.spec.stable;
  e.spec.stable = e.spec.candidate;
  ExportState(model, e);
  return absl::OkStatus();
}

absl::Status Rollouts::Rollback(const std::string& model, std::string_view reason) {
  absl::MutexLock lock(&mu_);
  auto it = rollouts_.find(model);
  if (it == rollouts_.end()) return errors::NotFound(absl::StrCat("model ", model, " has no rollout"));
  Entry& e = it->second;
  if (e.state == RolloutState::kPromoted && e.promoted_from != 0) {
    // Fast rollback after a promotion: the version it replaced is stable again.
    e.spec.candidate = e.spec.stable;
    e.spec.stable = e.promoted_from;
    e.promoted_from = 0;
    RollbackLocked(model, e, "manual", absl::StrCat(std::string(reason), ": promotion of version ", e.spec.candidate, " undone"));
    return absl::OkStatus();
  }
  if (e.state != RolloutState::kRunning && e.state != RolloutState::kIdle) {
    return errors::InvalidInput(
        absl::StrCat("the rollout of model ", model, " is ", std::string(RolloutStateName(e.state)), ", not running"));
  }
  RollbackLocked(model, e, "manual", std::string(reason));
  return absl::OkStatus();
}

void Rollouts::RollbackLocked(const std::string& model, Entry& e, std::string_view code, std::string reason) {
  e.state = RolloutState::kRolledBack;
  e.reason = std::move(reason);
  // The reason may be an admin's text (POST .../rollout/rollback): escaped like every request value.
  spdlog::warn("rollout of model {}: rolled back to stable version {} (candidate {}): {}", EscapeForLog(model),
               e.spec.stable, e.spec.candidate, EscapeForLog(e.reason));
  if (metrics_ != nullptr) metrics_->rollout_rollbacks->WithLabels({model, std::string(code)})->Increment();
  ExportState(model, e);
}

void Rollouts::ExportState(const std::string& model, const Entry& e) const {
  // Called on every change of a spec or state (under mu_).
  changes_.fetch_add(1, std::memory_order_acq_rel);
  if (metrics_ == nullptr) return;
  metrics_->rollout_state->WithLabels({model})->Set(static_cast<double>(static_cast<int>(e.state)));
}

std::optional<RolloutStatus> Rollouts::Get(const std::string& model) const {
  absl::MutexLock lock(&mu_);
  auto it = rollouts_.find(model);
  if (it == rollouts_.end()) return std::nullopt;
  const Entry& e = it->second;
  RolloutStatus s;
  s.spec = e.spec;
  s.state = e.state;
  s.reason = e.reason;
  s.promoted_from = e.promoted_from;
  for (const auto& [version, window] : {std::pair{e.spec.stable, &e.stable}, std::pair{e.spec.candidate, &e.candidate}}) {
    s.stats.push_back({version, static_cast<int64_t>(window->requests()), window->errors(), window->Percentile(0.50),
                       window->Percentile(0.99)});
  }
  s.pairs = static_cast<int64_t>(e.comparisons.pairs());
  if (s.pairs > 0) s.agreement = e.comparisons.Means();
  return s;
}

bool Rollouts::Draw(double percent) {
  return InShare(SplitMix64(draws_.fetch_add(1, std::memory_order_relaxed) ^ 0x5bd1e995ULL), percent);
}

std::optional<int64_t> Rollouts::Route(const std::string& model, std::string_view sticky) {
  absl::ReaderMutexLock lock(&mu_);
  auto it = rollouts_.find(model);
  if (it == rollouts_.end()) return std::nullopt;
  const Entry& e = it->second;
  switch (e.state) {
    case RolloutState::kIdle: return std::nullopt;
    case RolloutState::kPromoted:  // stable is the promoted candidate
    case RolloutState::kRolledBack: return e.spec.stable;
    case RolloutState::kRunning: break;
  }
  if (e.spec.mode != RolloutMode::kCanary) return e.spec.stable;
  const bool to_candidate = !e.spec.sticky_header.empty() && !sticky.empty()
                                ? InShare(StickyHash(sticky), e.spec.percent)
                                : Draw(e.spec.percent);
  return to_candidate ? e.spec.candidate : e.spec.stable;
}

std::optional<int64_t> Rollouts::ShadowOf(const std::string& model, int64_t answered_by) {
  absl::ReaderMutexLock lock(&mu_);
  auto it = rollouts_.find(model);
  if (it == rollouts_.end()) return std::nullopt;
  const Entry& e = it->second;
  if (e.state != RolloutState::kRunning || e.spec.mode != RolloutMode::kShadow || answered_by != e.spec.stable) {
    return std::nullopt;
  }
  if (!Draw(e.spec.percent)) return std::nullopt;
  return e.spec.candidate;
}

std::optional<int64_t> Rollouts::DuplicateOf(const std::string& model, int64_t answered_by) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = rollouts_.find(model);
  if (it == rollouts_.end()) return std::nullopt;
  const Entry& e = it->second;
  if (e.state != RolloutState::kRunning || e.spec.mode != RolloutMode::kCanary || answered_by != e.spec.candidate) {
    return std::nullopt;
  }
  return e.spec.stable;
}

std::vector<Rollouts::LaneWanted> Rollouts::ShadowLanesWanted() const {
  std::vector<LaneWanted> out;
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [name, e] : rollouts_) {
    if (e.state != RolloutState::kRunning) continue;
    if (e.spec.mode == RolloutMode::kShadow && e.spec.percent > 0) {
      out.push_back({name, e.spec.candidate, e.spec.stable, e.spec.candidate});
    } else if (e.spec.mode == RolloutMode::kCanary && e.spec.percent > 0) {
      out.push_back({name, e.spec.stable, e.spec.stable, e.spec.candidate});
    }
  }
  return out;
}

std::vector<std::string> Rollouts::StickyHeaders() const {
  std::vector<std::string> out;
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [name, e] : rollouts_) {
    if (e.state == RolloutState::kRunning && !e.spec.sticky_header.empty() &&
        std::find(out.begin(), out.end(), e.spec.sticky_header) == out.end()) {
      out.push_back(e.spec.sticky_header);
    }
  }
  return out;
}

bool Rollouts::Tracks(const std::string& model, int64_t version) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = rollouts_.find(model);
  if (it == rollouts_.end() || it->second.state != RolloutState::kRunning) return false;
  return version == it->second.spec.stable || version == it->second.spec.candidate;
}

std::optional<bool> Rollouts::IsCandidate(const std::string& model, int64_t version) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = rollouts_.find(model);
  if (it == rollouts_.end() || it->second.state != RolloutState::kRunning) return std::nullopt;
  if (version == it->second.spec.candidate) return true;
  if (version == it->second.spec.stable) return false;
  return std::nullopt;
}

std::string Rollouts::StickyHeaderOf(const std::string& model) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = rollouts_.find(model);
  if (it == rollouts_.end() || it->second.state != RolloutState::kRunning) return {};
  return it->second.spec.sticky_header;
}

void Rollouts::RecordOutcome(const std::string& model, int64_t version, bool ok,
                             std::optional<Clock::duration> latency) {
  absl::MutexLock lock(&mu_);
  auto it = rollouts_.find(model);
  if (it == rollouts_.end() || it->second.state != RolloutState::kRunning) return;
  Entry& e = it->second;
  OutcomeWindow* window = version == e.spec.stable ? &e.stable : version == e.spec.candidate ? &e.candidate : nullptr;
  if (window == nullptr) return;
  window->Add(ok, latency.has_value() ? std::optional<double>(std::chrono::duration<double, std::milli>(*latency).count())
                                      : std::nullopt);
  Check(model, e);
}

void Rollouts::RecordComparison(const std::string& model, std::span<const float> stable,
                                std::span<const float> candidate, size_t dim) {
  auto agreement = dim > 0 ? CompareEmbeddings(stable, candidate, dim) : CompareRankings(stable, candidate);
  if (!agreement.ok()) return;
  absl::MutexLock lock(&mu_);
  auto it = rollouts_.find(model);
  if (it == rollouts_.end() || it->second.state != RolloutState::kRunning) return;
  Entry& e = it->second;
  e.comparisons.Add(*agreement);
  if (metrics_ != nullptr) {
    const RankingAgreement means = e.comparisons.Means();
    metrics_->rollout_agreement->WithLabels({model, "spearman"})->Set(means.spearman);
    metrics_->rollout_agreement->WithLabels({model, "top1"})->Set(means.top1);
    metrics_->rollout_agreement->WithLabels({model, "ndcg10"})->Set(means.ndcg10);
    if (dim > 0) metrics_->rollout_agreement->WithLabels({model, "cosine"})->Set(means.cosine);
  }
  Check(model, e);
}

void Rollouts::CheckGuards() {
  absl::MutexLock lock(&mu_);
  for (auto& [model, e] : rollouts_) {
    if (e.state == RolloutState::kRunning) Check(model, e);
  }
}

void Rollouts::Check(const std::string& model, Entry& e) {
  const RolloutGuard& g = e.spec.guard;
  const size_t min = static_cast<size_t>(g.min_requests);
  if (e.candidate.requests() >= min) {
    const int64_t requests = static_cast<int64_t>(e.candidate.requests());
    const double error_rate = static_cast<double>(e.candidate.errors()) / static_cast<double>(requests);
    if (error_rate > g.max_error_rate) {
      return RollbackLocked(model, e, "error_rate",
                            absl::StrFormat("error rate %.4f > max_error_rate %g over %d candidate answers",
                                            error_rate, g.max_error_rate, requests));
    }
    if (e.stable.requests() >= min && g.max_p99_ratio > 0) {
      const double c_p99 = e.candidate.Percentile(0.99), s_p99 = e.stable.Percentile(0.99);
      if (s_p99 > 0 && c_p99 / s_p99 > g.max_p99_ratio) {
        return RollbackLocked(model, e, "p99_ratio",
                              absl::StrFormat("P99 %.2f ms / stable P99 %.2f ms = %.2f > max_p99_ratio %g", c_p99,
                                              s_p99, c_p99 / s_p99, g.max_p99_ratio));
      }
    }
  }
  if (e.comparisons.pairs() >= min) {
    const RankingAgreement means = e.comparisons.Means();
    const double spearman = means.spearman, top1 = means.top1, ndcg = means.ndcg10;
    if (spearman < g.min_spearman) {
      return RollbackLocked(model, e, "spearman",
                            absl::StrFormat("Spearman %.4f < min_spearman %g over %d compared requests", spearman,
                                            g.min_spearman, e.comparisons.pairs()));
    }
    if (top1 < g.min_top1) {
      return RollbackLocked(model, e, "top1",
                            absl::StrFormat("top-1 agreement %.4f < min_top1 %g over %d compared requests", top1,
                                            g.min_top1, e.comparisons.pairs()));
    }
    if (g.min_ndcg10 > 0 && ndcg < g.min_ndcg10) {
      return RollbackLocked(model, e, "ndcg10",
                            absl::StrFormat("NDCG@10 %.4f < min_ndcg10 %g over %d compared requests", ndcg,
                                            g.min_ndcg10, e.comparisons.pairs()));
    }
    if (means.cosine < g.min_cosine) {
      return RollbackLocked(model, e, "cosine",
                            absl::StrFormat("mean cosine similarity %.4f < min_cosine %g over %d compared requests",
                                            means.cosine, g.min_cosine, e.comparisons.pairs()));
    }
  }
}

}  // namespace tide::serving
