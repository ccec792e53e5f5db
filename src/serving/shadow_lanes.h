// tide::serving::ShadowLanes — the open shadow lanes (serving/shadow_lane.h) of every model whose
// rollout scores extra rows: one lane per model, on the version Rollouts::ShadowLanesWanted names.
//
// Contract:
//  - Sync(wanted) opens a lane for each entry whose three versions (scored, stable, candidate) are
//    loaded (opening runs on the lane's own idle thread), keeps a lane whose entry and versions'
//    generations are unchanged, and closes every other one (no longer wanted, or a version was
//    reloaded or unloaded), logging "model M version V: shadow lane closed". Closed lanes are
//    joined outside every lock Offer takes. One Sync at a time.
//  - A lane yields while live rows wait on the stable or the candidate version, starts a batch
//    only once both were idle for options.hold_off, and is pre-empted by their live rows.
//  - Offer(model, version, job) never blocks (a reader lock): the lane's refusal, kNotReady when
//    the model has no lane scoring `version`; on a refusal job.done is destroyed unrun.
//  - CloseAll() closes every lane (joins their threads); the destructor calls it.
//  - Thread-safe. The model manager must outlive the object.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "serving/model_manager.h"
#include "serving/rollout.h"
#include "serving/shadow_lane.h"

namespace tide::serving {

struct ShadowLanesOptions {
  bool idle_scheduling = true;  // SCHED_IDLE (false only for tests)
  int nice = 0;                 // without idle scheduling: nice steps added to the lanes' threads
  size_t max_queued_jobs = 2;
  std::chrono::milliseconds max_yield{1000};
  std::chrono::milliseconds hold_off{10};
  const Clock* clock = nullptr;
};

class ShadowLanes {
 public:
  ShadowLanes(ModelManager* models, const ShadowLanesOptions& options);
  ~ShadowLanes();
  ShadowLanes(const ShadowLanes&) = delete;
  ShadowLanes& operator=(const ShadowLanes&) = delete;

  void Sync(const std::vector<Rollouts::LaneWanted>& wanted);
  ShadowLane::Refusal Offer(const std::string& model, int64_t version, ShadowJob job) const;
  // The model's open lane's counters; nullopt: none open.
  std::optional<ShadowLane::Stats> Stats(const std::string& model) const;
  // Whether the model's lane scores `version` and has its backend open.
  bool Ready(const std::string& model, int64_t version) const;
  void CloseAll();

 private:
  // Implementation details follow.
  struct Entry {
    Rollouts::LaneWanted wanted;
    uint64_t scored_generation = 0, stable_generation = 0, candidate_generation = 0;
    std::unique_ptr<ShadowLane> lane;
  };
  static bool Same(const Entry& a, const Entry& b);

  ModelManager* const models_;
  const ShadowLanesOptions options_;
  // Live threads offer under a reader lock (Offer never blocks); Sync swaps entries under the
  // writer lock and destroys closed lanes outside it.
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> lanes_ ABSL_GUARDED_BY(mu_);
  absl::Mutex sync_mu_;  // one Sync at a time
};

}  // namespace tide::serving
