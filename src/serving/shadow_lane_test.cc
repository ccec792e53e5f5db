// ShadowLane: the policy that keeps shadow scoring on idle capacity, over fake backends: its own
// backend opened on an idle-scheduled thread, answers on the normal-priority reporter, refusals
// that never wait (not ready, live rows waiting, queue full), yielding to live rows and dropping
// the shadow job first, deadlines, closing with jobs queued, and pre-emption: live rows queued on
// either version stop the running shadow batch (LivePreemption -> the backend's RunTerminator).
#include "serving/shadow_lane.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "batching/thread_priority.h"
#include "gtest/gtest.h"
#include "serving/live_preemption.h"
#include "serving/testing/fake_backend.h"
#include "wait_for.h"

namespace tide::serving {
namespace {

using testing::BackendControl;
using testing::kHang;

// Records where the lane's backend was opened and ran; otherwise the shared fake.
struct OpenedOn {
  std::atomic<int> lane_opens{0};
  std::atomic<bool> lane_opened_idle{false};
  std::atomic<int> lane_opened_nice{-100};
  std::atomic<int> lane_runs{0}, lane_runs_idle{0};
  absl::Notification* hold_open = nullptr;  // set: the lane's open waits for it
};

class RecordingBackend : public runtime::ModelBackend {
 public:
  RecordingBackend(std::unique_ptr<runtime::ModelBackend> inner, OpenedOn* opened)
      : inner_(std::move(inner)), opened_(opened) {}
  absl::Status Run(const runtime::TokenBatch& b, runtime::Logits* out) override {
    opened_->lane_runs++;
    if (batching::CurrentThreadIsIdleScheduled()) opened_->lane_runs_idle++;
    return inner_->Run(b, out);
  }
  const ModelSignature& signature() const override { return inner_->signature(); }

 private:
  std::unique_ptr<runtime::ModelBackend> inner_;
  OpenedOn* opened_;
};

std::shared_ptr<ServedModel> Model(std::shared_ptr<BackendControl> c, OpenedOn* opened,
                                   testing::ModelSpec spec = {}) {
  BackendFactory fake = testing::Fake(c);
  BackendFactory factory = [fake, opened](const LoadedModel& m, int instance) {
    if (instance != kShadowLaneInstance) return fake(m, instance);
    opened->lane_opens++;
    opened->lane_opened_idle = batching::CurrentThreadIsIdleScheduled();
    opened->lane_opened_nice = batching::CurrentThreadNice();
    if (opened->hold_open != nullptr) opened->hold_open->WaitForNotificationWithTimeout(kHang);
    auto backend = fake(m, instance);
    if (!backend.ok()) return backend;
    return absl::StatusOr<std::unique_ptr<runtime::ModelBackend>>(
        std::make_unique<RecordingBackend>(*std::move(backend), opened));
  };
  ServedModelOptions o;
  auto m = ServedModel::Create(testing::Loaded(spec), factory, o);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::shared_ptr<ServedModel>(*std::move(m)) : nullptr;
}

struct Answer {
  absl::Notification done;
  absl::StatusOr<ShadowOutcome> result = absl::UnknownError("no answer");
  std::atomic<bool> on_idle_thread{true};
};

ShadowJob Job(Answer* answer, std::vector<std::string> docs = {"b", "c", "d"}) {
  ShadowJob job;
  job.query = "a";
  job.documents = std::move(docs);
  job.done = [answer](absl::StatusOr<ShadowOutcome> r) {
    answer->on_idle_thread = batching::CurrentThreadIsIdleScheduled();
    answer->result = std::move(r);
    answer->done.Notify();
  };
  return job;
}

::testing::AssertionResult WaitReady(const ShadowLane& lane) {
  return test_support::WaitFor([&] { return lane.ready(); }, absl::Seconds(10), "the shadow lane to be ready");
}

// The lane opens (and warms up) its own backend at nice 19, then scores under SCHED_IDLE; the
// answer runs on the normal-priority reporter.
TEST(ShadowLane, ScoresOnItsOwnIdleBackendAndAnswersOnANormalThread) {
  auto control = std::make_shared<BackendControl>();
  control->decisive_token = 6;  // "c"
  OpenedOn opened;
  auto model = Model(control, &opened);
  Answer a;  // outlives the lane, whose threads may still answer it
  auto lane = ShadowLane::Create(model, {});
  ASSERT_TRUE(WaitReady(*lane));
  EXPECT_EQ(opened.lane_opens.load(), 1);
  // Opened at nice 19, not under SCHED_IDLE: opening maps memory (the mmap lock live threads need).
  EXPECT_FALSE(opened.lane_opened_idle.load());
  EXPECT_EQ(opened.lane_opened_nice.load(), 19);
  EXPECT_EQ(opened.lane_runs.load(), 2);  // the warm-up batches, before the switch
  EXPECT_EQ(opened.lane_runs_idle.load(), 0);
  const int warmup_rows = control->rows_run.load();  // the warm-ups' rows
  ASSERT_EQ(lane->Offer(Job(&a)), ShadowLane::Refusal::kNone);
  ASSERT_TRUE(a.done.WaitForNotificationWithTimeout(kHang));
  ASSERT_TRUE(a.result.ok()) << a.result.status();
  ASSERT_EQ(a.result->scores.size(), 3u);
  EXPECT_LT(a.result->scores[0], a.result->scores[1]);  // "c" ranks first
  EXPECT_GT(a.result->scores[1], a.result->scores[2]);
  EXPECT_FALSE(a.result->contended);
  EXPECT_FALSE(a.on_idle_thread.load());  // what done locks is never held by an idle thread
  EXPECT_EQ(lane->GetStats().scored, 1u);
  EXPECT_EQ(control->rows_run.load() - warmup_rows, 3);
  EXPECT_EQ(opened.lane_runs_idle.load(), 3);  // max_batch_size 1: one batch per document, all idle
}

// The lane batches as the live batcher would: up to max_batch_size rows, but never past the batch
// token cap, so a decoder whose batch saturation is one row scores one row per batch here too.
TEST(ShadowLane, BatchesUpToTheLiveBatchersTokenCap) {
  for (const int64_t saturation : {int64_t{0}, int64_t{1}}) {
    SCOPED_TRACE(saturation);
    auto control = std::make_shared<BackendControl>();
    OpenedOn opened;
    testing::ModelSpec spec;
    spec.max_batch_size = 8;
    spec.parameters.batch_saturation_tokens = saturation;  // 0: off (the 1024-token budget alone)
    auto model = Model(control, &opened, spec);
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(model->batch_token_cap(), saturation == 0 ? model->max_batch_tokens() : 1u);
    Answer a;
    auto lane = ShadowLane::Create(model, {});
    ASSERT_TRUE(WaitReady(*lane));
    ASSERT_EQ(lane->Offer(Job(&a)), ShadowLane::Refusal::kNone);
    ASSERT_TRUE(a.done.WaitForNotificationWithTimeout(kHang));
    ASSERT_TRUE(a.result.ok()) << a.result.status();
    EXPECT_EQ(a.result->scores.size(), 3u);
    EXPECT_EQ(opened.lane_runs_idle.load(), saturation == 0 ? 1 : 3);
  }
}

TEST(ShadowLane, RefusesAtOnceWhenNotReadyLiveRowsWaitOrTheQueueIsFull) {
  auto control = std::make_shared<BackendControl>();
  absl::Notification open;
  OpenedOn opened;
  opened.hold_open = &open;
  auto model = Model(control, &opened);
  std::atomic<bool> live{false};
  ShadowLaneOptions o;
  o.live_waiting = [&live] { return live.load(); };
  o.max_queued_jobs = 1;
  o.idle_scheduling = false;
  Answer refused, running, queued;
  auto lane = ShadowLane::Create(model, o);
  EXPECT_EQ(lane->Offer(Job(&refused)), ShadowLane::Refusal::kNotReady);  // its backend is still opening
  open.Notify();
  ASSERT_TRUE(WaitReady(*lane));
  live = true;
  EXPECT_EQ(lane->Offer(Job(&refused)), ShadowLane::Refusal::kLiveWaiting);
  live = false;
  // One job held inside the backend, one queued: the next is refused, not queued.
  control->armed = true;
  ASSERT_EQ(lane->Offer(Job(&running)), ShadowLane::Refusal::kNone);
  ASSERT_TRUE(control->entered.WaitForNotificationWithTimeout(kHang));
  ASSERT_EQ(lane->Offer(Job(&queued)), ShadowLane::Refusal::kNone);
  EXPECT_EQ(lane->Offer(Job(&refused)), ShadowLane::Refusal::kQueueFull);
  control->gate.Notify();
  ASSERT_TRUE(running.done.WaitForNotificationWithTimeout(kHang));
  ASSERT_TRUE(queued.done.WaitForNotificationWithTimeout(kHang));
  EXPECT_TRUE(running.result.ok());
  EXPECT_TRUE(queued.result.ok());
  EXPECT_FALSE(refused.done.HasBeenNotified());  // a refused job's done never runs
  const ShadowLane::Stats s = lane->GetStats();
  EXPECT_EQ(s.refused_not_ready, 1u);
  EXPECT_EQ(s.refused_live_waiting, 1u);
  EXPECT_EQ(s.refused_queue_full, 1u);
  EXPECT_EQ(s.scored, 2u);
}

// A job that finds live rows waiting yields; it runs once they are gone, and is dropped (not the
// live rows) when they keep waiting for max_yield.
TEST(ShadowLane, YieldsToLiveRowsAndIsDroppedWhenTheyKeepWaiting) {
  auto control = std::make_shared<BackendControl>();
  OpenedOn opened;
  auto model = Model(control, &opened);  // max_batch_size 1: a job runs one batch per document
  std::atomic<bool> live{false};
  std::atomic<int> live_from_rows{1 << 30};  // live rows "arrive" once the backend ran this many rows
  ShadowLaneOptions o;
  o.live_waiting = [&] { return live.load() || control->rows_run.load() >= live_from_rows.load(); };
  o.max_yield = std::chrono::milliseconds(1000);
  o.idle_scheduling = false;
  o.max_queued_jobs = 4;
  Answer first, waits, cut;
  auto lane = ShadowLane::Create(model, o);
  ASSERT_TRUE(WaitReady(*lane));
  const int base = control->rows_run.load();  // the live instance's warm-up
  control->armed = true;
  ASSERT_EQ(lane->Offer(Job(&first, {"b"})), ShadowLane::Refusal::kNone);
  ASSERT_TRUE(control->entered.WaitForNotificationWithTimeout(kHang));
  ASSERT_EQ(lane->Offer(Job(&waits, {"b"})), ShadowLane::Refusal::kNone);
  live = true;  // live rows arrive while the first job's batch runs
  control->gate.Notify();
  ASSERT_TRUE(first.done.WaitForNotificationWithTimeout(kHang));
  ASSERT_TRUE(first.result.ok()) << first.result.status();
  EXPECT_TRUE(first.result->contended);  // its time is no latency sample
  // The second yields (it does not run while live rows wait) ...
  EXPECT_FALSE(waits.done.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  EXPECT_EQ(control->rows_run.load() - base, 1);
  live = false;  // ... and runs once they are gone.
  ASSERT_TRUE(waits.done.WaitForNotificationWithTimeout(kHang));
  EXPECT_TRUE(waits.result.ok());
  EXPECT_EQ(control->rows_run.load() - base, 2);
  // Live rows that keep waiting: the shadow job is the one dropped, also between the batches of
  // one job: a 3-document job (3 batches) that sees live rows arrive after its first batch yields
  // for max_yield and stops there.
  live = false;
  live_from_rows = control->rows_run.load() + 1;
  ASSERT_EQ(lane->Offer(Job(&cut, {"b", "c", "d"})), ShadowLane::Refusal::kNone);
  ASSERT_TRUE(cut.done.WaitForNotificationWithTimeout(kHang));
  EXPECT_EQ(cut.result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(control->rows_run.load() - base, 3);
  EXPECT_EQ(lane->GetStats().abandoned_live_waiting, 1u);
}

// The hold-off: with no live row waiting, a shadow batch still waits until live_idle_for(hold_off)
// holds (the live versions were idle that long); waiting counts as yielding.
TEST(ShadowLane, StartsABatchOnlyAfterLiveTrafficLeftTheVersionsIdleForTheHoldOff) {
  auto control = std::make_shared<BackendControl>();
  OpenedOn opened;
  auto model = Model(control, &opened);
  std::atomic<bool> quiet{false};
  std::atomic<long> asked_ms{-1};
  ShadowLaneOptions o;
  o.live_waiting = [] { return false; };
  o.live_idle_for = [&](Clock::duration d) {
    asked_ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
    return quiet.load();
  };
  o.hold_off = std::chrono::milliseconds(25);
  o.max_yield = std::chrono::milliseconds(300);
  o.idle_scheduling = false;
  auto lane = ShadowLane::Create(model, o);
  ASSERT_TRUE(WaitReady(*lane));
  const int base = control->rows_run.load();
  Answer held, dropped;
  ASSERT_EQ(lane->Offer(Job(&held, {"b"})), ShadowLane::Refusal::kNone);
  EXPECT_FALSE(held.done.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  EXPECT_EQ(control->rows_run.load(), base);  // not run while the versions were busy recently
  EXPECT_EQ(asked_ms.load(), 25);
  quiet = true;
  ASSERT_TRUE(held.done.WaitForNotificationWithTimeout(kHang));
  ASSERT_TRUE(held.result.ok()) << held.result.status();
  EXPECT_EQ(control->rows_run.load() - base, 1);
  // Never quiet long enough: dropped after max_yield, as when live rows keep waiting.
  quiet = false;
  ASSERT_EQ(lane->Offer(Job(&dropped, {"b"})), ShadowLane::Refusal::kNone);
  ASSERT_TRUE(dropped.done.WaitForNotificationWithTimeout(kHang));
  EXPECT_EQ(dropped.result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(control->rows_run.load() - base, 1);
  EXPECT_EQ(lane->GetStats().abandoned_live_waiting, 1u);
  // hold_off 0 turns it off: live_idle_for is not asked.
  ShadowLaneOptions none = o;
  none.hold_off = std::chrono::milliseconds(0);
  asked_ms = -1;
  auto lane0 = ShadowLane::Create(model, none);
  ASSERT_TRUE(WaitReady(*lane0));
  Answer at_once;
  ASSERT_EQ(lane0->Offer(Job(&at_once, {"b"})), ShadowLane::Refusal::kNone);
  ASSERT_TRUE(at_once.done.WaitForNotificationWithTimeout(kHang));
  EXPECT_TRUE(at_once.result.ok()) << at_once.result.status();
  EXPECT_EQ(asked_ms.load(), -1);
}

TEST(ShadowLane, AJobPastItsDeadlineIsDroppedUnrun) {
  auto control = std::make_shared<BackendControl>();
  OpenedOn opened;
  auto model = Model(control, &opened);
  FakeClock clock;
  ShadowLaneOptions o;
  o.clock = &clock;
  o.idle_scheduling = false;
  Answer a;
  auto lane = ShadowLane::Create(model, o);
  ASSERT_TRUE(WaitReady(*lane));
  const int base = control->rows_run.load();
  ShadowJob job = Job(&a);
  job.deadline = clock.Now() - std::chrono::milliseconds(1);
  ASSERT_EQ(lane->Offer(std::move(job)), ShadowLane::Refusal::kNone);
  ASSERT_TRUE(a.done.WaitForNotificationWithTimeout(kHang));
  EXPECT_EQ(a.result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(lane->GetStats().abandoned_deadline, 1u);
  EXPECT_EQ(control->rows_run.load(), base);
}

TEST(ShadowLane, ClosingAnswersQueuedJobsCancelledAndFinishesTheRunningOne) {
  auto control = std::make_shared<BackendControl>();
  OpenedOn opened;
  auto model = Model(control, &opened);
  ShadowLaneOptions o;
  o.idle_scheduling = false;
  o.max_queued_jobs = 1;  // the probes below are refused while the lane still runs
  Answer running, queued, probe;
  auto lane = ShadowLane::Create(model, o);
  ASSERT_TRUE(WaitReady(*lane));
  control->armed = true;
  ASSERT_EQ(lane->Offer(Job(&running)), ShadowLane::Refusal::kNone);
  ASSERT_TRUE(control->entered.WaitForNotificationWithTimeout(kHang));
  ASSERT_EQ(lane->Offer(Job(&queued)), ShadowLane::Refusal::kNone);
  ShadowLane* raw = lane.get();  // alive until the worker, held in the backend, is joined
  std::thread closer([&] { lane.reset(); });
  ShadowLane::Refusal r = ShadowLane::Refusal::kNone;
  EXPECT_TRUE(test_support::WaitFor([&] { return (r = raw->Offer(Job(&probe))) == ShadowLane::Refusal::kStopped; },
                                    absl::Seconds(10), "the closing lane to refuse offers as stopped"));
  ASSERT_EQ(r, ShadowLane::Refusal::kStopped);
  control->gate.Notify();
  closer.join();
  ASSERT_TRUE(running.done.HasBeenNotified());
  ASSERT_TRUE(queued.done.HasBeenNotified());
  EXPECT_TRUE(running.result.ok());
  EXPECT_EQ(queued.result.status().code(), absl::StatusCode::kCancelled);
}

// ---- pre-emption -----------------------------------------------------------------------------

// A terminator that records any Terminate reaching it after its Detach returned.
class CheckedTerminator : public runtime::RunTerminator {
 public:
  void Terminate() noexcept override {
    if (detached.load()) late.fetch_add(1);
    terminated_.store(true);
  }
  void Reset() noexcept override { terminated_.store(false); }
  bool terminated() const noexcept override { return terminated_.load(); }
  std::atomic<bool> detached{false};
  std::atomic<int> late{0};

 private:
  std::atomic<bool> terminated_{false};
};

TEST(LivePreemption, StopsOnlyTheAttachedRunAndNothingReachesATerminatorAfterItsDetach) {
  CheckedTerminator a, b;
  LivePreemption p;
  p.LiveRowsQueued();  // nothing attached: nothing to stop
  p.Attach(&a);
  p.LiveRowsQueued();
  EXPECT_TRUE(a.terminated());
  a.Reset();
  p.Attach(&b);  // replaces a
  p.Detach(&a);  // a no-op: b stays attached
  p.LiveRowsQueued();
  EXPECT_FALSE(a.terminated());
  EXPECT_TRUE(b.terminated());
  b.Reset();
  p.Detach(&b);
  p.LiveRowsQueued();
  EXPECT_FALSE(b.terminated());
  // Live threads signal without pause while terminators are attached and detached: once Detach
  // returned, no Terminate reaches the detached one (it could be destroyed).
  std::atomic<bool> stop{false};
  std::vector<std::thread> live;
  for (int t = 0; t < 2; ++t) {
    live.emplace_back([&] {
      while (!stop.load()) p.LiveRowsQueued();
    });
  }
  std::vector<std::unique_ptr<CheckedTerminator>> used;
  for (int i = 0; i < 2000; ++i) {
    used.push_back(std::make_unique<CheckedTerminator>());
    p.Attach(used.back().get());
    p.Detach(used.back().get());
    used.back()->detached.store(true);
  }
  stop = true;
  for (auto& t : live) t.join();
  int late = 0;
  for (const auto& t : used) late += t->late.load();
  EXPECT_EQ(late, 0);
}

::testing::AssertionResult WaitUntil(const std::function<bool()>& done) {
  return test_support::WaitFor(done, absl::Seconds(10));
}

// Live rows queued on the stable or on the candidate version stop the lane's running batch at
// once: the job is dropped (kAborted, counted preempted), the live rows are answered, and the next
// job is not stopped by the old signal. A job whose own live request has not queued its rows yet
// waits for them instead of being stopped by them.
TEST(ShadowLane, LiveRowsQueuedOnEitherVersionStopTheRunningBatch) {
  auto stable_control = std::make_shared<BackendControl>();
  auto candidate_live = std::make_shared<BackendControl>();
  auto lane_control = std::make_shared<BackendControl>();
  testing::ModelSpec spec;
  spec.version = 1;
  std::shared_ptr<ServedModel> stable = testing::Served(spec, stable_control);
  spec.version = 2;
  auto created = ServedModel::Create(testing::Loaded(spec), testing::FakeWithLane(candidate_live, lane_control), {});
  ASSERT_TRUE(created.ok()) << created.status();
  std::shared_ptr<ServedModel> candidate = *std::move(created);
  FakeClock clock;
  ShadowLaneOptions o;
  o.live_waiting = [&] { return stable->QueuedRows() > 0 || candidate->QueuedRows() > 0; };
  o.preempted_by = {stable, candidate};
  o.idle_scheduling = false;
  o.clock = &clock;
  auto lane = ShadowLane::Create(candidate, o);
  ASSERT_TRUE(WaitReady(*lane));
  int round = 0;
  for (const std::shared_ptr<ServedModel>& live : {stable, candidate}) {
    ++round;
    lane_control->block_until_terminated = true;
    Answer shadow;
    ASSERT_EQ(lane->Offer(Job(&shadow, {"b"})), ShadowLane::Refusal::kNone);
    ASSERT_TRUE(WaitUntil([&] { return lane_control->blocked_runs.load() == round; }));
    std::vector<tokenizer::Encoding> rows = testing::Rows(1);
    absl::Notification live_done;
    live->Submit(rows, RowTask::Admission{}, [&](absl::StatusOr<InferenceResult> r) {
      EXPECT_TRUE(r.ok()) << r.status();
      live_done.Notify();
    });
    ASSERT_TRUE(shadow.done.WaitForNotificationWithTimeout(kHang));
    EXPECT_EQ(shadow.result.status().code(), absl::StatusCode::kAborted) << "version " << live->version();
    EXPECT_EQ(lane->GetStats().preempted, static_cast<uint64_t>(round));
    EXPECT_EQ(lane_control->terminated_runs.load(), round);
    EXPECT_EQ(lane->GetStats().failed, 0u);
    ASSERT_TRUE(live_done.WaitForNotificationWithTimeout(kHang));
  }
  // The next job runs to its end: the terminator was cleared before it.
  lane_control->block_until_terminated = false;
  Answer after;
  ASSERT_EQ(lane->Offer(Job(&after, {"b"})), ShadowLane::Refusal::kNone);
  ASSERT_TRUE(after.done.WaitForNotificationWithTimeout(kHang));
  EXPECT_TRUE(after.result.ok()) << after.result.status();
  // A job that shadows a live request waits for that request's rows before it starts.
  auto submitted = std::make_shared<std::atomic<bool>>(false);
  Answer own;
  ShadowJob job = Job(&own, {"b"});
  job.live_submitted = submitted;
  const int rows_before = lane_control->rows_run.load();
  ASSERT_EQ(lane->Offer(std::move(job)), ShadowLane::Refusal::kNone);
  EXPECT_FALSE(own.done.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  EXPECT_EQ(lane_control->rows_run.load(), rows_before);
  submitted->store(true);
  ASSERT_TRUE(own.done.WaitForNotificationWithTimeout(kHang));
  EXPECT_TRUE(own.result.ok()) << own.result.status();
  EXPECT_EQ(lane->GetStats().scored, 2u);
  EXPECT_EQ(lane->GetStats().preempted, 2u);
  // A closed lane is detached: live rows after it touch nothing of it.
  lane.reset();
  std::vector<tokenizer::Encoding> rows = testing::Rows(1);
  absl::Notification live_done;
  stable->Submit(rows, RowTask::Admission{}, [&](absl::StatusOr<InferenceResult>) { live_done.Notify(); });
  ASSERT_TRUE(live_done.WaitForNotificationWithTimeout(kHang));
}

}  // namespace
}  // namespace tide::serving
