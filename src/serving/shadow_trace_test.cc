// ShadowTrace: one shadow comparison of a sampled request, reported once both sides are in — its
// outcome (compared with the ranking agreement, dropped, error, or dropped because the live answer
// failed), in either order of arrival; nothing at all for a request that is not sampled.
#include "serving/shadow_trace.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "serving/call.h"

namespace tide::serving {
namespace {

struct Seen {
  std::string outcome, reason, live_arm;
  int64_t live_version = 0, shadow_version = 0;
  std::optional<RankingAgreement> agreement;
  Clock::duration elapsed{};
  std::optional<Clock::duration> shadow_run;
  bool embedding = false;
};

class ShadowTraceTest : public ::testing::Test {
 protected:
  ShadowTraceTest() {
    link_.trace_id[15] = 7;
    link_.span_id[7] = 9;
    link_.flags = 1;
  }
  std::shared_ptr<ShadowTrace> Start(bool live_is_stable, std::optional<batching::TraceLink> link,
                                     size_t embedding_dim = 0) {
    RowTask::Admission admission;
    admission.trace = link;
    Call call(&clock_, admission, clock_.Now(), std::chrono::milliseconds(0), false, false);
    return ShadowTrace::Start(hook_, call, "m", live_is_stable ? 1 : 2, live_is_stable, live_is_stable ? 2 : 1,
                              &clock_, embedding_dim);
  }

  FakeClock clock_;
  batching::TraceLink link_;
  std::vector<Seen> seen_;
  ShadowTraceHook hook_ = [this](const ShadowTraceFacts& f) {
    EXPECT_EQ(f.model, "m");
    EXPECT_EQ(f.request, link_);
    seen_.push_back(Seen{std::string(f.outcome), std::string(f.reason), std::string(f.live_arm), f.live_version,
                         f.shadow_version, f.agreement, f.elapsed, f.shadow_run, f.embedding});
  };
};

TEST_F(ShadowTraceTest, AnEmbeddingModelsVectorsAreComparedByCosine) {
  // Two inputs of dimension 2: the first the same direction (cosine 1), the second orthogonal (0).
  auto trace = Start(/*live_is_stable=*/true, link_, /*embedding_dim=*/2);
  ASSERT_NE(trace, nullptr);
  const std::vector<float> stable = {1.0f, 0.0f, 0.0f, 1.0f}, candidate = {2.0f, 0.0f, 1.0f, 0.0f};
  trace->Live(&stable);
  trace->Shadow(candidate, std::chrono::milliseconds(3));
  ASSERT_EQ(seen_.size(), 1u);
  EXPECT_EQ(seen_[0].outcome, "compared");
  EXPECT_TRUE(seen_[0].embedding);
  ASSERT_TRUE(seen_[0].agreement.has_value());
  EXPECT_NEAR(seen_[0].agreement->cosine, 0.5, 1e-9);
}

TEST_F(ShadowTraceTest, BothAnswersAreComparedStableFirstInEitherOrder) {
  // The live stable answer first, then the shadow (the candidate) ranking the other way round.
  auto shadow_mode = Start(/*live_is_stable=*/true, link_);
  ASSERT_NE(shadow_mode, nullptr);
  const std::vector<float> up = {0.1f, 0.2f, 0.3f}, down = {0.3f, 0.2f, 0.1f};
  shadow_mode->Live(&up);
  EXPECT_TRUE(seen_.empty());
  clock_.Advance(std::chrono::milliseconds(40));
  shadow_mode->Shadow(down, std::chrono::milliseconds(12));
  ASSERT_EQ(seen_.size(), 1u);
  EXPECT_EQ(seen_[0].outcome, "compared");
  EXPECT_EQ(seen_[0].reason, "scored");
  EXPECT_EQ(seen_[0].live_arm, "stable");
  EXPECT_EQ(seen_[0].live_version, 1);
  EXPECT_EQ(seen_[0].shadow_version, 2);
  ASSERT_TRUE(seen_[0].agreement.has_value());
  EXPECT_DOUBLE_EQ(seen_[0].agreement->spearman, -1.0);
  EXPECT_DOUBLE_EQ(seen_[0].agreement->top1, 0.0);
  EXPECT_EQ(seen_[0].elapsed, std::chrono::milliseconds(40));
  EXPECT_EQ(seen_[0].shadow_run, std::chrono::milliseconds(12));

  // A canary: the live answer is the candidate's, the shadow the stable duplicate; shadow first.
  auto canary = Start(/*live_is_stable=*/false, link_);
  canary->Shadow(up, std::chrono::milliseconds(1));
  canary->Live(&up);
  ASSERT_EQ(seen_.size(), 2u);
  EXPECT_EQ(seen_[1].live_arm, "canary");
  EXPECT_EQ(seen_[1].live_version, 2);
  EXPECT_EQ(seen_[1].shadow_version, 1);
  EXPECT_DOUBLE_EQ(seen_[1].agreement->spearman, 1.0);
}

TEST_F(ShadowTraceTest, DroppedFailedAndALiveFailureAreNotCompared) {
  const std::vector<float> scores = {0.1f, 0.2f};
  auto dropped = Start(true, link_);
  dropped->Dropped("preempted");
  dropped->Live(&scores);
  auto failed = Start(true, link_);
  failed->Live(&scores);
  failed->Failed("failed");
  auto live_failed = Start(true, link_);
  live_failed->Shadow(scores, std::chrono::milliseconds(3));
  live_failed->Live(nullptr);
  ASSERT_EQ(seen_.size(), 3u);
  EXPECT_EQ(seen_[0].outcome, "dropped");
  EXPECT_EQ(seen_[0].reason, "preempted");
  EXPECT_EQ(seen_[1].outcome, "error");
  EXPECT_EQ(seen_[1].reason, "failed");
  EXPECT_EQ(seen_[2].outcome, "dropped");
  EXPECT_EQ(seen_[2].reason, "live_failed");
  for (const Seen& s : seen_) EXPECT_FALSE(s.agreement.has_value());
}

TEST_F(ShadowTraceTest, NothingForARequestThatIsNotSampledOrWithoutAHook) {
  batching::TraceLink unsampled = link_;
  unsampled.flags = 0;
  EXPECT_EQ(Start(true, unsampled), nullptr);
  EXPECT_EQ(Start(true, std::nullopt), nullptr);
  hook_ = nullptr;
  EXPECT_EQ(Start(true, link_), nullptr);
}

}  // namespace
}  // namespace tide::serving
