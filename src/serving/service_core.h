// tide::serving::ServiceCore — what every edge (the HTTP routes today, gRPC next) calls to serve an
// inference call: one admission policy, one tokenization pool, one deadline rule, one breaker
// fallback, one set of shed and degraded counters. An edge only turns its wire format into the
// calls below and their answers back into its wire format.
//
// Contract:
//  - Start(info, work) admits a call, in this order, answering `work` with the refusal:
//      draining                                   -> kUnavailable  (shed reason "draining")
//      credential (API keys configured)           -> kUnauthenticated
//      the key's requests_per_second quota        -> kOverloaded + RetryAfterMs from its bucket
//      the key's max_concurrent                   -> kOverloaded
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
//    still queued when the core is destroyed is destroyed unrun (what it owns is released).
//  - The Call holds the concurrency permits (the server's and its key's) and the memory lease; keep
//    it (e.g. in the answer's callback) until the answer is written.
//  - API keys: options.api_key (tenant "default", no quotas), options.admin_api_key ("admin", role
//    admin) and options.api_keys (--api-keys with roles, guard/api_keys.h) together; Authorize
//    decides every route's access from them (guard/access.h); a call is admitted as the tenant its
//    key names. SetKeys swaps all of them atomically (SIGHUP); calls admitted before keep their
//    tenant. Rerank and Infer charge the
//    key's pairs_per_second quota with the call's pairs before any tokenization (kOverloaded +
//    RetryAfterMs when over). Outcomes are counted per key name in tide_key_requests_total.
//  - Rerank / Infer / Tokenize are the model work of an admitted call, on the worker that runs it.
//    They check Call::StillWanted before and between chunks of kTokenizeChunkDocuments inputs.
//    Rerank and Infer call `done` exactly once: on the calling thread for an error or a fallback, on
//    the instance thread that finished the last row otherwise. While a model's breaker is open,
//    Rerank answers with its fallback (BM25 or a classifier's default result) and Infer with a
//    classifier's breaker_default_result, both marked (`fallback` set) and counted in
//    tide_degraded_responses_total; a model without one answers DegradedUnavailableError.
//  - Score cache (options.score_cache_bytes > 0): Rerank looks every pair up (unless the call is
//    no_cache), queues only the pairs not found, stores the model's logits of those, and answers
//    with RerankScores::cache_hits set; a request whose every pair was found is answered on the
//    calling thread without touching the model. Fallback answers are never stored, and a degraded
//    answer is degraded for every document (never cached model scores mixed with BM25). Entries
//    are the call's tenant's own (options.score_cache_scope kTenant, the default) or everyone's
//    (kShared).
//  - Long documents (options.long_documents chunk_max / chunk_mean; serving/long_documents.h): a
//    document longer than what fits beside the query is split into windows, every window is a
//    row (queued, cached, charged to the key's pairs quota like a document), and the document's
//    score is the best or the mean of its windows'. real_tokens counts every window's tokens.
//  - Gray release (serving/rollout.h, rollouts()): FindModel(call, name, version) with an empty
//    version asks the model's rollout which version answers (canary share, sticky by the call's
//    StickyValue of the rollout's sticky_header; after a rollback the stable version, after a
//    promotion the candidate); a named version bypasses the split, and the call is then never
//    compared (Call::named_version). Live Rerank and Infer answers of
//    a rollout's stable or candidate version, and the candidate's shadow answers, are recorded
//    (error; latency only for a shadow answer no live row contended with, see shadow_lane.h); a
//    canary duplicate on the stable version is only compared. A rerank (or a 1-label model's Infer
//    rows) the stable version answers in shadow mode (drawn by percent), and every one the
//    candidate answers in canary mode, is also offered to the other version's shadow lane
//    (serving/shadow_lane.h: its own backend, SCHED_IDLE threads, yields while live rows wait,
//    pre-empted by live rows, never blocks the live request), with the same deadline, once the
//    live rows are queued; that answer is only compared (Rollouts::RecordComparison) and never
//    returned, and its failure fails nothing live; a pre-empted one is no failure. Compared: a
//    rerank's document scores (long documents: per document, the lane splits and folds as the
//    live path does); Infer rows as one ranked list of raw logits (folded per input by `windows`),
//    only when the other version reads the same ids (vocabulary size) and fits the rows. Every
//    offer's outcome is counted in tide_rollout_shadow_requests_total{model,outcome}.
//  - SyncShadowLanes() opens a lane for each Rollouts::ShadowLanesWanted entry (opening runs on
//    the lane's own idle thread) and closes lanes no longer wanted or whose versions were reloaded
//    or unloaded. It runs on the rollout timer and after StartRollout; public for tests.
//  - Thread-safe. The model manager and the metrics must outlive the core.
#pragma once

#include <chrono>
#include <map>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "batching/batch_former.h"
#include "common/clock.h"
#include "absl/synchronization/mutex.h"
#include "guard/access.h"
#include "guard/api_keys.h"
#include "guard/concurrency_limiter.h"
#include "guard/memory_budget.h"
#include "serving/access_log.h"
#include "serving/call.h"
#include "serving/model_manager.h"
#include "serving/rollout.h"
#include "serving/rollout_json.h"
#include "serving/rollout_state_file.h"
#include "serving/score_cache.h"
#include "serving/scoring.h"
#include "serving/serving_metrics.h"
#include "serving/shadow_lane.h"
#include "serving/tensor_rows.h"
#include "serving/work_pool.h"

namespace tide::serving {

struct ServiceCoreOptions {
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
  // Bytes of the per-pair score cache (score_cache.h); 0: no cache.
  size_t score_cache_bytes = 0;
  // Who shares its entries: each tenant its own (a hit never reveals another tenant's pair), or
  // every caller (more hits; see ScoreCacheScope).
  ScoreCacheScope score_cache_scope = ScoreCacheScope::kTenant;
  // Bodies up to this size are cheap to parse and tokenize: they take the light lane.
  size_t light_body_bytes = 64 * 1024;
  const Clock* clock = nullptr;  // StillWanted's time source; null: the steady clock
  // How often the rollout guards are checked besides on every recorded answer and comparison
  // (a rollback comes within this of a bound being crossed by time alone); 0: no timer.
  std::chrono::milliseconds rollout_check_interval{250};
  // The structured access log (--access-log, access_log.h) both edges write to; null: none.
  std::shared_ptr<AccessLog> access_log;
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
};

// A text input of Tokenize: a text or a (text, text_pair) pair.
struct TextInput {
  std::string_view text;
  std::optional<std::string_view> text_pair;
};

// Token rows' answer: the model's result, or (breaker open) a fallback's.
struct InferOutcome {
  InferenceResult result;
  const char* fallback = nullptr;  // set: degraded; the fallback's name (kFallbackDefault)
};
using InferDone = absl::AnyInvocable<void(absl::StatusOr<InferOutcome>) &&>;

struct RolloutComparison;  // the two answers of one compared request (service_core.cc)

class ServiceCore {
 public:
  static absl::StatusOr<std::unique_ptr<ServiceCore>> Create(ModelManager* models, ServingMetrics* metrics,
                                                             const ServiceCoreOptions& options);
  ~ServiceCore();  // stops the tokenization workers first

  using Work = absl::AnyInvocable<void(absl::StatusOr<CallPtr>) &&>;
  void Start(const CallInfo& info, Work work);
  // Start with a first attempt on the caller's thread: with the score cache on and a body on the
  // light lane, `attempt` gets the admitted call before it is queued for a worker; when it answers
  // true it has answered the call and `work` is dropped unrun (a request the cache has whole skips
  // the worker queue, where it would wait behind the misses' tokenization). False: as Start.
  using Attempt = absl::AnyInvocable<bool(const CallPtr&)>;
  void Start(const CallInfo& info, Work work, Attempt attempt);
  // A rerank answered whole from the score cache, without the model: nullopt unless the cache is
  // on, the call reads it, the options are plain (truncate: no windows), no rollout tracks the
  // version and every pair is found; then the pairs are charged to the key (the status of a
  // refusal) and counted as hits. Counts nothing when it answers nullopt (the pairs are looked up
  // again by Rerank). Cheap enough for an I/O thread: one hash and lookup per pair.
  std::optional<absl::StatusOr<RerankScores>> RerankFromCache(const Call& call, const ServedModel& model,
                                                              std::string_view query,
                                                              std::span<const std::string_view> documents,
                                                              const PairOptions& options, bool raw_scores);

  // `name` empty: the default model (the only one, or the first by name); `version` empty: the
  // newest loaded version.
  absl::StatusOr<std::shared_ptr<ServedModel>> FindModel(std::string_view name = {},
                                                         std::string_view version = {}) const;
  // The same, for an admitted call: an empty version goes where the model's rollout sends it.
  absl::StatusOr<std::shared_ptr<ServedModel>> FindModel(const Call& call, std::string_view name = {},
                                                         std::string_view version = {}) const;

  // Scores `query` against every document (see scoring.h's ScoreOrFallback). `documents` need
  // only live until this call returns.
  void Rerank(const CallPtr& call, std::shared_ptr<ServedModel> model, std::string_view query,
              std::span<const std::string_view> documents, const PairOptions& options, bool raw_scores,
              RerankDone done);
  // Runs token rows (KServe tensors) through `model`. `windows`: which input each row belongs to
  // when long documents were split (what the edge folds the answer with); a rollout compares per
  // input.
  void Infer(const CallPtr& call, std::shared_ptr<ServedModel> model, std::vector<tokenizer::Encoding> rows,
             InferDone done, TensorWindows windows = {});
  // Encodes each input with the model's tokenizer, cut to its max_sequence_length from the end
  // `direction` names (unset: the tokenizer's own; see Encoding::truncated to refuse a cut input).
  absl::Status Tokenize(const Call& call, const ServedModel& model, std::span<const TextInput> inputs,
                        bool add_special_tokens, std::vector<tokenizer::Encoding>* out,
                        std::optional<tokenizer::TruncationDirection> direction = std::nullopt) const;

  // Whether `authorization` may call a route or RPC that needs `access` (guard::Authorize over the
  // keys in force): the key (null when none was needed), or 401 / 403. Both edges call it with
  // the access of the route table (server/access/access_table.h) before a route's handler runs.
  absl::StatusOr<std::shared_ptr<guard::Tenant>> Authorize(guard::Access access, std::string_view authorization,
                                                           guard::Listener listener = guard::Listener::kMain) const;
  // Replaces the single keys (--api-key-file / --admin-api-key-file re-read on SIGHUP) and the
  // file's table together, atomically; empty strings remove a single key.
  absl::Status SetKeys(std::string api_key, std::string admin_api_key, std::shared_ptr<guard::ApiKeys> file_keys);
  // Charges `pairs` to the call's key's pairs_per_second quota (a no-op without one).
  absl::Status ChargePairs(const Call& call, size_t pairs) const;

  // Draining: readiness turns false and Start refuses new calls.
  void SetDraining(bool draining) { draining_.store(draining); }
  bool draining() const { return draining_.load(); }
  // Not draining and every model ready.
  bool Ready() const;
  bool ModelReady(const ServedModel& model) const { return !draining() && model.ready(); }

  // What a load balancer needs (GET /load).
  struct Load {
    bool ready = false;
    int64_t in_flight = 0;
    int64_t max_concurrent_requests = 0;
    std::vector<batching::BatcherStats> queues;  // one per served version
  };
  Load CurrentLoad() const;
  // Mirrors the core's and the models' state into the metrics' gauges (call before rendering).
  void RefreshMetrics() const;

  const ScoreCache* score_cache() const { return cache_.get(); }
  Rollouts& rollouts() const { return *rollouts_; }
  // Starts the model's rollout (serving/rollout_json.h); without declaration.stable, the stable
  // version is the one answering now: the current rollout's stable version (after a promotion the
  // promoted one), else the newest loaded version other than the candidate. Both versions must be
  // loaded (kNotFound).
  absl::Status StartRollout(const std::string& model, const RolloutDeclaration& declaration);
  // Starts each rollout a loaded version declares in config.pbtxt (parameter `rollout`, taken from
  // the model's newest version) once per distinct text: a text whose candidate is not loaded yet
  // is retried on the next call, one that is invalid is logged once. Runs on the rollout timer
  // (every rollout_check_interval); public for tests.
  void ApplyDeclaredRollouts();
  void SyncShadowLanes();
  // Promote / Rollback (serving/rollout.h) through the API: the change is saved before answering.
  absl::Status PromoteRollout(const std::string& model);
  absl::Status RollbackRollout(const std::string& model, std::string_view reason);
  // --rollout-state-file. LoadRolloutState reads the file once at start-up (none yet: OK; a file
  // that cannot be read or parsed: the error, and tide refuses to start); its rollouts are put
  // back (Rollouts::Restore) by ApplySavedRollouts once both of their versions are loaded, on the
  // rollout timer, except for a model whose newest version declares a rollout in config.pbtxt:
  // the declared one wins. PersistRollouts writes every rollout (WriteFileAtomically) when any
  // changed since the last write: after StartRollout, PromoteRollout and RollbackRollout before
  // they return, and on every timer tick (a guard's rollback is on disk within
  // rollout_check_interval). Write errors are logged and retried on the next change or tick.
  absl::Status LoadRolloutState();
  void ApplySavedRollouts();
  void PersistRollouts();
  // The model's open shadow lane's counters (tests, diagnostics); nullopt: none open.
  std::optional<ShadowLane::Stats> ShadowLaneStats(const std::string& model) const;
  // Whether the model's shadow lane for `version` has its backend open.
  bool ShadowLaneReady(const std::string& model, int64_t version) const;
  ModelManager& models() const { return *models_; }
  ServingMetrics& metrics() const { return *metrics_; }
  // The access log; null when off.
  AccessLog* access_log() const { return options_.access_log.get(); }
  const ServiceCoreOptions& options() const { return options_; }

 private:
  ServiceCore(ModelManager* models, ServingMetrics* metrics, const ServiceCoreOptions& options);
  // Every admission step of Start before the worker queue; the admitted call or the refusal.
  absl::StatusOr<CallPtr> Admit(const CallInfo& info);
  // Rerank of rows already split (the cache, the model or its fallback), without the quota charge.
  void RerankRows(const CallPtr& call, std::shared_ptr<ServedModel> model, std::string_view query,
                  std::span<const std::string_view> documents, const PairOptions& options, bool raw_scores,
                  RerankDone done);
  // Rerank as the live answer (cache, long documents, the model or its fallback), without rollouts.
  void RerankLive(const CallPtr& call, std::shared_ptr<ServedModel> model, std::string_view query,
                  std::span<const std::string_view> documents, const PairOptions& options, bool raw_scores,
                  RerankDone done);
  // Offers `job` to the shadow lane of `other_version`; the comparison the live answer joins, or
  // null when the lane refused (counted in tide_rollout_shadow_requests_total).
  std::shared_ptr<RolloutComparison> OfferShadow(const std::string& name, int64_t other_version,
                                                        bool live_is_stable, ShadowJob job, TensorWindows fold);
  void Shed(const char* reason) const;
  void CountKey(const guard::Tenant& tenant, const char* outcome) const;
  std::shared_ptr<guard::ApiKeys> Keys() const;
  // Returns freed heap to the OS after a burst (MemoryBudget's on_drained), on a worker.
  void TrimHeap();

  ModelManager* const models_;
  ServingMetrics* const metrics_;
  const ServiceCoreOptions options_;
  const Clock* const clock_;
  std::atomic<bool> draining_{false};
  mutable absl::Mutex keys_mu_;
  std::shared_ptr<guard::ApiKeys> keys_ ABSL_GUARDED_BY(keys_mu_);  // null: no credential asked
  guard::ConcurrencyLimiter limiter_{options_.max_concurrent_requests};
  std::unique_ptr<guard::MemoryBudget> budget_;
  std::atomic<bool> trim_pending_{false};
  std::unique_ptr<ScoreCache> cache_;  // null: no score cache
  std::shared_ptr<Rollouts> rollouts_;  // shared with shadow answers that may come after the core
  absl::Mutex declared_mu_;
  // Per model: the declared rollout text last applied (or found invalid).
  std::map<std::string, std::string> declared_ ABSL_GUARDED_BY(declared_mu_);
  mutable absl::Mutex refresh_mu_;
  mutable uint64_t mirrored_evictions_ ABSL_GUARDED_BY(refresh_mu_) = 0;
  struct LaneEntry {
    Rollouts::LaneWanted wanted;
    uint64_t scored_generation = 0, stable_generation = 0, candidate_generation = 0;
    std::unique_ptr<ShadowLane> lane;
  };
  // Live threads offer under a reader lock (Offer never blocks); SyncShadowLanes swaps entries
  // under the writer lock and destroys closed lanes outside it.
  mutable absl::Mutex lanes_mu_;
  std::map<std::string, LaneEntry> lanes_ ABSL_GUARDED_BY(lanes_mu_);
  absl::Mutex sync_mu_;  // one SyncShadowLanes at a time
  absl::Mutex state_mu_;  // the state file: saved rollouts waiting for their versions, last write
  std::vector<SavedRollout> saved_ ABSL_GUARDED_BY(state_mu_);
  uint64_t persisted_changes_ ABSL_GUARDED_BY(state_mu_) = 0;
  bool persisted_once_ ABSL_GUARDED_BY(state_mu_) = false;
  // Last: destroyed first, so no worker runs while the members above go away.
  std::unique_ptr<WorkPool> pool_;
};

}  // namespace tide::serving
