// Tests of the rollout coordinator alone (no admission, no pipeline, no shadow lane opened): the
// version it picks for a call, and what its watch records and offers for a live answer: a tracked
// version's outcome, one offer to the other version (dropped and counted when no lane is open),
// none for a call that named its version, and token rows the other version cannot read counted
// dropped_incompatible (another vocabulary size, tokenizer file or prompt template). No threads but the model's instances, no sleeps.
#include "serving/rollout_coordinator.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "gtest/gtest.h"
#include "serving/testing/fake_backend.h"

namespace tide::serving {
namespace {

using testing::BackendControl;
using testing::ModelSpec;
using testing::Rows;
using testing::Served;

struct Harness {
  // Versions 1 and 2 of "m"; version 2 reads a larger vocabulary when `wider_candidate`, and
  // `candidate` edits version 2's spec further.
  explicit Harness(bool wider_candidate = false, ShadowTraceHook shadow_trace = {},
                   const std::function<void(ModelSpec*)>& candidate = nullptr) {
    auto m = ServingMetrics::Create();
    EXPECT_TRUE(m.ok());
    metrics = *std::move(m);
    models = ModelManager::Create(metrics.get());
    ModelSpec spec;
    spec.name = "m";
    EXPECT_TRUE(models->Add(Served(spec, std::make_shared<BackendControl>())).ok());
    spec.version = 2;
    if (wider_candidate) spec.vocabulary.push_back("g");
    if (candidate) candidate(&spec);
    EXPECT_TRUE(models->Add(Served(spec, std::make_shared<BackendControl>())).ok());
    RolloutCoordinatorOptions o;
    o.rollout_check_interval = std::chrono::milliseconds(0);
    o.shadow_idle_scheduling = false;
    o.shadow_trace = std::move(shadow_trace);
    coordinator = RolloutCoordinator::Create(models.get(), metrics.get(), o, &clock);
  }
  ~Harness() {
    coordinator.reset();
    models.reset();
  }
  CallPtr NewCall(std::optional<batching::TraceLink> trace = std::nullopt) {
    RowTask::Admission admission;
    admission.trace = trace;
    return std::make_shared<Call>(&clock, admission, clock.Now(), std::chrono::milliseconds(0), false, false);
  }
  std::shared_ptr<ServedModel> Version(int64_t v) { return *models->Find("m", std::to_string(v)); }
  // Through the API (which also opens the shadow lane), or (`open_lanes` false) on the rollouts
  // alone, so that no lane opens and every offer is refused not_ready, deterministically.
  void Start(RolloutMode mode, bool open_lanes = true) {
    RolloutDeclaration d;
    d.stable = 1;
    d.spec.stable = 1;
    d.spec.candidate = 2;
    d.spec.mode = mode;
    d.spec.percent = 100;
    if (open_lanes) {
      ASSERT_TRUE(coordinator->StartRollout("m", d).ok());
    } else {
      ASSERT_TRUE(coordinator->rollouts().Start("m", d.spec).ok());
    }
  }
  double Shadow(const char* outcome) const { return metrics->rollout_shadow->WithLabels({"m", outcome})->Value(); }
  int64_t Requests(size_t i) const { return coordinator->Status("m")->stats[i].requests; }

  FakeClock clock;
  std::unique_ptr<ServingMetrics> metrics;
  std::unique_ptr<ModelManager> models;
  std::unique_ptr<RolloutCoordinator> coordinator;
};

TEST(RolloutCoordinator, PicksWhereTheRolloutSendsACallAndANamedVersionBypassesIt) {
  Harness h;
  CallPtr call = h.NewCall();
  EXPECT_EQ((*h.coordinator->Pick(*call, "m", ""))->version(), 2);  // no rollout: the newest
  EXPECT_TRUE(h.coordinator->StickyHeaders().empty());
  h.Start(RolloutMode::kShadow);
  EXPECT_EQ((*h.coordinator->Pick(*call, "m", ""))->version(), 1);  // shadow: the stable answers
  EXPECT_EQ((*h.coordinator->Pick(*call, "", ""))->version(), 1);   // the default model routes too
  EXPECT_FALSE(call->named_version());
  EXPECT_EQ((*h.coordinator->Pick(*call, "m", "2"))->version(), 2);
  EXPECT_TRUE(call->named_version());
  EXPECT_EQ(KindOf(h.coordinator->Pick(*call, "m", "9").status()), ErrorKind::kNotFound);
  ASSERT_TRUE(h.coordinator->PromoteRollout("m").ok());
  EXPECT_EQ((*h.coordinator->Pick(*h.NewCall(), "m", ""))->version(), 2);
  ASSERT_TRUE(h.coordinator->RollbackRollout("m", "manual").ok());  // undoes the promotion
  EXPECT_EQ((*h.coordinator->Pick(*h.NewCall(), "m", ""))->version(), 1);
}

TEST(RolloutCoordinator, AWatchRecordsATrackedAnswerAndOffersItOnceToTheOtherVersion) {
  Harness h;
  CallPtr call = h.NewCall();
  const std::vector<std::string_view> docs = {"b", "c"};
  const MirrorRequest mirror{.query = "a", .documents = docs};
  EXPECT_EQ(h.coordinator->Watch(*call, *h.Version(1), mirror), nullptr);  // no rollout
  h.Start(RolloutMode::kShadow, /*open_lanes=*/false);
  EXPECT_TRUE(h.coordinator->Tracks(*h.Version(1)));
  auto watch = h.coordinator->Watch(*call, *h.Version(1), mirror);
  ASSERT_NE(watch, nullptr);
  // The candidate's lane is not open: dropped, counted.
  EXPECT_EQ(h.Shadow("dropped_not_ready"), 1);
  watch->Submitted();
  const std::vector<float> scores = {0.1f, 0.2f};
  watch->Answered(absl::OkStatus(), false, scores);
  EXPECT_EQ(h.Requests(0), 1);  // the stable version's answer
  // Overload says nothing about the version; a backend error and a degraded answer count.
  h.coordinator->Watch(*call, *h.Version(1), mirror)->Answered(errors::Overloaded("busy"), false, {});
  EXPECT_EQ(h.Requests(0), 1);
  h.coordinator->Watch(*call, *h.Version(1), mirror)->Answered(absl::OkStatus(), true, {});
  EXPECT_EQ(h.Requests(0), 2);
  EXPECT_EQ(h.coordinator->Status("m")->stats[0].errors, 1);
  EXPECT_EQ(h.Shadow("dropped_not_ready"), 3);
  // A call that named its version is recorded, never offered.
  CallPtr named = h.NewCall();
  ASSERT_TRUE(h.coordinator->Pick(*named, "m", "1").ok());
  h.coordinator->Watch(*named, *h.Version(1), mirror)->Answered(absl::OkStatus(), false, scores);
  EXPECT_EQ(h.Shadow("dropped_not_ready"), 3);
  EXPECT_EQ(h.Requests(0), 3);
}

TEST(RolloutCoordinator, TokenRowsAreOfferedOnlyToAVersionThatReadsTheSameIds) {
  Harness wider(/*wider_candidate=*/true);
  wider.Start(RolloutMode::kShadow, false);
  const std::vector<tokenizer::Encoding> rows = Rows(2);
  const MirrorRequest mirror{.rows = &rows};
  ASSERT_NE(wider.coordinator->Watch(*wider.NewCall(), *wider.Version(1), mirror), nullptr);
  EXPECT_EQ(wider.Shadow("dropped_incompatible"), 1);
  EXPECT_EQ(wider.Shadow("dropped_not_ready"), 0);
  Harness same;
  same.Start(RolloutMode::kShadow, false);
  ASSERT_NE(same.coordinator->Watch(*same.NewCall(), *same.Version(1), mirror), nullptr);
  EXPECT_EQ(same.Shadow("dropped_incompatible"), 0);
  EXPECT_EQ(same.Shadow("dropped_not_ready"), 1);  // offered; no lane open yet
  // A version of another family: the same vocabulary size, but another tokenizer file, or another
  // prompt template, makes other rows of the same texts.
  for (const auto& edit : std::vector<std::function<void(ModelSpec*)>>{
           [](ModelSpec* s) { s->tokenizer_digest = 7; },
           [](ModelSpec* s) {
             std::string error;
             s->parameters.prompt_template = PromptTemplate::Parse("{query} {document}", &error);
           }}) {
    Harness other(false, {}, edit);
    other.Start(RolloutMode::kShadow, false);
    ASSERT_NE(other.coordinator->Watch(*other.NewCall(), *other.Version(1), mirror), nullptr);
    EXPECT_EQ(other.Shadow("dropped_incompatible"), 1);
    EXPECT_EQ(other.Shadow("dropped_not_ready"), 0);
  }
}

TEST(RolloutCoordinator, AWatchMarksTheArmThatAnswersACall) {
  Harness h;
  const std::vector<std::string_view> docs = {"b", "c"};
  const MirrorRequest mirror{.query = "a", .documents = docs};
  CallPtr untracked = h.NewCall();
  EXPECT_EQ(h.coordinator->Watch(*untracked, *h.Version(1), mirror), nullptr);
  EXPECT_EQ(untracked->rollout_arm(), nullptr);  // no rollout
  h.Start(RolloutMode::kCanary, /*open_lanes=*/false);
  CallPtr stable = h.NewCall();
  h.coordinator->Watch(*stable, *h.Version(1), mirror)->Answered(absl::OkStatus(), false, {});
  ASSERT_NE(stable->rollout_arm(), nullptr);
  EXPECT_EQ(std::string_view(stable->rollout_arm()), "stable");
  CallPtr canary = h.NewCall();
  h.coordinator->Watch(*canary, *h.Version(2), mirror)->Answered(absl::OkStatus(), false, {});
  ASSERT_NE(canary->rollout_arm(), nullptr);
  EXPECT_EQ(std::string_view(canary->rollout_arm()), "canary");
  // A call that named its version bypassed the rollout: no arm.
  CallPtr named = h.NewCall();
  ASSERT_TRUE(h.coordinator->Pick(*named, "m", "2").ok());
  h.coordinator->Watch(*named, *h.Version(2), mirror)->Answered(absl::OkStatus(), false, {});
  EXPECT_EQ(named->rollout_arm(), nullptr);
}

TEST(RolloutCoordinator, ASampledCallsShadowOfferIsReportedOnceBothSidesAreIn) {
  std::vector<ShadowTraceFacts> seen;
  std::vector<std::string> reasons;
  Harness h(false, [&](const ShadowTraceFacts& f) {
    seen.push_back(f);
    reasons.emplace_back(f.reason);
  });
  h.Start(RolloutMode::kShadow, /*open_lanes=*/false);
  const std::vector<std::string_view> docs = {"b", "c"};
  const MirrorRequest mirror{.query = "a", .documents = docs};
  batching::TraceLink sampled;
  sampled.trace_id[0] = 1;
  sampled.span_id[0] = 2;
  sampled.flags = 1;
  auto watch = h.coordinator->Watch(*h.NewCall(sampled), *h.Version(1), mirror);
  ASSERT_NE(watch, nullptr);
  EXPECT_TRUE(seen.empty()) << "the live answer is still to come";
  const std::vector<float> scores = {0.1f, 0.2f};
  watch->Answered(absl::OkStatus(), false, scores);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].model, "m");
  EXPECT_EQ(seen[0].live_version, 1);
  EXPECT_EQ(seen[0].live_arm, "stable");
  EXPECT_EQ(seen[0].shadow_version, 2);
  EXPECT_EQ(seen[0].request, sampled);
  EXPECT_EQ(seen[0].outcome, "dropped");
  EXPECT_EQ(reasons[0], "dropped_not_ready");  // no lane open: refused at the offer
  EXPECT_FALSE(seen[0].agreement.has_value());
  // An unsampled call (or an untraced one) reports nothing.
  batching::TraceLink unsampled = sampled;
  unsampled.flags = 0;
  h.coordinator->Watch(*h.NewCall(unsampled), *h.Version(1), mirror)->Answered(absl::OkStatus(), false, scores);
  h.coordinator->Watch(*h.NewCall(), *h.Version(1), mirror)->Answered(absl::OkStatus(), false, scores);
  EXPECT_EQ(seen.size(), 1u);
  EXPECT_EQ(h.Shadow("dropped_not_ready"), 3);
}

}  // namespace
}  // namespace tide::serving
