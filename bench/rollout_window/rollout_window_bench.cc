// Cost of one recorded answer in a rollout at the largest window, measured in one
// run against the reference: the per-answer window work the guard did before its statistics were
// incremental, reproduced here as it was (push the answer, trim the window, then copy each
// version's latencies and sort them for P99). Both sides hold full windows of both versions with
// guard.min_requests = window, so every candidate answer summarises both windows.
//
//   new   Rollouts::RecordOutcome (lock, lookup, OutcomeWindow insert/evict, exact P99 of both
//         versions in O(log window))
//   old   the removed code's std::deque<WindowSample> push/pop + Summarize(candidate) + Summarize(stable)
//
// Times are the thread's CPU time (CLOCK_THREAD_CPUTIME_ID), so that a machine shared with other
// work (builds) inflates neither side; one thread does all the work.
//
// usage: build/bench/rollout_window_bench   (bench/rollout_window/run.sh keeps the output)
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <random>
#include <vector>

#include "common/clock.h"
#include "serving/rollout.h"
#include "serving/testing/window_reference.h"
#include "spdlog/spdlog.h"

namespace {

using tide::serving::kMaxRolloutWindow;
// The calling thread's CPU time in ns.
double ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// ---- the reference: the code the incremental windows replaced in rollout.cc ----
using tide::serving::testing::WindowSample;
using tide::serving::testing::WindowSummary;
// The removed code's summary (serving/testing/window_reference.h, also the tests' brute force).
WindowSummary Summarize(const std::deque<WindowSample>& samples) {
  return tide::serving::testing::SummarizeByCopyAndSort(samples);
}

// ns per candidate answer of the old per-answer work at `window`, over `answers` answers.
double OldNsPerAnswer(size_t window, int answers, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> latency(5, 15);
  std::deque<WindowSample> stable, candidate;
  for (size_t i = 0; i < window; ++i) {
    stable.push_back({true, latency(rng)});
    candidate.push_back({true, latency(rng)});
  }
  double sink = 0;
  const double start = ThreadCpuNs();
  for (int i = 0; i < answers; ++i) {
    candidate.push_back({true, latency(rng)});
    while (candidate.size() > window) candidate.pop_front();
    const WindowSummary c = Summarize(candidate);
    const WindowSummary s = Summarize(stable);
    sink += c.p99 / s.p99 + static_cast<double>(c.errors);
  }
  const double ns = ThreadCpuNs() - start;
  if (sink < 0) std::printf("%f\n", sink);
  return ns / answers;
}

// ns per candidate answer through Rollouts::RecordOutcome at `window`, over `answers` answers.
double NewNsPerAnswer(size_t window, int answers, std::mt19937_64& rng, bool* still_running) {
  tide::serving::RolloutsOptions o;
  o.check_interval = std::chrono::milliseconds(0);
  tide::serving::Rollouts rollouts(nullptr, o);
  tide::serving::RolloutSpec spec;
  spec.stable = 1;
  spec.candidate = 2;
  spec.window = window;
  spec.guard.min_requests = static_cast<int64_t>(window);
  spec.guard.max_p99_ratio = 1.5;
  if (!rollouts.Start("m", spec).ok()) return -1;
  std::uniform_int_distribution<int64_t> latency_us(5000, 15000);
  for (size_t i = 0; i < window; ++i) {
    rollouts.RecordOutcome("m", 1, true, std::chrono::microseconds(latency_us(rng)));
    rollouts.RecordOutcome("m", 2, true, std::chrono::microseconds(latency_us(rng)));
  }
  std::vector<tide::Clock::duration> latencies(static_cast<size_t>(answers));
  for (auto& l : latencies) l = std::chrono::microseconds(latency_us(rng));
  const double start = ThreadCpuNs();
  for (int i = 0; i < answers; ++i) rollouts.RecordOutcome("m", 2, true, latencies[static_cast<size_t>(i)]);
  const double ns = ThreadCpuNs() - start;
  *still_running = rollouts.Get("m")->state == tide::serving::RolloutState::kRunning;
  return ns / answers;
}

}  // namespace

int main() {
  spdlog::set_level(spdlog::level::warn);  // no "rollout started" lines in the results
  std::mt19937_64 rng(26);
  bool running_max = false, running_default = false;
  const double new_max = NewNsPerAnswer(kMaxRolloutWindow, 200000, rng, &running_max);
  const double new_default = NewNsPerAnswer(1000, 200000, rng, &running_default);
  const double old_max = OldNsPerAnswer(kMaxRolloutWindow, 20, rng);
  const double old_default = OldNsPerAnswer(1000, 2000, rng);
  const double old_previous_max = OldNsPerAnswer(1000000, 3, rng);
  std::printf("rollout window: cost of one recorded candidate answer, both windows full, min_requests = window\n");
  std::printf("%-44s %14s\n", "", "CPU ns/answer");
  std::printf("%-44s %14.0f\n", "new  window 100000 (the maximum now)", new_max);
  std::printf("%-44s %14.0f\n", "old  window 100000", old_max);
  std::printf("%-44s %14.0f\n", "old  window 1000000 (the maximum before)", old_previous_max);
  std::printf("%-44s %14.0f\n", "new  window 1000 (the default)", new_default);
  std::printf("%-44s %14.0f\n", "old  window 1000", old_default);
  std::printf("ratio old/new at window 100000:              %10.1fx\n", old_max / new_max);
  std::printf("ratio old at 1000000 / new at 100000:        %10.1fx\n", old_previous_max / new_max);
  std::printf("ratio old/new at window 1000:                %10.1fx\n", old_default / new_default);
  std::printf("ratio new at 100000 / new at 1000:           %10.2fx\n", new_max / new_default);
  std::printf("guard still running at the end (no rollback skewed the timing): %s %s\n",
              running_max ? "yes" : "NO", running_default ? "yes" : "NO");
  return running_max && running_default ? 0 : 1;
}
