// tide::serving::ShadowLane — scores rerank requests on one model version for comparison only
// (a gray release's shadow, or a canary's duplicate on the stable version), with nothing but the
// CPU time live traffic leaves idle.
//
// Contract:
//  - Create(model, options) starts the lane's worker thread and returns at once. The worker opens
//    the lane's own backend of `model` (ServedModel::OpenBackend(kShadowLaneInstance): one session
//    running on the calling thread alone, its own arena, weights shared with the live instances,
//    see runtime/shared_weights.h) at nice 19, runs it once on the largest batch shapes it forms
//    (its arena sized), and only then puts itself under SCHED_IDLE (options.idle_scheduling;
//    batching/thread_priority.h). Opening allocates and faults in memory under the process's mmap
//    lock, which a preempted SCHED_IDLE thread would hold while live threads wait for it; a warm
//    session maps no more memory. Without idle scheduling the worker runs at options.nice
//    throughout. Until the lane is open (ready()) every Offer is refused. A failed open is
//    logged; the lane then refuses everything (failed()).
//  - Offer(job) never blocks and never waits for a lock the worker may hold: it refuses (returns
//    the reason, and `job.done` is destroyed unrun) when the lane is not ready, options.live_waiting()
//    says live rows wait, max_queued_jobs are already queued, or the worker holds the queue's lock
//    at that instant (TryLock). An accepted job's `done` runs exactly once.
//  - The worker takes jobs in order. Before a job starts, before each chunk of tokenization and
//    before each batch it yields to live work: while options.live_waiting(), or while
//    options.live_idle_for(options.hold_off) is false (live rows waited or ran on a preempting
//    version less than hold_off ago: the short gaps between two live batches of a busy server
//    are not idle capacity, and a shadow batch started in one would only be stopped again and
//    leave the live batch cold caches), it polls every
//    options.yield_poll, and abandons the job (done(kUnavailable), counted abandoned_live_waiting)
//    once it has yielded for options.max_yield in all, or (done(kDeadlineExceeded)) once the job's
//    deadline passed. So shadow rows are the ones dropped when live rows wait. Otherwise it
//    tokenizes the pairs (TokenizePairs with the job's options; long documents split into windows
//    first, serving/long_documents.h) or takes the job's ready rows, runs them in batches of at
//    most max_batch_size rows and the live batcher's token cap (max_batch_tokens, or
//    batch_saturation_tokens when smaller; a row past it runs alone), and answers every
//    document's score (RerankScore of the model's activation, raw as asked; a long document's
//    folded from its windows' as the live answer's) or every ready row's.
//  - Pre-emption: while the lane is open, its backend's RunTerminator (runtime/model_backend.h)
//    is attached to the LivePreemption of every version in options.preempted_by
//    (serving/live_preemption.h): live rows submitted to one of them stop the running shadow batch
//    at once (ONNX Runtime's RunOptions::SetTerminate; lock-free on the live thread). The job is
//    then dropped: done(kAborted), counted preempted, never a failure of the version. Before each
//    batch the worker clears the terminator and only then looks for waiting live rows, so a
//    signal is never lost between the look and the Run; live rows signalled during the look (and
//    taken by an instance at once) delay the batch by one more yield_poll, counted as yielding. A backend without a terminator is not
//    pre-empted (its batch runs to the end, under SCHED_IDLE only while a CPU is otherwise idle).
//  - Every `done` runs on the lane's reporter thread (normal priority), never on the idle worker:
//    what `done` locks (the rollout's windows, shared with live requests) is then never held by a
//    thread that a live thread can starve (priority inversion). The reporter and the worker share
//    one mailbox lock, which no live thread takes.
//  - ShadowOutcome::run_time is the job's tokenize + inference time (real time, yields excluded;
//    the clock in options only decides deadlines); `contended` is set when live
//    rows waited when it finished (its time then includes preemption: not a latency sample).
//  - options.live_waiting must be cheap and lock-free (ServedModel::QueuedRows); it is called
//    from the idle worker and from Offer.
//  - Stats() counts jobs by outcome. The destructor stops both threads: queued jobs are answered
//    kCancelled, the running batch is waited for.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "runtime/model_backend.h"
#include "serving/scoring.h"
#include "serving/served_model.h"

namespace tide::serving {

struct ShadowOutcome {
  std::vector<float> scores;  // one per document, in order (ShadowJob::vectors: [rows, labels])
  Clock::duration run_time{};
  bool contended = false;
};
using ShadowDone = absl::AnyInvocable<void(absl::StatusOr<ShadowOutcome>) &&>;

struct ShadowJob {
  std::string query;
  std::vector<std::string> documents;
  // Long documents (chunk_max / chunk_mean) are split into windows with the lane model's chunk
  // settings, as a live rerank's are, and each document's score is folded from its windows'.
  PairOptions options;
  // Instead of query + documents: rows already tokenized (a KServe request's), scored as they are
  // (one score per row, unfolded).
  std::vector<tokenizer::Encoding> rows;
  // With rows: every row's whole output [rows, labels], raw (an embedding model's vectors).
  bool vectors = false;
  bool raw_scores = false;
  Clock::time_point deadline = Clock::time_point::max();
  // Set (non-null): the job starts only once it holds true, i.e. once the live request it shadows
  // queued its own rows (whose arrival would otherwise stop it, see pre-emption below). Waiting
  // for it counts as yielding to live rows.
  std::shared_ptr<const std::atomic<bool>> live_submitted;
  ShadowDone done;
};

struct ShadowLaneOptions {
  // True when live rows wait anywhere the lane's work would compete with (the stable and the
  // candidate version's queues). Null: never.
  std::function<bool()> live_waiting;
  // True when no live row waited in or ran on those versions for at least the given time
  // (ServedModel::LiveIdleFor of each). Null, or hold_off zero: no hold-off.
  std::function<bool(Clock::duration)> live_idle_for;
  // How long live traffic must have left the versions idle before a shadow batch starts.
  std::chrono::milliseconds hold_off{10};
  // Versions whose live rows stop the lane's running batch (their ServedModel::live_preemption());
  // the lane keeps them alive while it is open. Empty: the batch is never stopped.
  std::vector<std::shared_ptr<ServedModel>> preempted_by;
  // Jobs queued on the lane beyond which Offer refuses: a shadow that cannot keep up drops
  // requests instead of building a backlog that would run on stale requests.
  size_t max_queued_jobs = 2;
  // How long one job may wait for live rows to leave the queues before it is abandoned, and how
  // often the worker looks meanwhile.
  std::chrono::milliseconds max_yield{1000};
  std::chrono::microseconds yield_poll{2000};
  // SCHED_IDLE for the worker and every thread the backend creates; false only in tests that
  // cannot change scheduling.
  bool idle_scheduling = true;
  // Without idle_scheduling: nice steps (0..19) added to the worker (and so the backend's threads).
  int nice = 0;
  const Clock* clock = nullptr;  // deadlines and run_time; null: the steady clock
};

class ShadowLane {
 public:
  enum class Refusal { kNone, kNotReady, kLiveWaiting, kQueueFull, kBusy, kStopped };
  struct Stats {
    uint64_t scored = 0;
    uint64_t failed = 0;
    uint64_t refused_not_ready = 0, refused_live_waiting = 0, refused_queue_full = 0, refused_busy = 0;
    uint64_t abandoned_live_waiting = 0, abandoned_deadline = 0;
    uint64_t preempted = 0;  // running batch stopped by live rows
  };

  static std::unique_ptr<ShadowLane> Create(std::shared_ptr<ServedModel> model, ShadowLaneOptions options);
  ~ShadowLane();
  ShadowLane(const ShadowLane&) = delete;
  ShadowLane& operator=(const ShadowLane&) = delete;

  // kNone: accepted (job.done will run); otherwise why not (job.done was destroyed unrun).
  Refusal Offer(ShadowJob job);
  bool ready() const { return state_.load(std::memory_order_acquire) == State::kReady; }
  // True once the backend failed to open.
  bool failed() const { return state_.load(std::memory_order_acquire) == State::kFailed; }
  const ServedModel& model() const { return *model_; }
  const std::shared_ptr<ServedModel>& served() const { return model_; }
  Stats GetStats() const;

 private:
  // Implementation details follow.
  enum class State { kOpening, kReady, kFailed, kStopped };
  ShadowLane(std::shared_ptr<ServedModel> model, ShadowLaneOptions options);
  bool LiveWaiting() const { return options_.live_waiting && options_.live_waiting(); }
  // No live row waits, and (with a hold-off) none waited or ran for options.hold_off.
  bool LiveQuiet() const {
    if (LiveWaiting()) return false;
    return options_.hold_off.count() <= 0 || !options_.live_idle_for || options_.live_idle_for(options_.hold_off);
  }
  void WorkerLoop();
  void ReporterLoop();
  // Runs the largest batch shapes once (sizes the session's arena).
  absl::Status WarmUp();
  // Scores one job on the worker; the status that abandons it, or its outcome.
  absl::StatusOr<ShadowOutcome> Score(const ShadowJob& job);
  // Hands `done` and its result to the reporter.
  void Report(ShadowDone done, absl::StatusOr<ShadowOutcome> result);

  const std::shared_ptr<ServedModel> model_;
  const ShadowLaneOptions options_;
  const Clock* const clock_;
  std::atomic<State> state_{State::kOpening};
  std::unique_ptr<runtime::ModelBackend> backend_;  // the worker's only
  // backend_'s, or null. The worker's only; live threads reach it through the LivePreemptions it
  // is attached to.
  runtime::RunTerminator* terminator_ = nullptr;
  runtime::TokenBatch input_;                       // the worker's only, reused
  runtime::Logits logits_;

  absl::Mutex queue_mu_;  // Offer (TryLock) and the worker
  absl::CondVar queue_cv_;
  std::deque<ShadowJob> queue_ ABSL_GUARDED_BY(queue_mu_);
  bool stop_ ABSL_GUARDED_BY(queue_mu_) = false;
  std::atomic<bool> stopping_{false};  // stop_, readable without the lock
  std::atomic<size_t> queued_{0};

  absl::Mutex mail_mu_;  // the worker and the reporter
  absl::CondVar mail_cv_;
  std::deque<std::pair<ShadowDone, absl::StatusOr<ShadowOutcome>>> mail_ ABSL_GUARDED_BY(mail_mu_);
  bool mail_closed_ ABSL_GUARDED_BY(mail_mu_) = false;

  std::atomic<uint64_t> scored_{0}, failed_{0}, not_ready_{0}, live_refused_{0}, full_{0}, busy_{0};
  std::atomic<uint64_t> abandoned_live_{0}, abandoned_deadline_{0}, preempted_{0};
  std::thread worker_, reporter_;
};

std::string_view ShadowRefusalName(ShadowLane::Refusal refusal);

}  // namespace tide::serving
