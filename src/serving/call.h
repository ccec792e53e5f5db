// tide::serving::CallInfo and Call — one inference call as the service core sees it, whichever edge
// (HTTP, gRPC) it came from.
//
// Contract:
//  - CallInfo is what an edge knows before it reads the body: the credential, the model named in
//    the path (KServe), the body size, when it arrived, the client-gone flag, and the call's own
//    timeout and priority (HTTP headers x-timeout-ms / x-priority, gRPC deadline). Views in it need
//    only live until ServiceCore::Start returns.
//  - AdmissionFor applies the one deadline rule of every edge: the call's own timeout may only
//    shorten `default_timeout` (zero = none); a longer one, however large (up to INT64_MAX
//    microseconds), gets the default; with no default, a deadline beyond what the steady clock can
//    represent (about 292 years) means none. Arithmetic saturates, so no value overflows into a
//    deadline in the past. A timeout <= 0 or a negative priority is invalid input (422); priority 1
//    is the highest, 0 the default level.
//  - A Call is an admitted call: it holds the call's concurrency permits (the server's and its API
//    key's) and memory lease (released when the last owner drops it; ReleasePermit frees the
//    permits earlier, just before the answer is written), its key's tenant and its admission (deadline, priority, client-gone flag) for the batcher.
//    Refine applies a timeout or priority found in the body (KServe "timeout" / "priority"
//    parameters) unless the edge already had one; it is called from the one thread working on the
//    call, before the call's rows are submitted.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>
#include <memory>
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cancellation_flag.h"
#include "guard/api_keys.h"
#include "guard/concurrency_limiter.h"
#include "guard/memory_budget.h"
#include "serving/inference_request.h"

namespace tide::serving {

struct CallInfo {
  std::string_view authorization;  // "Bearer <key>" (HTTP Authorization, gRPC metadata); "" when none
  // A model named before the body is read (KServe path, gRPC field): unknown ones are refused
  // before the body is queued. Empty: the body names it, or the default model answers.
  std::string_view model;
  std::string_view model_version;
  size_t body_bytes = 0;
  Clock::time_point received_at{};  // the edge's receive time (steady clock)
  std::shared_ptr<CancellationFlag> client_gone;  // may be null
  std::optional<int64_t> timeout_us;              // the call's own timeout; nullopt: none
  std::optional<int64_t> priority;
  bool no_cache = false;  // the score cache is not read for this call (Cache-Control: no-cache)
  // The request's header of a given lower-case name ("" when absent), for a rollout's sticky_header
  // (serving/rollout.h); the core keeps the values of the sticky headers in use. Null: none.
  std::function<std::string_view(std::string_view)> header;
  // The request's server span when it is traced and sampled: its rows carry it to their batch's
  // span (batching/batch_trace.h).
  std::optional<batching::TraceLink> trace;
};

absl::StatusOr<RowTask::Admission> AdmissionFor(const CallInfo& info, std::chrono::milliseconds default_timeout);

// Milliseconds to microseconds, saturating at the longest timeout the deadline rule accepts.
int64_t TimeoutMsToUs(int64_t ms);

class Call {
 public:
  Call(const Clock* clock, RowTask::Admission admission, Clock::time_point received_at,
       std::chrono::milliseconds default_timeout, bool has_own_timeout, bool has_own_priority)
      : clock_(clock),
        admission_(std::move(admission)),
        received_at_(received_at),
        default_timeout_(default_timeout),
        has_own_timeout_(has_own_timeout),
        has_own_priority_(has_own_priority) {}

  const RowTask::Admission& admission() const { return admission_; }
  Clock::time_point received_at() const { return received_at_; }
  // CANCELLED when the client left, DEADLINE_EXCEEDED (naming `stage`) when the deadline passed.
  absl::Status StillWanted(std::string_view stage) const;
  absl::Status Refine(std::optional<int64_t> timeout_us, std::optional<int64_t> priority);
  bool no_cache() const { return no_cache_; }
  // The value the request carried in `header` when it was admitted, if that header was a rollout's
  // sticky_header then; "" otherwise.
  std::string_view StickyValue(std::string_view header) const {
    for (const auto& [name, value] : sticky_values_) {
      if (name == header) return value;
    }
    return {};
  }
  void ReleasePermit() {
    permit_.reset();
    tenant_permit_.reset();
  }
  // The API key's tenant (guard/api_keys.h); null when no keys are configured.
  const std::shared_ptr<guard::Tenant>& tenant() const { return tenant_; }
  // For the access log: pairs (documents, windows, rows) charged to the call so far, and how many
  // of them the score cache answered.
  int64_t pairs() const { return pairs_.load(std::memory_order_relaxed); }
  int64_t cache_hits() const { return cache_hits_.load(std::memory_order_relaxed); }
  // Whether the call asked for a version by name (ServiceCore::FindModel): it bypasses the model's
  // rollout (no split, no shadow comparison).
  bool named_version() const { return named_version_.load(std::memory_order_relaxed); }
  // The side of the model's running rollout that answers the call ("stable" or "canary", static
  // strings: serving/rollout_hook.h), set by RolloutCoordinator::Watch; null: no rollout, or the
  // call named its version. For the request's trace (tide.rollout.arm).
  const char* rollout_arm() const { return rollout_arm_.load(std::memory_order_relaxed); }

 private:
  // Admission sets what it admitted; the scoring pipeline counts cache hits; the rollout marks a
  // named version.
  friend class Admission;
  friend class ScoringPipeline;
  friend class RolloutCoordinator;
  const Clock* clock_;  // StillWanted's time source
  RowTask::Admission admission_;
  Clock::time_point received_at_;
  std::chrono::milliseconds default_timeout_;
  bool has_own_timeout_;
  bool has_own_priority_;
  bool no_cache_ = false;
  std::vector<std::pair<std::string, std::string>> sticky_values_;
  mutable std::atomic<int64_t> pairs_{0};       // Admission::ChargePairs
  mutable std::atomic<int64_t> cache_hits_{0};  // ScoringPipeline's score-cache split
  mutable std::atomic<bool> named_version_{false};  // RolloutCoordinator::Pick
  mutable std::atomic<const char*> rollout_arm_{nullptr};  // RolloutCoordinator::Watch
  std::shared_ptr<guard::Tenant> tenant_;  // declared first: outlives its permit below
  std::optional<guard::ConcurrencyLimiter::Permit> tenant_permit_;
  std::optional<guard::ConcurrencyLimiter::Permit> permit_;
  std::optional<guard::MemoryBudget::Lease> lease_;
};

using CallPtr = std::shared_ptr<Call>;

}  // namespace tide::serving
