// tide::serving::testing window reference — how a rollout's per-version statistics were computed
// before they became incremental (serving/rollout_window.h): copy the window's latencies, sort,
// take the nearest rank (as rollout.cc did, into a std::deque). The brute force the window tests compare against, and the "before" side
// of bench/rollout_window. Header-only; no gtest.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>

namespace tide::serving::testing {

struct WindowSample {
  bool ok;
  double ms;  // < 0: none
};

struct WindowSummary {
  int64_t requests = 0, errors = 0;
  double p50 = 0, p99 = 0;
};

// Requests, errors and the nearest-rank P50 / P99 of the successful answers' latencies.
inline WindowSummary SummarizeByCopyAndSort(const std::deque<WindowSample>& window) {
  WindowSummary s;
  std::deque<double> ms;
  for (const WindowSample& x : window) {
    ++s.requests;
    if (!x.ok) {
      ++s.errors;
      continue;
    }
    if (x.ms >= 0) ms.push_back(x.ms);
  }
  std::sort(ms.begin(), ms.end());
  auto at = [&ms](double q) {
    if (ms.empty()) return 0.0;
    return ms[std::min(ms.size() - 1, static_cast<size_t>(q * static_cast<double>(ms.size())))];
  };
  s.p50 = at(0.50);
  s.p99 = at(0.99);
  return s;
}

}  // namespace tide::serving::testing
