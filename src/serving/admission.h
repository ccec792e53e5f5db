// tide::serving::Admission — who may call, and whether the server takes one more call now: API keys
// and their quotas, the concurrency and memory limits, deadlines, and the tokenization workers'
// queue with its light lane. Every inference call of every edge enters here.
//
// Contract:
//  - Start(info, work, attempt) admits a call, in this order, answering `work` with the refusal:
//      draining                                   -> kUnavailable  (shed reason "draining")
//      credential (API keys configured)           -> kUnauthenticated
//      the key's max_concurrent                   -> kOverloaded   (checked first: a call refused
//                                                                   for it spends none of the rate)
//      the key's requests_per_second quota        -> kOverloaded + RetryAfterMs from its bucket
//      in-flight calls (max_concurrent_requests)  -> kOverloaded   ("max_concurrent_requests")
//      a model named in `info` that is not served -> kNotFound
//      estimated bytes (guard::EstimateRequestBytes of body_bytes) over the whole budget
//                                                 -> kPayloadTooLarge ("max_inflight_bytes")
//      ... over what is left of it                -> kOverloaded   ("max_inflight_bytes")
//      a malformed timeout or priority            -> kInvalidInput
//      the tokenization workers' queue full       -> kOverloaded   ("tokenization_queue")
//    then runs `work` on a tokenization worker (the light lane when body_bytes <= light_body_bytes,
//    which one worker is kept for) with the admitted Call, unless by then the client left
//    (kCancelled) or the deadline passed (kDeadlineExceeded): then `work` gets that status.
//    `work` runs exactly once: refusals on the calling thread, everything else on a worker. Work
//    still queued when the object is destroyed is destroyed unrun (what it owns is released).
//    `attempt` (may be null) gets the admitted call of a light body first, on the calling thread;
//    when it answers true it has answered the call and `work` is dropped unrun.
//  - The Call holds the concurrency permits (the server's and its key's) and the memory lease; keep
//    it (e.g. in the answer's callback) until the answer is written. A tenant's priority is clamped
//    to its max_priority. The Call keeps the values of the rollouts' sticky headers
//    (RolloutHook::StickyHeaders; `rollouts` may be null).
//  - API keys: options.api_key (tenant "default", no quotas), options.admin_api_key ("admin", role
//    admin) and options.api_keys (--api-keys with roles, guard/api_keys.h) together; Authorize
//    decides every route's access from them (guard/access.h); a call is admitted as the tenant its
//    key names. SetKeys swaps all of them atomically (SIGHUP); calls admitted before keep their
//    tenant. Outcomes are counted per key name in tide_key_requests_total.
//  - ChargePairs is the one place a call's pairs (documents, windows, rows) are charged to its
//    key's pairs_per_second quota (kOverloaded + RetryAfterMs when over, counted over_pairs and
//    shed "key_quota") and counted on the Call for the access log.
//  - After the in-flight bytes reached malloc_trim_above_bytes, the release that brings them under
//    an eighth of it returns freed heap to the OS (malloc_trim, one at a time, on a worker's light
//    lane).
//  - Thread-safe. The model manager and the metrics must outlive the object.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "guard/access.h"
#include "guard/api_keys.h"
#include "guard/concurrency_limiter.h"
#include "guard/memory_budget.h"
#include "serving/call.h"
#include "serving/model_manager.h"
#include "serving/rollout_hook.h"
#include "serving/serving_metrics.h"
#include "serving/work_pool.h"

namespace tide::serving {

struct AdmissionOptions {
  // Deadline of a call that names none; zero: none. A call's own timeout may only shorten it.
  std::chrono::milliseconds default_timeout{0};
  // Bearer key every inference call must carry (tenant "default", role tenant, no quotas); empty:
  // none. It is an inference key only: it never implies admin (guard/access.h).
  std::string api_key;
  // The admin credential (--admin-api-key[-file]: key "admin", role admin only); empty: none.
  std::string admin_api_key;
  // Several keys with roles and quotas (guard::ApiKeys::Load of --api-keys); null: none. With
  // api_key / admin_api_key too, any of them is accepted for its roles. Keys are compared in
  // constant time.
  std::shared_ptr<guard::ApiKeys> api_keys;
  // Who may call what beyond the keys (--metrics-require-key).
  guard::AccessOptions access;
  // Calls in flight beyond which new ones are refused at once (TEI's max_concurrent_requests);
  // 0: unlimited.
  int64_t max_concurrent_requests = 0;
  // Bytes the calls being parsed, tokenized and scored may hold together, each estimated before
  // parsing as request_memory_factor x body bytes + request_memory_fixed_bytes (the factor covers
  // the worst case bench/memory/factor.sh measured: 18-26x for KServe token tensors of the largest
  // shape, 8x for a 7.5 MB rerank). 0: unlimited. With the defaults, at most 4 bodies of 8 MiB are
  // worked on at once.
  int64_t max_inflight_bytes = int64_t{1} << 30;
  int64_t request_memory_factor = 32;
  int64_t request_memory_fixed_bytes = int64_t{1} << 20;
  // After the in-flight bytes reached malloc_trim_above_bytes, the release that brings them under
  // an eighth of it returns freed heap to the OS (malloc_trim on a tokenization worker). 0: never.
  int64_t malloc_trim_above_bytes = int64_t{128} << 20;
  // Threads that parse and tokenize calls off the edge's I/O threads (TEI's
  // --tokenization-workers); 0: one per core.
  int tokenization_workers = 0;
  // Calls waiting for a tokenization worker beyond which new ones are refused at once.
  size_t tokenization_queue = 1024;
  // Bodies up to this size are cheap to parse and tokenize: they take the light lane.
  size_t light_body_bytes = 64 * 1024;
};

class Admission {
 public:
  // `clock`: StillWanted's time source (null: the steady clock); `rollouts` may be null.
  static absl::StatusOr<std::unique_ptr<Admission>> Create(ModelManager* models, ServingMetrics* metrics,
                                                           const AdmissionOptions& options, const Clock* clock,
                                                           const RolloutHook* rollouts);
  ~Admission();  // stops the tokenization workers first
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

  using Work = absl::AnyInvocable<void(absl::StatusOr<CallPtr>) &&>;
  using Attempt = absl::AnyInvocable<bool(const CallPtr&)>;
  void Start(const CallInfo& info, Work work, Attempt attempt = nullptr);
  // Every admission step of Start before the worker queue: the admitted call or the refusal.
  absl::StatusOr<CallPtr> Admit(const CallInfo& info);

  absl::StatusOr<std::shared_ptr<guard::Tenant>> Authorize(guard::Access access, std::string_view authorization,
                                                           guard::Listener listener = guard::Listener::kMain) const;
  absl::Status SetKeys(std::string api_key, std::string admin_api_key, std::shared_ptr<guard::ApiKeys> file_keys);
  absl::Status ChargePairs(const Call& call, size_t pairs) const;

  void SetDraining(bool draining) { draining_.store(draining); }
  bool draining() const { return draining_.load(); }
  int64_t in_flight() const { return limiter_.in_flight(); }
  int64_t max_concurrent_requests() const { return limiter_.max_concurrent_requests(); }
  // Mirrors the in-flight bytes and the workers' queue into the metrics' gauges.
  void RefreshMetrics() const;

 private:
  // Implementation details follow.
  Admission(ModelManager* models, ServingMetrics* metrics, const AdmissionOptions& options, const Clock* clock,
            const RolloutHook* rollouts);
  void Shed(const char* reason) const;
  void CountKey(const guard::Tenant& tenant, const char* outcome) const;
  std::shared_ptr<guard::ApiKeys> Keys() const;
  // Returns freed heap to the OS after a burst (MemoryBudget's on_drained), on a worker.
  void TrimHeap();

  ModelManager* const models_;
  ServingMetrics* const metrics_;
  const AdmissionOptions options_;
  const Clock* const clock_;
  const RolloutHook* const rollouts_;
  std::atomic<bool> draining_{false};
  mutable absl::Mutex keys_mu_;
  std::shared_ptr<guard::ApiKeys> keys_ ABSL_GUARDED_BY(keys_mu_);  // null: no credential asked
  guard::ConcurrencyLimiter limiter_{options_.max_concurrent_requests};
  std::unique_ptr<guard::MemoryBudget> budget_;
  std::atomic<bool> trim_pending_{false};
  // Last: destroyed first, so no worker runs while the members above go away.
  std::unique_ptr<WorkPool> pool_;
};

}  // namespace tide::serving
