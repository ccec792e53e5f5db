#include "serving/shadow_trace.h"

#include <utility>

#include "serving/call.h"
#include "serving/rollout_hook.h"

namespace tide::serving {

std::shared_ptr<ShadowTrace> ShadowTrace::Start(const ShadowTraceHook& hook, const Call& call, std::string model,
                                                int64_t live_version, bool live_is_stable, int64_t shadow_version,
                                                const Clock* clock, size_t embedding_dim) {
  const std::optional<batching::TraceLink>& request = call.admission().trace;
  if (!hook || !request.has_value() || !request->sampled()) return nullptr;
  auto trace = std::make_shared<ShadowTrace>(hook, *request, std::move(model), live_version, live_is_stable,
                                             shadow_version, clock);
  trace->embedding_dim_ = embedding_dim;
  return trace;
}

ShadowTrace::ShadowTrace(ShadowTraceHook hook, batching::TraceLink request, std::string model, int64_t live_version,
                         bool live_is_stable, int64_t shadow_version, const Clock* clock)
    : hook_(std::move(hook)),
      request_(request),
      model_(std::move(model)),
      live_version_(live_version),
      live_is_stable_(live_is_stable),
      shadow_version_(shadow_version),
      clock_(clock),
      start_(clock->Now()) {}

void ShadowTrace::Live(const std::vector<float>* scores) {
  std::optional<ShadowTraceFacts> done;
  {
    absl::MutexLock lock(&mu_);
    if (scores != nullptr) live_ = *scores;
    done = Arrived();
  }
  if (done.has_value()) hook_(*done);
}

void ShadowTrace::Shadow(const std::vector<float>& scores, Clock::duration run_time) {
  std::optional<ShadowTraceFacts> done;
  {
    absl::MutexLock lock(&mu_);
    shadow_ = scores;
    shadow_run_ = run_time;
    done = Arrived();
  }
  if (done.has_value()) hook_(*done);
}

void ShadowTrace::Dropped(std::string_view reason) {
  std::optional<ShadowTraceFacts> done;
  {
    absl::MutexLock lock(&mu_);
    reason_ = std::string(reason);
    done = Arrived();
  }
  if (done.has_value()) hook_(*done);
}

void ShadowTrace::Failed(std::string_view reason) {
  std::optional<ShadowTraceFacts> done;
  {
    absl::MutexLock lock(&mu_);
    reason_ = std::string(reason);
    shadow_failed_ = true;
    done = Arrived();
  }
  if (done.has_value()) hook_(*done);
}

std::optional<ShadowTraceFacts> ShadowTrace::Arrived() {
  if (++arrived_ < 2) return std::nullopt;
  ShadowTraceFacts f;
  f.model = model_;
  f.live_version = live_version_;
  f.live_arm = live_is_stable_ ? kArmStable : kArmCanary;
  f.shadow_version = shadow_version_;
  f.request = request_;
  f.reason = reason_;
  f.shadow_run = shadow_run_;
  f.elapsed = clock_->Now() - start_;
  if (shadow_failed_) {
    f.outcome = "error";
  } else if (!shadow_.has_value()) {
    f.outcome = "dropped";
  } else if (!live_.has_value()) {
    f.outcome = "dropped";
    f.reason = "live_failed";
  } else {
    f.outcome = "compared";
    const std::vector<float>& stable = live_is_stable_ ? *live_ : *shadow_;
    const std::vector<float>& candidate = live_is_stable_ ? *shadow_ : *live_;
    f.embedding = embedding_dim_ > 0;
    auto agreement =
        f.embedding ? CompareEmbeddings(stable, candidate, embedding_dim_) : CompareRankings(stable, candidate);
    if (agreement.ok()) f.agreement = *agreement;
  }
  // The hook runs after the lock is released; the views in `f` stay valid: nothing writes this
  // object's state after the second report.
  return f;
}

}  // namespace tide::serving
