#include "serving/shadow_lanes.h"

#include <algorithm>
#include <array>
#include <set>
#include <utility>

#include "common/error_echo.h"
#include "spdlog/spdlog.h"

namespace tide::serving {

ShadowLanes::ShadowLanes(ModelManager* models, const ShadowLanesOptions& options)
    : models_(models), options_(options) {}

ShadowLanes::~ShadowLanes() { CloseAll(); }

void ShadowLanes::CloseAll() {
  std::map<std::string, Entry> lanes;
  {
    absl::MutexLock lock(&mu_);
    lanes.swap(lanes_);
  }
  lanes.clear();  // joins the shadow lanes' threads
}

bool ShadowLanes::Same(const Entry& a, const Entry& b) {
  return a.wanted.scored == b.wanted.scored && a.wanted.stable == b.wanted.stable &&
         a.wanted.candidate == b.wanted.candidate && a.scored_generation == b.scored_generation &&
         a.stable_generation == b.stable_generation && a.candidate_generation == b.candidate_generation;
}

void ShadowLanes::Sync(const std::vector<Rollouts::LaneWanted>& wanted_lanes) {
  absl::MutexLock sync(&sync_mu_);  // the only writer of lanes_
  auto find = [this](const std::string& model, int64_t version) -> std::shared_ptr<ServedModel> {
    auto found = models_->Find(model, std::to_string(version));
    return found.ok() ? *std::move(found) : nullptr;
  };
  auto gen = [](const std::shared_ptr<ServedModel>& m) -> uint64_t { return m != nullptr ? m->generation() : 0; };
  // What should be open now, with the versions' current objects.
  std::map<std::string, Entry> wanted;
  std::map<std::string, std::array<std::shared_ptr<ServedModel>, 3>> served;
  for (const Rollouts::LaneWanted& w : wanted_lanes) {
    std::array<std::shared_ptr<ServedModel>, 3> v = {find(w.model, w.scored), find(w.model, w.stable),
                                                     find(w.model, w.candidate)};
    if (v[0] == nullptr || v[1] == nullptr || v[2] == nullptr) continue;
    Entry& e = wanted[w.model];
    e.wanted = w;
    e.scored_generation = gen(v[0]);
    e.stable_generation = gen(v[1]);
    e.candidate_generation = gen(v[2]);
    served[w.model] = std::move(v);
  }
  std::set<std::string> kept;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [model, entry] : lanes_) {
      auto it = wanted.find(model);
      if (it != wanted.end() && Same(it->second, entry)) {
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
    lo.hold_off = options_.hold_off;
    // ... and their live rows stop its running batch at once.
    lo.preempted_by = {stable, candidate};
    lo.max_queued_jobs = std::max<size_t>(options_.max_queued_jobs, 1);
    lo.max_yield = options_.max_yield;
    lo.idle_scheduling = options_.idle_scheduling;
    lo.nice = options_.nice;
    lo.clock = options_.clock;
    entry.lane = ShadowLane::Create(scored, std::move(lo));
  }
  std::vector<std::unique_ptr<ShadowLane>> closed;
  {
    absl::MutexLock lock(&mu_);
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

ShadowLane::Refusal ShadowLanes::Offer(const std::string& model, int64_t version, ShadowJob job) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = lanes_.find(model);
  if (it == lanes_.end() || it->second.wanted.scored != version) return ShadowLane::Refusal::kNotReady;
  return it->second.lane->Offer(std::move(job));
}

std::optional<ShadowLane::Stats> ShadowLanes::Stats(const std::string& model) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = lanes_.find(model);
  if (it == lanes_.end()) return std::nullopt;
  return it->second.lane->GetStats();
}

bool ShadowLanes::Ready(const std::string& model, int64_t version) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = lanes_.find(model);
  return it != lanes_.end() && it->second.wanted.scored == version && it->second.lane->ready();
}

}  // namespace tide::serving
