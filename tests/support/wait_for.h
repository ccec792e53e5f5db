// WaitFor: the one way a test waits for a condition another thread (or process) makes true.
//
//   ASSERT_TRUE(WaitFor([&] { return lane.ready(); }, kHang, "the shadow lane to be ready"));
//
// Polls `condition` (called on the caller's thread) with backoff: first at once, then after 1 ms,
// doubling up to 50 ms between calls, until it returns true or `timeout` has passed; a last call
// is made at the deadline. Returns success, or a failure naming what was awaited and for how long,
// so the assertion that wraps it says what did not happen. `timeout` bounds a hang only: pick it
// generous (seconds); a test never asserts how fast a condition came true (that is a benchmark).
//
// Contract: header-only; no state; thread-safe as far as `condition` is.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace tide::test_support {

template <typename Condition, typename Rep, typename Period>
::testing::AssertionResult WaitFor(Condition&& condition, std::chrono::duration<Rep, Period> timeout,
                                   std::string_view what = "the condition") {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout);
  std::chrono::milliseconds pause(1);
  for (;;) {
    if (condition()) return ::testing::AssertionSuccess();
    const Clock::time_point now = Clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  if (condition()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "gave up waiting for " << what << " after "
         << std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count() << " ms";
}

template <typename Condition>
::testing::AssertionResult WaitFor(Condition&& condition, absl::Duration timeout,
                                   std::string_view what = "the condition") {
  return WaitFor(std::forward<Condition>(condition), absl::ToChronoNanoseconds(timeout), what);
}

}  // namespace tide::test_support
