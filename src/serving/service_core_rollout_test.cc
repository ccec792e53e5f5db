// Gray release through the service core (its rollout coordinator, admission and scoring pipeline
// together) over fake backends that rank differently: canary routing, shadow and duplicate
// comparisons, rollouts declared in config.pbtxt, shadow lanes yielding to and pre-empted by live
// rows, and restarts that restore rollouts from the state file.
#include "serving/service_core.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "serving/long_documents.h"
#include "serving/ranking_agreement.h"
#include "serving/rollout.h"
#include "serving/rollout_state_file.h"
#include "serving/testing/fake_backend.h"
#include "serving/testing/rollout_specs.h"
#include "wait_for.h"

namespace tide::serving {
namespace {

using testing::Canary;

using testing::BackendControl;
using testing::kHang;
using testing::Served;


std::string TempStateFile(const char* name) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + (dir.empty() || dir.back() == '/' ? "" : "/") + name;
  std::remove(path.c_str());
  return path;
}

// ---- the service core: canary routing, shadow and duplicate comparisons ----------------------------

struct CoreHarness {
  explicit CoreHarness(std::string state_file = {}) {
    auto m = ServingMetrics::Create();
    EXPECT_TRUE(m.ok());
    metrics = *std::move(m);
    models = ModelManager::Create(metrics.get());
    ServiceCoreOptions o;
    o.tokenization_workers = 1;
    o.clock = &clock;
    o.rollout_check_interval = std::chrono::milliseconds(0);
    o.shadow_idle_scheduling = false;  // a loaded test machine would starve an idle-scheduled lane
    o.rollout_state_file = std::move(state_file);
    auto c = ServiceCore::Create(models.get(), metrics.get(), o);
    EXPECT_TRUE(c.ok()) << c.status();
    core = *std::move(c);
  }
  ~CoreHarness() {
    core.reset();
    models.reset();
  }
  // Versions 1 and 2 of "m", each deciding on its own token (ids: a=4, b=5, c=6, ...).
  void AddVersions(int64_t stable_token, int64_t candidate_token) {
    stable_control = std::make_shared<BackendControl>();
    stable_control->decisive_token = stable_token;
    candidate_control = std::make_shared<BackendControl>();
    candidate_control->decisive_token = candidate_token;
    testing::ModelSpec spec;
    spec.name = "m";
    spec.version = 1;
    ASSERT_TRUE(models->Add(Served(spec, stable_control)).ok());
    spec.version = 2;
    ASSERT_TRUE(models->Add(Served(spec, candidate_control)).ok());
  }
  CallPtr Admit(std::string sticky_header = {}, std::string sticky_value = {}) {
    CallInfo info;
    info.body_bytes = 100;
    info.received_at = clock.Now();
    info.header = [&](std::string_view name) -> std::string_view {
      return name == sticky_header ? std::string_view(sticky_value) : std::string_view();
    };
    absl::StatusOr<CallPtr> out = absl::UnknownError("no answer");
    absl::Notification done;
    core->Start(info, [&](absl::StatusOr<CallPtr> call) {
      out = std::move(call);
      done.Notify();
    });
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(kHang));
    EXPECT_TRUE(out.ok()) << out.status();
    return out.value_or(nullptr);
  }
  absl::StatusOr<RerankScores> Rerank(const CallPtr& call, std::shared_ptr<ServedModel> model) {
    absl::StatusOr<RerankScores> out = absl::UnknownError("no answer");
    absl::Notification done;
    const std::vector<std::string_view> docs = {"b", "c", "d"};
    core->Rerank(call, std::move(model), "a", docs, PairOptions{}, false, [&](absl::StatusOr<RerankScores> s) {
      out = std::move(s);
      done.Notify();
    });
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(kHang));
    return out;
  }
  // KServe infer of the rows (query "a", one row per document) as the edge tokenizes BYTES text.
  absl::StatusOr<InferOutcome> Infer(const CallPtr& call, std::shared_ptr<ServedModel> model) {
    const std::vector<std::string_view> docs = {"b", "c", "d"};
    std::vector<tokenizer::Encoding> rows;
    EXPECT_TRUE(TokenizePairs(*model, "a", docs, PairOptions{}, &rows).ok());
    absl::StatusOr<InferOutcome> out = absl::UnknownError("no answer");
    absl::Notification done;
    core->Infer(call, std::move(model), std::move(rows), [&](absl::StatusOr<InferOutcome> o) {
      out = std::move(o);
      done.Notify();
    });
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(kHang));
    return out;
  }
  // Starts the rollout and opens its shadow lane (what StartRollout and the rollout timer do).
  void Start(const RolloutSpec& spec) {
    ASSERT_TRUE(core->rollouts().Start("m", spec).ok());
    core->SyncShadowLanes();
    const int64_t scored = spec.mode == RolloutMode::kShadow ? spec.candidate : spec.stable;
    ASSERT_TRUE(test_support::WaitFor([&] { return core->ShadowLaneReady("m", scored); }, absl::Seconds(10),
                                      "the shadow lane to be ready"));
  }
  // Waits (bounded) until the rollout has compared `pairs` requests: the other version's answer
  // arrives on its instance thread after the live one.
  ::testing::AssertionResult WaitForPairs(int64_t pairs) {
    return test_support::WaitFor([&] { return core->rollouts().Get("m")->pairs >= pairs; }, absl::Seconds(10),
                                 "the rollout to compare the pairs");
  }
  FakeClock clock;
  std::unique_ptr<ServingMetrics> metrics;
  std::unique_ptr<ModelManager> models;
  std::unique_ptr<ServiceCore> core;
  std::shared_ptr<BackendControl> stable_control, candidate_control;
};

TEST(ServiceCoreRollout, CanaryRoutesUnnamedRequestsAndANamedVersionBypasses) {
  CoreHarness h;
  h.AddVersions(5, 5);
  CallPtr call = h.Admit();
  EXPECT_EQ((*h.core->FindModel(*call, "m"))->version(), 2);  // no rollout: the newest
  RolloutSpec spec = Canary(0, "x-user-id");
  spec.percent = 50;
  ASSERT_TRUE(h.core->rollouts().Start("m", spec).ok());
  std::map<int64_t, int> seen;
  for (int i = 0; i < 400; ++i) seen[(*h.core->FindModel(*call, "m"))->version()]++;
  EXPECT_GT(seen[1], 100);
  EXPECT_GT(seen[2], 100);
  EXPECT_EQ((*h.core->FindModel(*call))->version() > 0, true);  // the default model routes too
  for (int i = 0; i < 50; ++i) ASSERT_EQ((*h.core->FindModel(*call, "m", "1"))->version(), 1);
  // Sticky: a call carrying the header lands where its value hashes, every time.
  for (const char* user : {"alice", "bob", "carol", "dave"}) {
    CallPtr c = h.Admit("x-user-id", user);
    EXPECT_EQ(c->StickyValue("x-user-id"), user);
    const int64_t v = (*h.core->FindModel(*c, "m"))->version();
    for (int i = 0; i < 20; ++i) ASSERT_EQ((*h.core->FindModel(*c, "m"))->version(), v) << user;
  }
  ASSERT_TRUE(h.core->rollouts().Rollback("m").ok());
  for (int i = 0; i < 50; ++i) ASSERT_EQ((*h.core->FindModel(*call, "m"))->version(), 1);
}

TEST(ServiceCoreRollout, ShadowAnswersWithStableAndComparesAnIdenticalCandidateAsEqual) {
  CoreHarness h;
  h.AddVersions(5, 5);
  RolloutSpec spec = Canary(100);
  spec.mode = RolloutMode::kShadow;
  spec.guard.min_requests = 10;
  h.Start(spec);
  for (int i = 0; i < 10; ++i) {
    CallPtr call = h.Admit();
    auto model = h.core->FindModel(*call, "m");
    ASSERT_EQ((*model)->version(), 1);  // shadow: the stable version answers
    auto scores = h.Rerank(call, *model);
    ASSERT_TRUE(scores.ok()) << scores.status();
    ASSERT_TRUE(h.WaitForPairs(i + 1));
  }
  auto status = h.core->rollouts().Get("m");
  EXPECT_EQ(status->state, RolloutState::kRunning);
  EXPECT_EQ(status->pairs, 10);
  EXPECT_DOUBLE_EQ(status->agreement.spearman, 1.0);
  EXPECT_DOUBLE_EQ(status->agreement.top1, 1.0);
  EXPECT_DOUBLE_EQ(status->agreement.ndcg10, 1.0);
  EXPECT_GE(status->stats[1].requests, 10);  // the candidate's shadow answers are counted
  EXPECT_GE(h.candidate_control->rows_run.load(), 30);
}

TEST(ServiceCoreRollout, AShadowCandidateThatRanksDifferentlyIsRolledBackAndItsAnswersNeverReturned) {
  CoreHarness h;
  h.AddVersions(/*stable: "b"*/ 5, /*candidate: "c"*/ 6);
  RolloutSpec spec = Canary(100);
  spec.mode = RolloutMode::kShadow;
  spec.guard.min_requests = 5;
  h.Start(spec);
  for (int i = 0; i < 5; ++i) {
    CallPtr call = h.Admit();
    auto model = h.core->FindModel(*call, "m");
    auto scores = h.Rerank(call, *model);
    ASSERT_TRUE(scores.ok());
    // The stable ranking: "b" first.
    EXPECT_GT(scores->scores[0], scores->scores[1]);
    ASSERT_TRUE(h.WaitForPairs(i + 1));
  }
  auto status = h.core->rollouts().Get("m");
  EXPECT_EQ(status->state, RolloutState::kRolledBack) << status->reason;
  EXPECT_EQ(h.metrics->rollout_rollbacks->WithLabels({"m", "spearman"})->Value(), 1);
  EXPECT_DOUBLE_EQ(h.metrics->rollout_agreement->WithLabels({"m", "top1"})->Value(), 0.0);
  // No more shadow work after the rollback.
  const int ran = h.candidate_control->rows_run.load();
  CallPtr call = h.Admit();
  ASSERT_TRUE(h.Rerank(call, *h.core->FindModel(*call, "m")).ok());
  EXPECT_EQ(h.candidate_control->rows_run.load(), ran);
}

TEST(ServiceCoreRollout, CanaryAnswersAreComparedWithTheStableVersion) {
  CoreHarness h;
  h.AddVersions(5, 6);
  RolloutSpec spec = Canary(100);
  spec.guard.min_requests = 3;
  h.Start(spec);
  for (int i = 0; i < 3; ++i) {
    CallPtr call = h.Admit();
    auto model = h.core->FindModel(*call, "m");
    ASSERT_EQ((*model)->version(), 2);
    auto scores = h.Rerank(call, *model);
    ASSERT_TRUE(scores.ok());
    EXPECT_GT(scores->scores[1], scores->scores[0]);  // the candidate's own answer: "c" first
    ASSERT_TRUE(h.WaitForPairs(i + 1));
  }
  EXPECT_EQ(h.core->rollouts().Get("m")->state, RolloutState::kRolledBack);
  CallPtr call = h.Admit();
  EXPECT_EQ((*h.core->FindModel(*call, "m"))->version(), 1);
}

TEST(ServiceCoreRollout, ARolloutDeclaredInConfigStartsOnceItsCandidateIsLoaded) {
  CoreHarness h;
  testing::ModelSpec spec;
  spec.name = "m";
  spec.version = 1;
  spec.parameters.rollout = R"({"candidate": "2", "mode": "canary", "percent": 100})";
  ASSERT_TRUE(h.models->Add(Served(spec, std::make_shared<BackendControl>())).ok());
  h.core->ApplyDeclaredRollouts();  // version 2 is not loaded yet: nothing starts, no error
  EXPECT_FALSE(h.core->rollouts().Get("m").has_value());
  spec.version = 2;
  ASSERT_TRUE(h.models->Add(Served(spec, std::make_shared<BackendControl>())).ok());
  h.core->ApplyDeclaredRollouts();
  auto status = h.core->rollouts().Get("m");
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->state, RolloutState::kRunning);
  EXPECT_EQ(status->spec.stable, 1);
  EXPECT_EQ(status->spec.candidate, 2);
  // Applied once per text: a manual rollback is not undone by the next tick.
  ASSERT_TRUE(h.core->rollouts().Rollback("m").ok());
  h.core->ApplyDeclaredRollouts();
  EXPECT_EQ(h.core->rollouts().Get("m")->state, RolloutState::kRolledBack);
  // An invalid declaration starts nothing (and is logged once).
  CoreHarness bad;
  spec.version = 1;
  spec.parameters.rollout = R"({"candidate": "2", "mode": "blue"})";
  ASSERT_TRUE(bad.models->Add(Served(spec, std::make_shared<BackendControl>())).ok());
  spec.version = 2;
  ASSERT_TRUE(bad.models->Add(Served(spec, std::make_shared<BackendControl>())).ok());
  bad.core->ApplyDeclaredRollouts();
  EXPECT_FALSE(bad.core->rollouts().Get("m").has_value());
}


// A restart (a new core over the same file) finds each rollout as it was: running, promoted (and
// still undoable), rolled back; a rollout whose versions are not loaded yet waits for them.
TEST(RolloutStateFile, ANewCoreRestoresWhatTheLastOneStartedPromotedOrRolledBack) {
  const std::string path = TempStateFile("tide-rollout-restart.json");
  {
    CoreHarness h(path);
    h.AddVersions(5, 5);
    RolloutDeclaration d;
    d.spec = Canary(30, "x-user-id");
    d.stable = 1;
    ASSERT_TRUE(h.core->StartRollout("m", d).ok());
    ASSERT_TRUE(h.core->PromoteRollout("m").ok());
  }
  {
    CoreHarness h(path);
    h.AddVersions(5, 5);
    ASSERT_TRUE(h.core->LoadRolloutState().ok());
    auto st = h.core->rollouts().Get("m");
    ASSERT_TRUE(st.has_value());
    EXPECT_EQ(st->state, RolloutState::kPromoted);
    EXPECT_EQ(st->spec.stable, 2);
    EXPECT_EQ(st->spec.sticky_header, "x-user-id");
    CallPtr call = h.Admit();
    EXPECT_EQ((*h.core->FindModel(*call, "m"))->version(), 2);
    // The fast rollback still knows the version the promotion replaced.
    ASSERT_TRUE(h.core->RollbackRollout("m", "manual").ok());
    EXPECT_EQ(h.core->rollouts().Get("m")->spec.stable, 1);
  }
  {
    CoreHarness h(path);
    ASSERT_TRUE(h.core->LoadRolloutState().ok());  // no version loaded yet
    EXPECT_FALSE(h.core->rollouts().Get("m").has_value());
    h.AddVersions(5, 5);
    h.core->ApplySavedRollouts();  // what the rollout timer does
    auto st = h.core->rollouts().Get("m");
    ASSERT_TRUE(st.has_value());
    EXPECT_EQ(st->state, RolloutState::kRolledBack);
    EXPECT_EQ(st->spec.stable, 1);
    CallPtr call = h.Admit();
    EXPECT_EQ((*h.core->FindModel(*call, "m"))->version(), 1);
  }
  // A file that is not a rollout state stops the start-up.
  ASSERT_TRUE(WriteFileAtomically(path, "not json").ok());
  CoreHarness h(path);
  EXPECT_FALSE(h.core->LoadRolloutState().ok());
}

TEST(RolloutStateFile, ARolloutDeclaredInConfigWinsOverTheSavedOne) {
  const std::string path = TempStateFile("tide-rollout-declared.json");
  {
    CoreHarness h(path);
    h.AddVersions(5, 5);
    RolloutDeclaration d;
    d.spec = Canary(30);
    d.stable = 1;
    ASSERT_TRUE(h.core->StartRollout("m", d).ok());
    ASSERT_TRUE(h.core->RollbackRollout("m", "manual").ok());
  }
  CoreHarness h(path);
  testing::ModelSpec spec;
  spec.name = "m";
  spec.parameters.rollout = R"({"candidate": "2", "mode": "canary", "percent": 100})";
  for (int64_t v : {1, 2}) {
    spec.version = v;
    ASSERT_TRUE(h.models->Add(Served(spec, std::make_shared<BackendControl>())).ok());
  }
  ASSERT_TRUE(h.core->LoadRolloutState().ok());
  EXPECT_FALSE(h.core->rollouts().Get("m").has_value());  // not restored
  h.core->ApplyDeclaredRollouts();
  EXPECT_EQ(h.core->rollouts().Get("m")->state, RolloutState::kRunning);
  EXPECT_DOUBLE_EQ(h.core->rollouts().Get("m")->spec.percent, 100);
}

// Shadow rows are offered to the candidate's lane only while no live row waits; a refused or
// dropped one is counted, never queued behind live rows.
TEST(ServiceCoreRollout, ShadowRowsAreNotOfferedWhileLiveRowsWait) {
  CoreHarness h;
  h.AddVersions(5, 5);
  RolloutSpec spec = Canary(100);
  spec.mode = RolloutMode::kShadow;
  spec.guard.min_requests = 1000;
  h.Start(spec);
  // Hold version 1's instance on a batch so the next request's rows wait in its queue.
  h.stable_control->armed = true;
  absl::Notification first_done, second_done;
  CallPtr c1 = h.Admit(), c2 = h.Admit();
  auto m = *h.core->FindModel(*c1, "m");
  const std::vector<std::string_view> docs = {"b", "c", "d"};
  h.core->Rerank(c1, m, "a", docs, PairOptions{}, false, [&](absl::StatusOr<RerankScores>) { first_done.Notify(); });
  ASSERT_TRUE(h.stable_control->entered.WaitForNotificationWithTimeout(kHang));
  h.core->Rerank(c1, m, "a", docs, PairOptions{}, false, [&](absl::StatusOr<RerankScores>) { second_done.Notify(); });
  ASSERT_GT(m->QueuedRows(), 0u);
  // Live rows wait: this request's shadow is refused at once.
  h.core->Rerank(c2, m, "a", docs, PairOptions{}, false, [](absl::StatusOr<RerankScores>) {});
  EXPECT_GE(h.metrics->rollout_shadow->WithLabels({"m", "dropped_live_waiting"})->Value(), 1);
  h.stable_control->gate.Notify();
  ASSERT_TRUE(first_done.WaitForNotificationWithTimeout(kHang));
  ASSERT_TRUE(second_done.WaitForNotificationWithTimeout(kHang));
  // The shadow lane closes when the rollout ends.
  ASSERT_TRUE(h.core->rollouts().Rollback("m").ok());
  h.core->SyncShadowLanes();
  EXPECT_FALSE(h.core->ShadowLaneStats("m").has_value());
}

// A shadow batch that live rows stop is dropped and counted "preempted": never an error of the
// candidate (its error-rate guard sees nothing), and the next shadow is compared as usual.
TEST(ServiceCoreRollout, AShadowBatchStoppedByLiveRowsIsCountedPreemptedNeverAsAnError) {
  CoreHarness h;
  h.AddVersions(5, 5);
  RolloutSpec spec = Canary(100);
  spec.mode = RolloutMode::kShadow;
  spec.guard.min_requests = 1;
  spec.guard.max_error_rate = 0.0;  // one error would roll back
  h.Start(spec);
  // The candidate's lane (it shares the candidate's fake control) blocks until terminated; in
  // shadow mode the candidate's live instances take no rows.
  h.candidate_control->block_until_terminated = true;
  CallPtr c1 = h.Admit();
  auto m = *h.core->FindModel(*c1, "m");
  ASSERT_EQ(m->version(), 1);
  ASSERT_TRUE(h.Rerank(c1, m).ok());
  ASSERT_TRUE(test_support::WaitFor([&] { return h.candidate_control->blocked_runs.load() > 0; }, absl::Seconds(10)));
  ASSERT_EQ(h.candidate_control->blocked_runs.load(), 1);
  // The next live request's rows stop the running shadow batch; its own shadow then runs.
  CallPtr c2 = h.Admit();
  ASSERT_TRUE(h.Rerank(c2, m).ok());
  auto* preempted = h.metrics->rollout_shadow->WithLabels({"m", "preempted"});
  EXPECT_TRUE(test_support::WaitFor([&] { return preempted->Value() >= 1; }, absl::Seconds(10)));
  EXPECT_EQ(preempted->Value(), 1);
  h.candidate_control->block_until_terminated = false;
  ASSERT_TRUE(h.WaitForPairs(1));
  auto status = h.core->rollouts().Get("m");
  EXPECT_EQ(status->state, RolloutState::kRunning) << status->reason;
  EXPECT_EQ(status->stats[1].errors, 0);
  EXPECT_EQ(status->stats[1].requests, 1);  // the shadow that ran; the stopped one is not counted
  EXPECT_EQ(h.metrics->rollout_shadow->WithLabels({"m", "failed"})->Value(), 0);
  EXPECT_EQ(h.core->ShadowLaneStats("m")->preempted, 1u);
}

// KServe infer rows of a reranker are shadowed too: the candidate scores the same rows on its lane
// and the rows' order is compared as one ranked list. A call that names its version bypasses.
TEST(ServiceCoreRollout, KServeInferRowsAreShadowedAndComparedAsOneRankedList) {
  CoreHarness h;
  h.AddVersions(/*stable: "b"*/ 5, /*candidate: "c"*/ 6);
  RolloutSpec spec = Canary(100);
  spec.mode = RolloutMode::kShadow;
  spec.guard.min_requests = 3;
  h.Start(spec);
  CallPtr named = h.Admit();
  auto v1 = h.core->FindModel(*named, "m", "1");
  ASSERT_TRUE(v1.ok());
  ASSERT_TRUE(h.Infer(named, *v1).ok());  // named: answered, never shadowed
  for (int i = 0; i < 3; ++i) {
    CallPtr call = h.Admit();
    auto model = h.core->FindModel(*call, "m");
    ASSERT_EQ((*model)->version(), 1);
    auto out = h.Infer(call, *model);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->result.rows, 3);
    EXPECT_GT(out->result.at(0, 0), out->result.at(1, 0));  // the stable answer: "b" first
    ASSERT_TRUE(h.WaitForPairs(i + 1));
  }
  auto status = h.core->rollouts().Get("m");
  EXPECT_EQ(status->pairs, 3);
  EXPECT_EQ(status->state, RolloutState::kRolledBack) << status->reason;
  EXPECT_DOUBLE_EQ(status->agreement.top1, 0.0);
  EXPECT_LT(status->agreement.spearman, 0.9);
  EXPECT_EQ(h.metrics->rollout_shadow->WithLabels({"m", "scored"})->Value(), 3);  // not the named call
}

// Long documents (chunk_max) are shadowed at the document level: the lane splits them into the
// same windows and folds their scores per document as the live answer does.
TEST(ServiceCoreRollout, LongDocumentsAreComparedPerDocumentThroughTheLane) {
  CoreHarness h;
  h.AddVersions(/*stable: "b"*/ 5, /*candidate: "c"*/ 6);
  RolloutSpec spec = Canary(100);
  spec.mode = RolloutMode::kShadow;
  spec.guard.min_requests = 1000;
  h.Start(spec);
  // The candidate's "c" is only in the long document's last window: truncated, it would not count.
  std::string long_doc;
  for (int i = 0; i < 20; ++i) long_doc += "d e f ";
  long_doc += "c";
  const std::vector<std::string_view> docs = {"b d e", long_doc};
  PairOptions options;
  options.long_documents = LongDocuments::kChunkMax;
  CallPtr call = h.Admit();
  auto model = *h.core->FindModel(*call, "m");
  DocumentWindows windows;
  ASSERT_TRUE(SplitLongDocuments(*model, "a", docs, ChunkOptionsFor(*model, LongDocuments::kChunkMax), &windows).ok());
  ASSERT_TRUE(windows.split);
  const int candidate_rows = h.candidate_control->rows_run.load();
  absl::StatusOr<RerankScores> live = absl::UnknownError("no answer");
  absl::Notification done;
  h.core->Rerank(call, model, "a", docs, options, false, [&](absl::StatusOr<RerankScores> s) {
    live = std::move(s);
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kHang));
  ASSERT_TRUE(live.ok()) << live.status();
  ASSERT_EQ(live->scores.size(), 2u);
  EXPECT_GT(live->scores[0], live->scores[1]);  // stable: "b d e" first
  ASSERT_TRUE(h.WaitForPairs(1));
  auto status = h.core->rollouts().Get("m");
  EXPECT_DOUBLE_EQ(status->agreement.top1, 0.0);  // candidate: the long document first (its last window)
  EXPECT_EQ(h.candidate_control->rows_run.load() - candidate_rows, static_cast<int>(windows.windows.size()));
  EXPECT_EQ(h.metrics->rollout_shadow->WithLabels({"m", "scored"})->Value(), 1);
}

}  // namespace
}  // namespace tide::serving
