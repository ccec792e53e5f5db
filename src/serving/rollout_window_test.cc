// The rollout windows against a brute-force recomputation (copy and sort of the window, as the
// guard did before it was incremental) on random sequences, the window bound on every way in, and
// the guard's decisions at the largest window.
#include "serving/rollout_window.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "gtest/gtest.h"
#include "serving/rollout.h"
#include "serving/rollout_json.h"
#include "serving/testing/window_reference.h"

namespace tide::serving {
namespace {

using testing::SummarizeByCopyAndSort;
using testing::WindowSample;
using testing::WindowSummary;

TEST(OutcomeWindow, EqualsABruteForceRecomputationOnRandomSequences) {
  std::mt19937_64 rng(26);
  for (size_t capacity : {size_t{1}, size_t{2}, size_t{7}, size_t{100}, size_t{1000}}) {
    OutcomeWindow window(capacity);
    std::deque<WindowSample> brute;
    for (int step = 0; step < 5000; ++step) {
      const bool ok = rng() % 10 != 0;
      std::optional<double> ms;
      if (rng() % 20 != 0) {
        // Few distinct values (many ties), then a continuous range.
        ms = step % 2 == 0 ? static_cast<double>(rng() % 8) : std::uniform_real_distribution<double>(0.1, 500)(rng);
      }
      window.Add(ok, ms);
      brute.push_back({ok, ms.value_or(-1.0)});
      while (brute.size() > capacity) brute.pop_front();
      const WindowSummary want = SummarizeByCopyAndSort(brute);
      ASSERT_EQ(static_cast<int64_t>(window.requests()), want.requests) << "capacity " << capacity << " step " << step;
      ASSERT_EQ(window.errors(), want.errors) << "capacity " << capacity << " step " << step;
      ASSERT_EQ(window.Percentile(0.50), want.p50) << "capacity " << capacity << " step " << step;
      ASSERT_EQ(window.Percentile(0.99), want.p99) << "capacity " << capacity << " step " << step;
    }
    window.Reset(capacity);
    EXPECT_EQ(window.requests(), 0u);
    EXPECT_EQ(window.errors(), 0);
    EXPECT_EQ(window.Percentile(0.99), 0.0);
  }
}

TEST(AgreementWindow, MeansEqualABruteForceRecomputationOnRandomSequences) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(0, 1);
  for (size_t capacity : {size_t{1}, size_t{3}, size_t{50}, size_t{1000}}) {
    AgreementWindow window(capacity);
    std::deque<RankingAgreement> brute;
    // Enough comparisons to evict many windows' worth (the running sums are re-added once per
    // window; the test would see drift if they were not).
    for (int step = 0; step < 20000; ++step) {
      const RankingAgreement a{unit(rng) * 2 - 1, static_cast<double>(rng() % 2), unit(rng)};
      window.Add(a);
      brute.push_back(a);
      while (brute.size() > capacity) brute.pop_front();
      RankingAgreement sum{0, 0, 0};
      for (const RankingAgreement& b : brute) {
        sum.spearman += b.spearman;
        sum.top1 += b.top1;
        sum.ndcg10 += b.ndcg10;
      }
      const double n = static_cast<double>(brute.size());
      const RankingAgreement means = window.Means();
      ASSERT_EQ(window.pairs(), brute.size());
      ASSERT_NEAR(means.spearman, sum.spearman / n, 1e-12) << "capacity " << capacity << " step " << step;
      ASSERT_NEAR(means.top1, sum.top1 / n, 1e-12) << "capacity " << capacity << " step " << step;
      ASSERT_NEAR(means.ndcg10, sum.ndcg10 / n, 1e-12) << "capacity " << capacity << " step " << step;
    }
  }
}

TEST(RolloutWindowBound, EveryWayInRefusesAWindowOverTheMaximum) {
  ASSERT_EQ(kMaxRolloutWindow, 100000u);
  auto too_big = ParseRolloutJson(R"({"candidate": "2", "window": 1000000})");
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(KindOf(too_big.status()), ErrorKind::kInvalidInput);
  EXPECT_EQ(too_big.status().message(), "window must be an integer within 1..100000");
  EXPECT_FALSE(ParseRolloutJson(R"({"candidate": "2", "window": 100001})").ok());
  EXPECT_FALSE(ParseRolloutJson(R"({"candidate": "2", "window": 0})").ok());
  auto at_max = ParseRolloutJson(R"({"candidate": "2", "window": 100000})");
  ASSERT_TRUE(at_max.ok()) << at_max.status();
  EXPECT_EQ(at_max->spec.window, 100000u);
  // min_requests grows the window to itself, so it has the same bound.
  auto min_requests = ParseRolloutJson(R"({"candidate": "2", "guard": {"min_requests": 1000000}})");
  ASSERT_FALSE(min_requests.ok());
  EXPECT_EQ(min_requests.status().message(), "guard.min_requests must be an integer within 1..100000");
  // A deep rollout text is refused by the pre-scan (also for config.pbtxt's `rollout` parameter).
  auto deep = ParseRolloutJson("{\"candidate\": \"2\", \"guard\": " + std::string(5000, '[') + std::string(5000, ']') + "}");
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(KindOf(deep.status()), ErrorKind::kInvalidInput);
  EXPECT_NE(deep.status().message().find("max_json_depth"), std::string::npos) << deep.status();

  RolloutsOptions o;
  o.check_interval = std::chrono::milliseconds(0);
  Rollouts rollouts(nullptr, o);
  RolloutSpec spec;
  spec.stable = 1;
  spec.candidate = 2;
  spec.window = kMaxRolloutWindow + 1;
  EXPECT_EQ(KindOf(rollouts.Start("m", spec)), ErrorKind::kInvalidInput);
  EXPECT_EQ(KindOf(rollouts.Restore("m", spec, RolloutState::kRunning, "", 0)), ErrorKind::kInvalidInput);
  EXPECT_FALSE(rollouts.Get("m").has_value());  // nothing started
  spec.window = 10;
  spec.guard.min_requests = static_cast<int64_t>(kMaxRolloutWindow) + 1;
  EXPECT_EQ(KindOf(rollouts.Start("m", spec)), ErrorKind::kInvalidInput);
  spec.guard.min_requests = static_cast<int64_t>(kMaxRolloutWindow);
  ASSERT_TRUE(rollouts.Start("m", spec).ok());
  EXPECT_EQ(rollouts.Get("m")->spec.window, kMaxRolloutWindow);  // grown to min_requests
}

// The guard's decisions through Rollouts equal the brute-force guard's, answer by answer, on random
// sequences (error rate and P99 ratio), restarting after each rollback.
TEST(RolloutGuard, DecisionsEqualABruteForceGuardOnRandomSequences) {
  std::mt19937_64 rng(2026);
  RolloutsOptions o;
  o.check_interval = std::chrono::milliseconds(0);
  Rollouts rollouts(nullptr, o);
  RolloutSpec spec;
  spec.stable = 1;
  spec.candidate = 2;
  spec.window = 64;
  spec.guard.min_requests = 32;
  spec.guard.max_error_rate = 0.06;
  spec.guard.max_p99_ratio = 1.5;
  int rollbacks = 0, runs = 0;
  for (int run = 0; run < 40; ++run) {
    ASSERT_TRUE(rollouts.Start("m", spec).ok());
    ++runs;
    std::deque<WindowSample> stable, candidate;
    // Each run draws its own candidate: error probability and slowness around the bounds.
    const int error_per_mille = static_cast<int>(rng() % 90);
    const double slow = 1.0 + static_cast<double>(rng() % 100) / 100.0;
    for (int step = 0; step < 400; ++step) {
      const bool to_candidate = rng() % 2 == 0;
      const bool ok = !to_candidate || static_cast<int>(rng() % 1000) >= error_per_mille;
      const double ms = std::uniform_real_distribution<double>(5, 10)(rng) * (to_candidate ? slow : 1.0);
      const Clock::duration latency =
          std::chrono::duration_cast<Clock::duration>(std::chrono::microseconds(static_cast<int64_t>(ms * 1000)));
      rollouts.RecordOutcome("m", to_candidate ? 2 : 1, ok, latency);
      auto& brute = to_candidate ? candidate : stable;
      brute.push_back({ok, std::chrono::duration<double, std::milli>(latency).count()});
      while (brute.size() > spec.window) brute.pop_front();
      // The brute-force guard.
      bool roll_back = false;
      if (candidate.size() >= 32) {
        const WindowSummary c = SummarizeByCopyAndSort(candidate);
        roll_back = static_cast<double>(c.errors) / static_cast<double>(c.requests) > 0.06;
        if (!roll_back && stable.size() >= 32) {
          const WindowSummary s = SummarizeByCopyAndSort(stable);
          roll_back = s.p99 > 0 && c.p99 / s.p99 > 1.5;
        }
      }
      const auto status = rollouts.Get("m");
      ASSERT_EQ(status->state == RolloutState::kRolledBack, roll_back) << "run " << run << " step " << step;
      const WindowSummary c = SummarizeByCopyAndSort(candidate);
      ASSERT_EQ(status->stats[1].p99_ms, c.p99);
      ASSERT_EQ(status->stats[1].p50_ms, c.p50);
      if (roll_back) {
        ++rollbacks;
        break;
      }
    }
  }
  // Both outcomes occurred, so the comparison covered both branches.
  EXPECT_GT(rollbacks, 5);
  EXPECT_LT(rollbacks, runs - 5);
}

// At the largest window the P99 ratio decides on the exact nearest rank: 1,000 slow answers of
// 100,000 put the P99 (rank 99,000) on a slow one; 999 do not.
TEST(RolloutGuard, DecidesExactlyAtTheLargestWindow) {
  RolloutsOptions o;
  o.check_interval = std::chrono::milliseconds(0);
  for (int slow_answers : {999, 1001}) {
    Rollouts rollouts(nullptr, o);
    RolloutSpec spec;
    spec.stable = 1;
    spec.candidate = 2;
    spec.window = kMaxRolloutWindow;
    spec.guard.min_requests = static_cast<int64_t>(kMaxRolloutWindow);
    spec.guard.max_p99_ratio = 1.5;
    ASSERT_TRUE(rollouts.Start("m", spec).ok());
    using std::chrono::milliseconds;
    for (size_t i = 0; i < kMaxRolloutWindow; ++i) rollouts.RecordOutcome("m", 1, true, milliseconds(10));
    const int n = static_cast<int>(kMaxRolloutWindow);
    for (int i = 0; i < n; ++i) {
      // Slow answers spread through the window, not bunched at one end.
      const bool slow = i % (n / slow_answers) == 0 && i / (n / slow_answers) < slow_answers;
      rollouts.RecordOutcome("m", 2, true, milliseconds(slow ? 16 : 10));
    }
    const auto status = rollouts.Get("m");
    EXPECT_EQ(status->stats[1].requests, n);
    if (slow_answers == 999) {
      EXPECT_EQ(status->state, RolloutState::kRunning);
      EXPECT_DOUBLE_EQ(status->stats[1].p99_ms, 10);
    } else {
      EXPECT_EQ(status->state, RolloutState::kRolledBack) << status->reason;
      EXPECT_NE(status->reason.find("P99 16.00 ms / stable P99 10.00 ms"), std::string::npos) << status->reason;
    }
  }
}

}  // namespace
}  // namespace tide::serving
