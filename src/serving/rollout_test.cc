// Gray release: the ranking agreement measures, the Rollouts' split, stickiness and guard (with an
// injected clock and no timer thread), and the rollout state file's format. The service core's
// shadow and canary comparisons are in service_core_rollout_test.cc.
#include "serving/rollout.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "serving/ranking_agreement.h"
#include "serving/rollout_state_file.h"
#include "serving/testing/rollout_specs.h"

namespace tide::serving {
namespace {

using testing::Canary;

TEST(RankingAgreement, IdenticalReversedAndTiedRankings) {
  const std::vector<float> a = {0.9f, 0.1f, 0.5f, 0.3f};
  auto same = CompareRankings(a, a);
  ASSERT_TRUE(same.ok());
  EXPECT_DOUBLE_EQ(same->spearman, 1.0);
  EXPECT_DOUBLE_EQ(same->top1, 1.0);
  EXPECT_DOUBLE_EQ(same->ndcg10, 1.0);
  // A monotone transform ranks the same.
  const std::vector<float> scaled = {9.f, 1.f, 5.f, 3.f};
  EXPECT_DOUBLE_EQ(CompareRankings(a, scaled)->spearman, 1.0);
  const std::vector<float> reversed = {0.1f, 0.9f, 0.5f, 0.7f};
  auto rev = CompareRankings(a, reversed);
  ASSERT_TRUE(rev.ok());
  EXPECT_DOUBLE_EQ(rev->spearman, -1.0);
  EXPECT_DOUBLE_EQ(rev->top1, 0.0);
  EXPECT_LT(rev->ndcg10, 0.8);
  EXPECT_GT(rev->ndcg10, 0.0);
  // Only the best two swapped: top-1 lost, Spearman still high.
  const std::vector<float> swapped = {0.5f, 0.1f, 0.9f, 0.3f};
  auto sw = CompareRankings(a, swapped);
  EXPECT_DOUBLE_EQ(sw->top1, 0.0);
  EXPECT_NEAR(sw->spearman, 0.8, 1e-9);  // 1 - 6 * sum(d^2) / (n (n^2 - 1)) = 1 - 6 * 2 / 60
  EXPECT_LT(sw->ndcg10, 1.0);
  // Ties: both constant lists agree; only one constant has no correlation.
  const std::vector<float> flat = {1.f, 1.f, 1.f, 1.f};
  EXPECT_DOUBLE_EQ(CompareRankings(flat, flat)->spearman, 1.0);
  EXPECT_DOUBLE_EQ(CompareRankings(a, flat)->spearman, 0.0);
  EXPECT_FALSE(CompareRankings(a, std::vector<float>{1.f}).ok());
  EXPECT_FALSE(CompareRankings(std::vector<float>{}, std::vector<float>{}).ok());
  EXPECT_DOUBLE_EQ(CompareRankings(std::vector<float>{1.f}, std::vector<float>{-3.f})->spearman, 1.0);
}

TEST(RankingAgreement, EmbeddingsAreComparedByTheMeanCosinePerInput) {
  // Two inputs of dimension 2: identical, then orthogonal.
  const std::vector<float> stable = {1.f, 0.f, 0.f, 2.f};
  auto same = CompareEmbeddings(stable, stable, 2);
  ASSERT_TRUE(same.ok());
  EXPECT_DOUBLE_EQ(same->cosine, 1.0);
  // The ranking measures stay 1: an embedding rollout is judged by cosine alone.
  EXPECT_DOUBLE_EQ(same->spearman, 1.0);
  EXPECT_DOUBLE_EQ(same->top1, 1.0);
  // Scale does not matter (raw or normalized vectors); direction does.
  EXPECT_DOUBLE_EQ(CompareEmbeddings(stable, std::vector<float>{3.f, 0.f, 0.f, 0.5f}, 2)->cosine, 1.0);
  EXPECT_DOUBLE_EQ(CompareEmbeddings(stable, std::vector<float>{1.f, 0.f, 1.f, 0.f}, 2)->cosine, 0.5);
  EXPECT_DOUBLE_EQ(CompareEmbeddings(stable, std::vector<float>{-1.f, 0.f, 0.f, -2.f}, 2)->cosine, -1.0);
  EXPECT_NEAR(CompareEmbeddings(std::vector<float>{1.f, 0.f}, std::vector<float>{1.f, 1.f}, 2)->cosine,
              std::sqrt(0.5), 1e-12);
  // Zero vectors: equal to zero, orthogonal to anything else.
  EXPECT_DOUBLE_EQ(CompareEmbeddings(std::vector<float>{0.f, 0.f}, std::vector<float>{0.f, 0.f}, 2)->cosine, 1.0);
  EXPECT_DOUBLE_EQ(CompareEmbeddings(std::vector<float>{0.f, 0.f}, std::vector<float>{1.f, 0.f}, 2)->cosine, 0.0);
  // Shapes.
  EXPECT_FALSE(CompareEmbeddings(stable, std::vector<float>{1.f, 0.f}, 2).ok());
  EXPECT_FALSE(CompareEmbeddings(std::vector<float>{1.f, 0.f, 1.f}, std::vector<float>{1.f, 0.f, 1.f}, 2).ok());
  EXPECT_FALSE(CompareEmbeddings(stable, stable, 0).ok());
  EXPECT_FALSE(CompareEmbeddings(std::vector<float>{}, std::vector<float>{}, 2).ok());
}


struct RolloutsHarness {
  RolloutsHarness() {
    auto m = ServingMetrics::Create();
    EXPECT_TRUE(m.ok());
    metrics = *std::move(m);
    RolloutsOptions o;
    o.clock = &clock;
    o.check_interval = std::chrono::milliseconds(0);
    rollouts = std::make_unique<Rollouts>(metrics.get(), o);
  }
  double State() const { return metrics->rollout_state->WithLabels({"m"})->Value(); }
  double Rollbacks(const char* reason) const { return metrics->rollout_rollbacks->WithLabels({"m", reason})->Value(); }
  FakeClock clock;
  std::unique_ptr<ServingMetrics> metrics;
  std::unique_ptr<Rollouts> rollouts;
};

TEST(Rollouts, CanaryTakesItsShareAndStickyValuesStay) {
  RolloutsHarness h;
  EXPECT_FALSE(h.rollouts->Route("m", "").has_value());  // no rollout: the newest answers
  ASSERT_TRUE(h.rollouts->Start("m", Canary(10)).ok());
  EXPECT_EQ(h.State(), 1);
  int candidate = 0;
  for (int i = 0; i < 20000; ++i) candidate += h.rollouts->Route("m", "") == 2 ? 1 : 0;
  EXPECT_NEAR(candidate / 20000.0, 0.10, 0.01);
  EXPECT_FALSE(h.rollouts->Route("other", "").has_value());

  ASSERT_TRUE(h.rollouts->Start("m", Canary(10, "x-user-id")).ok());
  EXPECT_EQ(h.rollouts->StickyHeaderOf("m"), "x-user-id");
  std::map<std::string, int64_t> first;
  int users_on_candidate = 0;
  for (int u = 0; u < 2000; ++u) {
    const std::string user = "user-" + std::to_string(u);
    first[user] = *h.rollouts->Route("m", user);
    users_on_candidate += first[user] == 2 ? 1 : 0;
  }
  EXPECT_NEAR(users_on_candidate / 2000.0, 0.10, 0.03);
  for (int round = 0; round < 3; ++round) {
    for (const auto& [user, version] : first) ASSERT_EQ(*h.rollouts->Route("m", user), version) << user;
  }
  // 0% and 100%.
  ASSERT_TRUE(h.rollouts->Start("m", Canary(0)).ok());
  for (int i = 0; i < 100; ++i) ASSERT_EQ(*h.rollouts->Route("m", ""), 1);
  ASSERT_TRUE(h.rollouts->Start("m", Canary(100)).ok());
  for (int i = 0; i < 100; ++i) ASSERT_EQ(*h.rollouts->Route("m", ""), 2);
}

TEST(Rollouts, PromoteAndRollbackRouteEveryRequest) {
  RolloutsHarness h;
  EXPECT_EQ(h.rollouts->Promote("m").code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(h.rollouts->Start("m", Canary(50)).ok());
  ASSERT_TRUE(h.rollouts->Promote("m").ok());
  EXPECT_EQ(h.State(), 2);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(*h.rollouts->Route("m", ""), 2);
  // The fast rollback: undoing the promotion makes version 1 stable again.
  ASSERT_TRUE(h.rollouts->Rollback("m").ok());
  EXPECT_EQ(h.State(), 3);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(*h.rollouts->Route("m", ""), 1);
  EXPECT_EQ(h.rollouts->Get("m")->spec.stable, 1);
  EXPECT_FALSE(h.rollouts->Rollback("m").ok());  // not running any more
  ASSERT_TRUE(h.rollouts->Start("m", Canary(50)).ok());
  ASSERT_TRUE(h.rollouts->Rollback("m").ok());
  EXPECT_EQ(h.State(), 3);
  EXPECT_EQ(h.Rollbacks("manual"), 2);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(*h.rollouts->Route("m", ""), 1);
  EXPECT_EQ(h.rollouts->Get("m")->state, RolloutState::kRolledBack);
  // Bad specs.
  RolloutSpec same = Canary(10);
  same.candidate = 1;
  EXPECT_FALSE(h.rollouts->Start("m", same).ok());
  EXPECT_FALSE(h.rollouts->Start("m", Canary(101)).ok());
}

TEST(Rollouts, TheGuardRollsBackOnDisagreementOnlyAfterMinRequests) {
  RolloutsHarness h;
  RolloutSpec spec = Canary(10);
  spec.mode = RolloutMode::kShadow;
  ASSERT_TRUE(h.rollouts->Start("m", spec).ok());
  const std::vector<float> stable = {0.9f, 0.5f, 0.1f};
  const std::vector<float> other = {0.1f, 0.5f, 0.9f};
  for (int i = 0; i < 49; ++i) h.rollouts->RecordComparison("m", stable, other);
  EXPECT_EQ(h.rollouts->Get("m")->state, RolloutState::kRunning);  // 49 < min_requests
  EXPECT_EQ(h.rollouts->Get("m")->pairs, 49);
  EXPECT_DOUBLE_EQ(h.metrics->rollout_agreement->WithLabels({"m", "spearman"})->Value(), -1.0);
  h.rollouts->RecordComparison("m", stable, other);
  auto status = h.rollouts->Get("m");
  EXPECT_EQ(status->state, RolloutState::kRolledBack);
  EXPECT_NE(status->reason.find("Spearman"), std::string::npos) << status->reason;
  EXPECT_EQ(h.Rollbacks("spearman"), 1);
  EXPECT_EQ(h.State(), 3);
  // Later comparisons change nothing.
  h.rollouts->RecordComparison("m", stable, stable);
  EXPECT_EQ(h.rollouts->Get("m")->pairs, 50);

  // Identical rankings keep it running, with agreement 1.
  ASSERT_TRUE(h.rollouts->Start("m", spec).ok());
  for (int i = 0; i < 200; ++i) h.rollouts->RecordComparison("m", stable, stable);
  status = h.rollouts->Get("m");
  EXPECT_EQ(status->state, RolloutState::kRunning);
  EXPECT_DOUBLE_EQ(status->agreement.spearman, 1.0);
  EXPECT_DOUBLE_EQ(status->agreement.top1, 1.0);
  EXPECT_DOUBLE_EQ(status->agreement.ndcg10, 1.0);

  // Top-1 alone: the best two swapped in every request (Spearman 0.5 passes a min of 0.4).
  spec.guard.min_spearman = 0.4;
  spec.guard.min_top1 = 0.8;
  ASSERT_TRUE(h.rollouts->Start("m", spec).ok());
  const std::vector<float> swapped = {0.5f, 0.9f, 0.1f};
  for (int i = 0; i < 50; ++i) h.rollouts->RecordComparison("m", stable, swapped);
  EXPECT_EQ(h.Rollbacks("top1"), 1);
}

TEST(Rollouts, AnEmbeddingCandidateRollsBackWhenItsMeanCosineFallsBelowTheBound) {
  RolloutsHarness h;
  RolloutSpec spec = Canary(10);
  spec.mode = RolloutMode::kShadow;
  spec.guard.min_cosine = 0.9;
  ASSERT_TRUE(h.rollouts->Start("m", spec).ok());
  const std::vector<float> stable = {1.f, 0.f, 0.f, 1.f};
  const std::vector<float> close = {1.f, 0.1f, 0.f, 1.f};    // mean cosine ~0.998
  const std::vector<float> turned = {0.f, 1.f, 0.f, 1.f};    // mean cosine 0.5
  for (int i = 0; i < 200; ++i) h.rollouts->RecordComparison("m", stable, close, 2);
  auto status = h.rollouts->Get("m");
  EXPECT_EQ(status->state, RolloutState::kRunning);
  EXPECT_GT(status->agreement.cosine, 0.99);
  EXPECT_DOUBLE_EQ(status->agreement.spearman, 1.0);  // no ranking measure judges embeddings
  EXPECT_NEAR(h.metrics->rollout_agreement->WithLabels({"m", "cosine"})->Value(), status->agreement.cosine, 1e-12);

  ASSERT_TRUE(h.rollouts->Start("m", spec).ok());
  for (int i = 0; i < 49; ++i) h.rollouts->RecordComparison("m", stable, turned, 2);
  EXPECT_EQ(h.rollouts->Get("m")->state, RolloutState::kRunning);  // 49 < min_requests
  h.rollouts->RecordComparison("m", stable, turned, 2);
  status = h.rollouts->Get("m");
  EXPECT_EQ(status->state, RolloutState::kRolledBack);
  EXPECT_NE(status->reason.find("cosine"), std::string::npos) << status->reason;
  EXPECT_DOUBLE_EQ(status->agreement.cosine, 0.5);
  EXPECT_EQ(h.Rollbacks("cosine"), 1);
  // A reranker's comparisons never trip the cosine bound (their cosine is 1).
  spec.guard.min_cosine = 1.0;
  ASSERT_TRUE(h.rollouts->Start("m", spec).ok());
  const std::vector<float> scores = {0.9f, 0.5f, 0.1f};
  for (int i = 0; i < 60; ++i) h.rollouts->RecordComparison("m", scores, scores);
  EXPECT_EQ(h.rollouts->Get("m")->state, RolloutState::kRunning);
}

TEST(Rollouts, TheGuardRollsBackOnErrorRateAndP99Ratio) {
  RolloutsHarness h;
  RolloutSpec spec = Canary(10);
  ASSERT_TRUE(h.rollouts->Start("m", spec).ok());
  using std::chrono::milliseconds;
  for (int i = 0; i < 50; ++i) h.rollouts->RecordOutcome("m", 2, /*ok=*/i % 10 != 0, milliseconds(5));
  EXPECT_EQ(h.rollouts->Get("m")->state, RolloutState::kRolledBack);
  EXPECT_EQ(h.Rollbacks("error_rate"), 1);
  EXPECT_EQ(h.rollouts->Get("m")->stats[1].errors, 5);

  ASSERT_TRUE(h.rollouts->Start("m", spec).ok());
  for (int i = 0; i < 50; ++i) h.rollouts->RecordOutcome("m", 1, true, milliseconds(10));
  for (int i = 0; i < 49; ++i) h.rollouts->RecordOutcome("m", 2, true, milliseconds(12));
  h.rollouts->CheckGuards();
  EXPECT_EQ(h.rollouts->Get("m")->state, RolloutState::kRunning);
  h.rollouts->RecordOutcome("m", 2, true, milliseconds(40));  // P99 of 50: the slowest
  auto status = h.rollouts->Get("m");
  EXPECT_EQ(status->state, RolloutState::kRolledBack);
  EXPECT_EQ(h.Rollbacks("p99_ratio"), 1);
  EXPECT_NEAR(status->stats[0].p99_ms, 10, 1e-9);
  EXPECT_NEAR(status->stats[1].p50_ms, 12, 1e-9);
  // Versions outside the rollout are not counted.
  ASSERT_TRUE(h.rollouts->Start("m", spec).ok());
  h.rollouts->RecordOutcome("m", 7, false, milliseconds(1));
  EXPECT_EQ(h.rollouts->Get("m")->stats[0].requests + h.rollouts->Get("m")->stats[1].requests, 0);
}

// ---- the rollout state file: restarts keep rollouts ----------------------------------------------

std::string TempStateFile(const char* name) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + (dir.empty() || dir.back() == '/' ? "" : "/") + name;
  std::remove(path.c_str());
  return path;
}

TEST(RolloutStateFile, RoundTripsEveryFieldAndRefusesWhatItDidNotWrite) {
  SavedRollout r;
  r.model = "m";
  r.spec = Canary(25, "x-user-id");
  r.spec.guard.min_spearman = 0.5;
  r.spec.window = 300;
  r.state = RolloutState::kPromoted;
  r.reason = "version 2 promoted";
  r.promoted_from = 1;
  auto back = ParseRolloutState(RolloutStateJson({r}));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 1u);
  const SavedRollout& b = (*back)[0];
  EXPECT_EQ(b.model, "m");
  EXPECT_EQ(b.spec.stable, 1);
  EXPECT_EQ(b.spec.candidate, 2);
  EXPECT_EQ(b.spec.mode, RolloutMode::kCanary);
  EXPECT_DOUBLE_EQ(b.spec.percent, 25);
  EXPECT_EQ(b.spec.sticky_header, "x-user-id");
  EXPECT_DOUBLE_EQ(b.spec.guard.min_spearman, 0.5);
  EXPECT_EQ(b.spec.guard.min_requests, 50);
  EXPECT_EQ(b.spec.window, 300u);
  EXPECT_EQ(b.state, RolloutState::kPromoted);
  EXPECT_EQ(b.reason, "version 2 promoted");
  EXPECT_EQ(b.promoted_from, 1);
  for (const char* bad : {"", "[]", R"({"version": 2, "rollouts": {}})", R"({"version": 1})",
                          R"({"version": 1, "rollouts": {"m": {"state": "running"}}})",
                          R"({"version": 1, "rollouts": {"m": {"rollout": {"candidate": "2"}, "state": "running"}}})",
                          R"({"version": 1, "rollouts": {"m": {"rollout": {"candidate": "2", "stable": "1"}, "state": "x"}}})"}) {
    EXPECT_FALSE(ParseRolloutState(bad).ok()) << bad;
  }
  const std::string path = TempStateFile("tide-rollout-roundtrip.json");
  auto none = ReadFileIfExists(path);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(WriteFileAtomically(path, "one").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "two").ok());
  auto read = ReadFileIfExists(path);
  ASSERT_TRUE(read.ok() && read->has_value());
  EXPECT_EQ(**read, "two");
  EXPECT_FALSE(WriteFileAtomically("/nonexistent-dir/x.json", "x").ok());
}

// Whoever can write the state file's folder may plant a symlink at the temporary name the writer
// used to take (.<name>.tmp): it is never written through, and no temporary file is left behind.
TEST(RolloutStateFile, ASymlinkPlantedAtTheTemporaryNameIsNotWrittenThrough) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "tide-rollout-symlink";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::filesystem::path victim = dir / "victim.txt";
  { std::ofstream(victim) << "precious"; }
  const std::filesystem::path path = dir / "rollouts.json";
  std::filesystem::create_symlink(victim, dir / ".rollouts.json.tmp");  // the old predictable name
  ASSERT_TRUE(WriteFileAtomically(path.string(), "state one").ok());
  ASSERT_TRUE(WriteFileAtomically(path.string(), "state two").ok());
  auto victim_text = ReadFileIfExists(victim.string());
  ASSERT_TRUE(victim_text.ok() && victim_text->has_value());
  EXPECT_EQ(**victim_text, "precious") << "the write went through the planted symlink";
  auto written = ReadFileIfExists(path.string());
  ASSERT_TRUE(written.ok() && written->has_value());
  EXPECT_EQ(**written, "state two");
  EXPECT_FALSE(std::filesystem::is_symlink(path));
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{".rollouts.json.tmp", "rollouts.json", "victim.txt"}))
      << "a temporary file was left behind";
  // The file it replaces keeps its mode.
  std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                         std::filesystem::perms::group_read);
  ASSERT_TRUE(WriteFileAtomically(path.string(), "state three").ok());
  EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                std::filesystem::perms::group_read);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tide::serving
