// tide::serving::Rollouts — gray release per model: a candidate version beside the stable one, as a
// canary (it answers a share of the requests that name no version) or a shadow (it also scores a
// share of rerank requests, its answers never returned), with a guard that compares the two and
// rolls back to 100% stable on its own.
//
// Contract:
//  - Start(model, spec) begins (or replaces) the model's rollout in state "running"; Promote makes
//    the candidate the stable version (spec.stable = candidate; state "promoted": every request
//    that names no version goes to it); Rollback(model, reason) returns every such request to the stable version (state
//    "rolled_back"); after a promotion it undoes it (the version the promotion replaced is stable
//    again: the fast rollback). Both answer kNotFound when the model has no rollout, kInvalidInput
//    otherwise when it is not running. A promoted or rolled-back rollout keeps routing until the next Start.
//  - Route(model, sticky) answers the version a request that names no version goes to: nullopt
//    (no rollout: the newest version answers, as without one), the stable version, or (canary, by
//    `percent`) the candidate. With spec.sticky_header set, `sticky` (that header's value, see
//    StickyHeaders) decides by a hash, so one value always lands on the same version; an empty
//    value is drawn like a request without the header.
//  - ShadowOf(model) answers the candidate a rerank answered by the stable version should also be
//    scored on (shadow mode, drawn by `percent`); canary mode: DuplicateOf(model, version) answers
//    the stable version a request the candidate answered is re-scored on (every one), so that
//    both modes feed the agreement window. The caller scores those on a shadow lane of the target
//    version (serving/shadow_lane.h: idle CPU only) and never returns their answers.
//    ShadowLanesWanted() lists, per running rollout, the version such extra scoring goes to (shadow:
//    the candidate; canary: the stable one) with both versions, for the caller to keep one lane each.
//  - RecordOutcome's latency may be absent (an answer that counts for the error rate only: a shadow
//    answer that idle-priority scoring delayed); the P99s are over the answers that have one.
//  - RecordOutcome(model, version, ok, latency) counts a stable or candidate answer (live, shadow
//    or duplicate) in the version's rolling window; RecordComparison(model, stable, candidate)
//    adds one request's CompareRankings to the agreement window (dim > 0: an embedding model's
//    vectors [rows, dim], CompareEmbeddings: the mean cosine per input). Each one then checks the guard;
//    CheckGuards() (a timer thread every options.check_interval, or a test) checks every model.
//  - Guard: once the candidate has guard.min_requests answers, an error rate above max_error_rate
//    or a P99 above max_p99_ratio x the stable one's (stable with min_requests answers too) rolls
//    back; once the window holds min_requests comparisons, a mean Spearman below min_spearman, a
//    top-1 agreement below min_top1, an NDCG@10 below min_ndcg10 or (embedding models) a mean
//    cosine similarity below min_cosine rolls back. The reason is
//    recorded, logged, counted in tide_rollout_rollbacks_total{model,reason} (reason: error_rate,
//    p99_ratio, spearman, top1, ndcg10, cosine, manual) and tide_rollout_state{model} is updated (0 idle,
//    1 running, 2 promoted, 3 rolled_back); tide_rollout_agreement{model,measure} follows the
//    window's means. Nothing in flight is touched: a rollback only changes where later requests go.
//  - Windows: spec.window (default 1000) answers per version and comparisons, 1..kMaxRolloutWindow
//    (Start and Restore refuse more: kInvalidInput); each answer and comparison updates them in
//    O(log window), and the P50/P99 and means are exact over the window (rollout_window.h).
//  - Thread-safe. Metrics (may be null) and the clock must outlive the object; the destructor stops
//    the timer thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "serving/ranking_agreement.h"
#include "serving/rollout_window.h"
#include "serving/serving_metrics.h"

namespace tide::serving {

enum class RolloutMode { kNone, kCanary, kShadow };
enum class RolloutState { kIdle, kRunning, kPromoted, kRolledBack };
std::string_view RolloutModeName(RolloutMode mode);
std::string_view RolloutStateName(RolloutState state);
std::optional<RolloutMode> ParseRolloutMode(std::string_view name);

struct RolloutGuard {
  int64_t min_requests = 200;   // answers (and comparisons) before any bound is checked
  double max_error_rate = 0.01;
  double max_p99_ratio = 1.5;   // candidate P99 / stable P99
  double min_spearman = 0.9;
  double min_top1 = 0.8;
  double min_ndcg10 = 0.0;      // 0: not checked
  double min_cosine = 0.95;     // embedding models: mean cosine similarity of the versions' vectors
};

struct RolloutSpec {
  int64_t stable = 0;
  int64_t candidate = 0;
  RolloutMode mode = RolloutMode::kCanary;
  double percent = 0;           // 0..100
  std::string sticky_header;    // lower case; empty: not sticky
  RolloutGuard guard;
  size_t window = 1000;         // answers per version and comparisons kept: 1..kMaxRolloutWindow
};

// What GET /v2/models/{m}/rollout shows.
struct RolloutStatus {
  RolloutSpec spec;
  RolloutState state = RolloutState::kIdle;
  std::string reason;
  struct VersionStats {
    int64_t version = 0;
    int64_t requests = 0;  // in the window
    int64_t errors = 0;
    double p50_ms = 0;
    double p99_ms = 0;
  };
  std::vector<VersionStats> stats;  // stable first
  int64_t pairs = 0;
  RankingAgreement agreement;
  int64_t promoted_from = 0;  // promoted: the stable version the promotion replaced (0: none)
};

struct RolloutsOptions {
  const Clock* clock = nullptr;                                   // null: the steady clock
  std::chrono::milliseconds check_interval{250};                  // 0: no timer thread
  // Also run on the timer thread before each check (the service core applies rollouts declared
  // in config.pbtxt there). May be empty; must stay valid until StopTimer.
  std::function<void()> on_tick;
};

class Rollouts {
 public:
  Rollouts(ServingMetrics* metrics, const RolloutsOptions& options);
  ~Rollouts();
  Rollouts(const Rollouts&) = delete;
  Rollouts& operator=(const Rollouts&) = delete;

  absl::Status Start(const std::string& model, const RolloutSpec& spec);
  absl::Status Promote(const std::string& model);
  absl::Status Rollback(const std::string& model, std::string_view reason = "manual");
  std::optional<RolloutStatus> Get(const std::string& model) const;
  // Every model with a rollout, by name.
  std::vector<std::string> Models() const;
  // Puts back a rollout saved earlier (serving/rollout_state_file.h) as it was: spec, state, reason
  // and the promotion it may undo, with empty windows; counts no rollback. kInvalidInput as Start
  // (a promoted rollout's stable version is its candidate, which Start would refuse).
  absl::Status Restore(const std::string& model, const RolloutSpec& spec, RolloutState state, std::string reason,
                       int64_t promoted_from);
  // Grows on every change of a rollout's spec or state (start, promote, rollback by hand or by
  // the guard, restore): a persister writes when it moved.
  uint64_t changes() const { return changes_.load(std::memory_order_acquire); }

  std::optional<int64_t> Route(const std::string& model, std::string_view sticky);
  std::optional<int64_t> ShadowOf(const std::string& model, int64_t answered_by);
  std::optional<int64_t> DuplicateOf(const std::string& model, int64_t answered_by) const;
  // The sticky headers of every rollout (usually none or one), for the edge to pass their values.
  std::vector<std::string> StickyHeaders() const;
  // Whether `version` is the stable or the candidate version of the model's running rollout.
  bool Tracks(const std::string& model, int64_t version) const;
  // Which: nullopt when not tracked, else whether it is the candidate.
  std::optional<bool> IsCandidate(const std::string& model, int64_t version) const;
  // The model's running rollout's sticky_header; "" when none.
  std::string StickyHeaderOf(const std::string& model) const;
  bool HasSticky() const { return has_sticky_.load(std::memory_order_relaxed); }

  void RecordOutcome(const std::string& model, int64_t version, bool ok, std::optional<Clock::duration> latency);
  struct LaneWanted {
    std::string model;
    int64_t scored = 0;  // the version that scores the extra rows
    int64_t stable = 0, candidate = 0;
  };
  std::vector<LaneWanted> ShadowLanesWanted() const;
  void RecordComparison(const std::string& model, std::span<const float> stable, std::span<const float> candidate,
                        size_t dim = 0);
  void CheckGuards();
  // Stops the timer thread (idempotent; the destructor calls it).
  void StopTimer();

  const Clock* clock() const { return clock_; }

 private:
  // Implementation details follow.
  struct Entry {
    RolloutSpec spec;
    RolloutState state = RolloutState::kRunning;
    std::string reason;
    OutcomeWindow stable, candidate;  // incremental: no copy or sort per answer (rollout_window.h)
    AgreementWindow comparisons;
    int64_t promoted_from = 0;  // the stable version a promotion replaced (0: none)
  };
  bool Draw(double percent);
  // Checks one model's guard; rolls back when a bound is crossed.
  void Check(const std::string& model, Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RollbackLocked(const std::string& model, Entry& e, std::string_view code, std::string reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExportState(const std::string& model, const Entry& e) const;
  void TimerLoop();

  ServingMetrics* const metrics_;
  const Clock* const clock_;
  const RolloutsOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry, std::less<>> rollouts_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> draws_{0};
  std::atomic<bool> has_sticky_{false};
  mutable std::atomic<uint64_t> changes_{0};  // bumped by ExportState
  absl::Mutex stop_mu_;
  absl::CondVar stop_cv_;
  bool stop_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::thread timer_;
};

}  // namespace tide::serving
