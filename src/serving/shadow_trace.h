// tide::serving::ShadowTrace — what a tracer is told about one shadow comparison (the other version
// of a rollout scoring a live request after its answer, serving/rollout_coordinator.h), without
// serving knowing anything of tracing: the live request's span (batching::TraceLink, the same
// value its rows carry to their batch's span) and the comparison's facts. The composition root's
// ShadowTraceHook records them as a span (`tide.shadow`, docs/tracing.md) linked to the request.
//
// Contract:
//  - ShadowTrace::Start answers null (and costs nothing more) unless `hook` is set and the call's
//    request is traced and sampled (RowTask::Admission::trace); the trace keeps a copy of the hook.
//  - Both sides report exactly once, from any thread: the live answer (Live: its compared scores,
//    or null when it failed or was degraded) and the shadow (Shadow: its scores, or Dropped /
//    Failed with the tide_rollout_shadow_requests_total outcome that was counted). The hook runs
//    once, on the thread of the second report; a shadow refused at the offer reports Dropped and
//    the live side then only completes it.
//  - ShadowTraceFacts::outcome: "compared" (both answered: `agreement` is the ranking agreement of
//    the two score lists, stable first), "dropped" (the shadow did not run to an answer: refused,
//    pre-empted, past the deadline, closed; or it answered but the live answer failed, reason
//    "live_failed"), "error" (the shadow failed). `reason` is the finer outcome.
//  - Thread-safe. The hook must not block (it runs on a lane's reporter or an instance thread).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "batching/batch_trace.h"
#include "common/clock.h"
#include "serving/ranking_agreement.h"

namespace tide::serving {

class Call;

struct ShadowTraceFacts {
  std::string_view model;
  int64_t live_version = 0;
  std::string_view live_arm;  // the live answer's side: kArmStable or kArmCanary (rollout_hook.h)
  int64_t shadow_version = 0;
  batching::TraceLink request;  // the live request's server span
  std::string_view outcome;     // "compared", "dropped", "error"
  std::string_view reason;      // "scored", "failed", "preempted", "dropped_<why>", "live_failed"
  std::optional<RankingAgreement> agreement;     // compared
  bool embedding = false;  // an embedding model's vectors: agreement.cosine is the measure
  Clock::duration elapsed{};                     // from the offer to the second report (now)
  std::optional<Clock::duration> shadow_run{};   // the shadow's own run time, when it answered
};

using ShadowTraceHook = std::function<void(const ShadowTraceFacts&)>;

class ShadowTrace {
 public:
  static std::shared_ptr<ShadowTrace> Start(const ShadowTraceHook& hook, const Call& call, std::string model,
                                            int64_t live_version, bool live_is_stable, int64_t shadow_version,
                                            const Clock* clock, size_t embedding_dim = 0);

  // The live side: the scores it compares (null: it failed or was degraded).
  void Live(const std::vector<float>* scores);
  // The shadow side: its scores and run time; or dropped / failed with the counted outcome.
  void Shadow(const std::vector<float>& scores, Clock::duration run_time);
  void Dropped(std::string_view reason);
  void Failed(std::string_view reason);

  ShadowTrace(ShadowTraceHook hook, batching::TraceLink request, std::string model, int64_t live_version,
              bool live_is_stable, int64_t shadow_version, const Clock* clock);

 private:
  // Counts a report; the facts to hand to the hook (outside the lock) after the second.
  std::optional<ShadowTraceFacts> Arrived() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ShadowTraceHook hook_;
  const batching::TraceLink request_;
  const std::string model_;
  const int64_t live_version_;
  const bool live_is_stable_;
  const int64_t shadow_version_;
  size_t embedding_dim_ = 0;  // > 0: the sides are vectors [rows, dim], compared by cosine
  const Clock* const clock_;
  const Clock::time_point start_;
  absl::Mutex mu_;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<std::vector<float>> live_ ABSL_GUARDED_BY(mu_);
  std::optional<std::vector<float>> shadow_ ABSL_GUARDED_BY(mu_);
  std::optional<Clock::duration> shadow_run_ ABSL_GUARDED_BY(mu_);
  std::string reason_ ABSL_GUARDED_BY(mu_) = "scored";
  bool shadow_failed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tide::serving
