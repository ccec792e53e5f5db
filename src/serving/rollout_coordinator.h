// tide::serving::RolloutCoordinator — gray release for the request path: routes calls between a
// model's versions, watches and mirrors live answers, runs the shadow lanes, applies rollouts that
// config.pbtxt declares and keeps rollouts across restarts (--rollout-state-file). It implements
// the narrow RolloutHook (serving/rollout_hook.h) that admission and the scoring pipeline use;
// the rollout API (StartRollout, PromoteRollout, RollbackRollout, Status) is what the edges' rollout
// routes call through ServiceCore.
//
// Contract:
//  - Pick: see RolloutHook. A version the rollout names that is no longer loaded: the newest
//    answers, as without a rollout.
//  - Watch: live Rerank and Infer answers of a rollout's stable or candidate version are recorded
//    (Rollouts::RecordOutcome: an error only for kBackend, kInternal and kUnavailable kinds, a
//    degraded answer as an error; client mistakes, overload, deadlines and cancellations are not
//    counted), with the time from Watch to the answer. A rerank (or a 1-label model's Infer rows)
//    the stable version answers in shadow mode (drawn by percent), and every one the candidate
//    answers in canary mode, is also offered to the other version's shadow lane
//    (serving/shadow_lanes.h), with the call's deadline, starting once the live rows are queued
//    (Submitted); a call that named its version is never offered. That answer is only compared
//    (Rollouts::RecordComparison) and never returned, and its failure fails nothing live; a
//    pre-empted one is no failure. A shadow answer of the candidate (shadow mode) is also an
//    outcome of the candidate, a latency sample only when no live row contended with it; a canary
//    duplicate on the stable version is only compared. Compared: a rerank's document scores (long
//    documents: per document, the lane splits and folds as the live path does); Infer rows as one
//    ranked list of raw logits (folded per input by `windows`), only when the other version is a
//    1-label model reading the same ids (vocabulary size) whose max_sequence_length fits the rows
//    (else counted dropped_incompatible); an embedding model's (task embed) Infer rows as vectors
//    [rows, dim], compared by cosine (Rollouts::RecordComparison with dim), when the other version
//    is an embedding model of the same dimension reading the same ids. Every offer's outcome is counted in
//    tide_rollout_shadow_requests_total{model,outcome}: scored, failed, preempted,
//    dropped_<refusal>, dropped_live_waiting, dropped_deadline, dropped_closed. With
//    options.shadow_trace, an offer for a sampled request also reports both sides to a ShadowTrace
//    (its span, tide.shadow). Watch marks the call's rollout arm (rollout_hook.h).
//  - StartRollout(model, declaration): without declaration.stable, the stable version is the one
//    answering now: the current rollout's stable version (after a promotion the promoted one),
//    else the newest loaded version other than the candidate. Both versions must be loaded
//    (kNotFound). Start, Promote and Rollback save the change (PersistRollouts) and sync the shadow
//    lanes before they return.
//  - ApplyDeclaredRollouts starts each rollout a loaded version declares in config.pbtxt
//    (parameter `rollout`, taken from the model's newest version) once per distinct text: a text
//    whose candidate is not loaded yet is retried on the next call, one that is invalid is logged
//    once.
//  - SyncShadowLanes opens a lane for each Rollouts::ShadowLanesWanted entry and closes lanes no
//    longer wanted or whose versions were reloaded or unloaded.
//  - --rollout-state-file: LoadRolloutState reads the file once at start-up (none yet: OK; a file
//    that cannot be read or parsed: the error, and tide refuses to start); its rollouts are put
//    back (Rollouts::Restore) by ApplySavedRollouts once both of their versions are loaded, except
//    for a model whose newest version declares a rollout in config.pbtxt: the declared one wins.
//    PersistRollouts writes every rollout (WriteFileAtomically) when any changed since the last
//    write (saved rollouts still waiting for their versions stay in the file); write errors are
//    logged and retried on the next change or tick.
//  - The rollout timer (every options.rollout_check_interval; 0: none) runs ApplySavedRollouts,
//    ApplyDeclaredRollouts, SyncShadowLanes and PersistRollouts, then checks the guards: a guard's
//    rollback is on disk within one interval. The timer-driven methods are public for tests.
//  - Thread-safe. The model manager and the metrics must outlive the object; Stop() (and the
//    destructor) stops the timer and closes the lanes; watches still in flight keep what they
//    record into alive.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "serving/model_manager.h"
#include "serving/rollout.h"
#include "serving/rollout_hook.h"
#include "serving/rollout_json.h"
#include "serving/rollout_state_file.h"
#include "serving/serving_metrics.h"
#include "serving/shadow_lane.h"
#include "serving/shadow_lanes.h"
#include "serving/shadow_trace.h"

namespace tide::serving {

struct RolloutCoordinatorOptions {
  // How often the rollout guards are checked besides on every recorded answer and comparison
  // (a rollback comes within this of a bound being crossed by time alone); 0: no timer.
  std::chrono::milliseconds rollout_check_interval{250};
  // Shadow lanes (serving/shadow_lane.h): SCHED_IDLE (false only for tests), queued jobs per lane,
  // and how long a job yields to live rows before it is dropped.
  bool shadow_idle_scheduling = true;
  int shadow_nice = 0;  // without idle scheduling: nice steps added to the lanes' threads (0..19)
  size_t shadow_max_queued_jobs = 2;
  std::chrono::milliseconds shadow_max_yield{1000};
  // How long both versions must have been idle (no live row queued or running) before a shadow
  // batch starts (ShadowLaneOptions::hold_off); 0: as soon as no live row waits.
  std::chrono::milliseconds shadow_hold_off{10};
  // Where rollouts are kept across restarts (serving/rollout_state_file.h); empty: nowhere.
  std::string rollout_state_file;
  // Told about every shadow comparison of a traced, sampled request (serving/shadow_trace.h);
  // empty: none.
  ShadowTraceHook shadow_trace;
};

class RolloutCoordinator final : public RolloutHook {
 public:
  // `clock`: null for the steady clock.
  static std::unique_ptr<RolloutCoordinator> Create(ModelManager* models, ServingMetrics* metrics,
                                                    const RolloutCoordinatorOptions& options, const Clock* clock);
  ~RolloutCoordinator() override;
  RolloutCoordinator(const RolloutCoordinator&) = delete;
  RolloutCoordinator& operator=(const RolloutCoordinator&) = delete;

  // The hook (serving/rollout_hook.h).
  absl::StatusOr<std::shared_ptr<ServedModel>> Pick(const Call& call, std::string_view name,
                                                    std::string_view version) const override;
  std::vector<std::string> StickyHeaders() const override;
  bool Tracks(const ServedModel& model) const override;
  std::shared_ptr<AnswerWatch> Watch(const Call& call, const ServedModel& model, const MirrorRequest& mirror) override;

  // The rollout API.
  absl::Status StartRollout(const std::string& model, const RolloutDeclaration& declaration);
  absl::Status PromoteRollout(const std::string& model);
  absl::Status RollbackRollout(const std::string& model, std::string_view reason);
  std::optional<RolloutStatus> Status(const std::string& model) const { return rollouts_->Get(model); }

  // Run by the rollout timer; public for tests.
  void ApplyDeclaredRollouts();
  void SyncShadowLanes();
  absl::Status LoadRolloutState();
  void ApplySavedRollouts();
  void PersistRollouts();

  std::optional<ShadowLane::Stats> ShadowLaneStats(const std::string& model) const { return lanes_.Stats(model); }
  bool ShadowLaneReady(const std::string& model, int64_t version) const { return lanes_.Ready(model, version); }
  Rollouts& rollouts() const { return *rollouts_; }
  // Stops the rollout timer and closes the shadow lanes (idempotent).
  void Stop();

 private:
  // Implementation details follow.
  class Watched;
  RolloutCoordinator(ModelManager* models, ServingMetrics* metrics, const RolloutCoordinatorOptions& options,
                     const Clock* clock);
  // The version a live answer of `version` is also scored on, and whether the live one is the
  // stable one: shadow mode's candidate (drawn), else canary mode's stable duplicate.
  struct Other {
    int64_t version = 0;
    bool live_is_stable = true;
  };
  std::optional<Other> OtherVersion(const std::string& model, int64_t version);
  // Whether the other version can score token rows encoded for `model`.
  bool ReadsTheSameRows(const ServedModel& model, int64_t other_version, const std::vector<tokenizer::Encoding>& rows) const;
  void CountShadow(const std::string& model, std::string_view outcome) const;

  ModelManager* const models_;
  ServingMetrics* const metrics_;
  const RolloutCoordinatorOptions options_;
  const Clock* const clock_;
  std::shared_ptr<Rollouts> rollouts_;  // shared with shadow answers that may come after the coordinator
  ShadowLanes lanes_;
  absl::Mutex declared_mu_;
  // Per model: the declared rollout text last applied (or found invalid).
  std::map<std::string, std::string> declared_ ABSL_GUARDED_BY(declared_mu_);
  absl::Mutex state_mu_;  // the state file: saved rollouts waiting for their versions, last write
  std::vector<SavedRollout> saved_ ABSL_GUARDED_BY(state_mu_);
  uint64_t persisted_changes_ ABSL_GUARDED_BY(state_mu_) = 0;
  bool persisted_once_ ABSL_GUARDED_BY(state_mu_) = false;
};

}  // namespace tide::serving
