#include "guard/circuit_breaker.h"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/clock.h"

namespace tide::guard {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using Decision = CircuitBreaker::Decision;

struct TransitionLog {
  BreakerState from;
  BreakerState to;
  std::string reason;
};

class CircuitBreakerTest : public ::testing::Test {
 protected:
  // Every trigger off; tests turn on the one they exercise.
  CircuitBreakerOptions BaseOptions() {
    CircuitBreakerOptions options;
    options.latency_window = seconds(10);
    options.window_slices = 10;
    options.min_samples = 100;
    options.min_requests = 10;
    options.open_duration = seconds(5);
    options.half_open_probes = 2;
    options.clock = &clock_;
    options.on_transition = [this](BreakerState from, BreakerState to, std::string_view reason) {
      transitions_.push_back({from, to, std::string(reason)});
    };
    return options;
  }

  std::unique_ptr<CircuitBreaker> Make(const CircuitBreakerOptions& options) {
    auto breaker = CircuitBreaker::Create(options);
    EXPECT_TRUE(breaker.ok()) << breaker.status();
    return *std::move(breaker);
  }

  // Opens a breaker through the queue trigger (must be enabled in its options).
  void OpenByQueue(CircuitBreaker& breaker) {
    breaker.ObserveQueue(1.0);
    ASSERT_EQ(breaker.state(), BreakerState::kOpen);
  }

  FakeClock clock_;
  std::vector<TransitionLog> transitions_;
};

TEST_F(CircuitBreakerTest, StartsClosedAndAdmitsEverything) {
  auto breaker = Make(BaseOptions());
  EXPECT_EQ(breaker->state(), BreakerState::kClosed);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(breaker->Admit(), Decision::kModel);
    breaker->Record({milliseconds(5000), false});  // every trigger is off
  }
  EXPECT_EQ(breaker->state(), BreakerState::kClosed);
  EXPECT_TRUE(transitions_.empty());
  breaker->ObserveQueue(1.0);
  EXPECT_EQ(breaker->state(), BreakerState::kClosed);
}

TEST_F(CircuitBreakerTest, OpensWhenP99ExceedsThreshold) {
  CircuitBreakerOptions options = BaseOptions();
  options.p99_threshold = milliseconds(200);
  auto breaker = Make(options);
  for (int i = 0; i < 99; ++i) breaker->Record({milliseconds(20), true});
  breaker->Record({milliseconds(300), true});
  // 1 slow sample of 100: P99 (rank 99) is still 20 ms.
  EXPECT_EQ(breaker->state(), BreakerState::kClosed);
  breaker->Record({milliseconds(300), true});
  // 2 slow of 101: rank 100 is slow.
  EXPECT_EQ(breaker->state(), BreakerState::kOpen);
  ASSERT_EQ(transitions_.size(), 1u);
  EXPECT_EQ(transitions_[0].from, BreakerState::kClosed);
  EXPECT_EQ(transitions_[0].to, BreakerState::kOpen);
  EXPECT_THAT(transitions_[0].reason, HasSubstr("p99"));
  EXPECT_EQ(breaker->Admit(), Decision::kFallback);
}

TEST_F(CircuitBreakerTest, P99TriggerWaitsForMinSamples) {
  CircuitBreakerOptions options = BaseOptions();
  options.p99_threshold = milliseconds(200);
  options.min_samples = 50;
  auto breaker = Make(options);
  for (int i = 0; i < 49; ++i) breaker->Record({milliseconds(900), true});
  EXPECT_EQ(breaker->state(), BreakerState::kClosed);
  breaker->Record({milliseconds(900), true});
  EXPECT_EQ(breaker->state(), BreakerState::kOpen);
}

TEST_F(CircuitBreakerTest, OpensWhenErrorRateReachesThreshold) {
  CircuitBreakerOptions options = BaseOptions();
  options.error_rate_threshold = 0.5;
  options.min_requests = 10;
  auto breaker = Make(options);
  for (int i = 0; i < 9; ++i) breaker->Record({milliseconds(1), false});
  // Nine failures, but fewer than min_requests.
  EXPECT_EQ(breaker->state(), BreakerState::kClosed);
  breaker->Record({milliseconds(1), true});  // 9 of 10
  EXPECT_EQ(breaker->state(), BreakerState::kOpen);
  ASSERT_EQ(transitions_.size(), 1u);
  EXPECT_THAT(transitions_[0].reason, HasSubstr("error rate"));
}

TEST_F(CircuitBreakerTest, StaysClosedBelowErrorRate) {
  CircuitBreakerOptions options = BaseOptions();
  options.error_rate_threshold = 0.5;
  auto breaker = Make(options);
  // Errors at i % 5 in {0, 4}: the running rate never reaches 0.5 (at most 5 of 11).
  for (int i = 0; i < 100; ++i) breaker->Record({milliseconds(1), i % 5 != 0 && i % 5 != 4});
  EXPECT_EQ(breaker->state(), BreakerState::kClosed);
  const CircuitBreaker::Stats stats = breaker->GetStats();
  EXPECT_EQ(stats.window_requests, 100);
  EXPECT_EQ(stats.window_errors, 40);
  for (int i = 0; i < 19; ++i) breaker->Record({milliseconds(1), false});
  EXPECT_EQ(breaker->state(), BreakerState::kClosed);  // 59 of 119
  breaker->Record({milliseconds(1), false});
  EXPECT_EQ(breaker->state(), BreakerState::kOpen);    // 60 of 120 = 0.5
}

TEST_F(CircuitBreakerTest, OpensOnQueueFullness) {
  CircuitBreakerOptions options = BaseOptions();
  options.queue_fullness_threshold = 0.9;
  auto breaker = Make(options);
  breaker->ObserveQueue(0.5);
  breaker->ObserveQueue(0.89);
  EXPECT_EQ(breaker->state(), BreakerState::kClosed);
  breaker->ObserveQueue(0.9);
  EXPECT_EQ(breaker->state(), BreakerState::kOpen);
  ASSERT_EQ(transitions_.size(), 1u);
  EXPECT_THAT(transitions_[0].reason, HasSubstr("queue fullness"));
  // Further observations while open change nothing.
  breaker->ObserveQueue(1.0);
  EXPECT_EQ(transitions_.size(), 1u);
}

TEST_F(CircuitBreakerTest, HalfOpensAfterOpenDuration) {
  CircuitBreakerOptions options = BaseOptions();
  options.queue_fullness_threshold = 0.9;
  auto breaker = Make(options);
  OpenByQueue(*breaker);
  EXPECT_EQ(breaker->Admit(), Decision::kFallback);
  EXPECT_EQ(breaker->GetStats().open_remaining, seconds(5));
  EXPECT_EQ(breaker->RetryAfter(), seconds(5));
  clock_.Advance(seconds(5) - nanoseconds(1));
  EXPECT_EQ(breaker->Admit(), Decision::kFallback);
  EXPECT_EQ(breaker->state(), BreakerState::kOpen);
  EXPECT_EQ(breaker->RetryAfter(), seconds(1));  // at least one second
  clock_.Advance(nanoseconds(1));
  EXPECT_EQ(breaker->Admit(), Decision::kModel);
  EXPECT_EQ(breaker->state(), BreakerState::kHalfOpen);
  ASSERT_EQ(transitions_.size(), 2u);
  EXPECT_EQ(transitions_[1].from, BreakerState::kOpen);
  EXPECT_EQ(transitions_[1].to, BreakerState::kHalfOpen);
}

TEST_F(CircuitBreakerTest, HalfOpenLimitsProbes) {
  CircuitBreakerOptions options = BaseOptions();
  options.queue_fullness_threshold = 0.9;
  options.half_open_probes = 3;
  auto breaker = Make(options);
  OpenByQueue(*breaker);
  clock_.Advance(seconds(5));
  EXPECT_EQ(breaker->Admit(), Decision::kModel);
  EXPECT_EQ(breaker->Admit(), Decision::kModel);
  EXPECT_EQ(breaker->Admit(), Decision::kModel);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(breaker->Admit(), Decision::kFallback);
  EXPECT_EQ(breaker->state(), BreakerState::kHalfOpen);
}

TEST_F(CircuitBreakerTest, ClosesWhenAllProbesSucceedAndForgetsTheWindow) {
  CircuitBreakerOptions options = BaseOptions();
  options.p99_threshold = milliseconds(200);
  options.min_samples = 10;
  auto breaker = Make(options);
  for (int i = 0; i < 10; ++i) breaker->Record({milliseconds(500), true});
  ASSERT_EQ(breaker->state(), BreakerState::kOpen);
  // Late results while open are ignored.
  for (int i = 0; i < 10; ++i) breaker->Record({milliseconds(500), true});
  clock_.Advance(seconds(5));
  ASSERT_EQ(breaker->Admit(), Decision::kModel);
  ASSERT_EQ(breaker->Admit(), Decision::kModel);
  breaker->Record({milliseconds(50), true});
  EXPECT_EQ(breaker->state(), BreakerState::kHalfOpen);
  breaker->Record({milliseconds(50), true});
  EXPECT_EQ(breaker->state(), BreakerState::kClosed);
  ASSERT_EQ(transitions_.size(), 3u);
  EXPECT_EQ(transitions_[2].from, BreakerState::kHalfOpen);
  EXPECT_EQ(transitions_[2].to, BreakerState::kClosed);
  EXPECT_EQ(breaker->GetStats().window_requests, 0);
  EXPECT_EQ(breaker->GetStats().transitions, 3);
  // The slow samples from before the outage are gone (still inside the 10 s window): a few
  // slow requests now do not reach min_samples.
  for (int i = 0; i < 9; ++i) breaker->Record({milliseconds(500), true});
  EXPECT_EQ(breaker->state(), BreakerState::kClosed);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(breaker->Admit(), Decision::kModel);
}

TEST_F(CircuitBreakerTest, FailedProbeReopens) {
  CircuitBreakerOptions options = BaseOptions();
  options.queue_fullness_threshold = 0.9;
  auto breaker = Make(options);
  OpenByQueue(*breaker);
  clock_.Advance(seconds(5));
  ASSERT_EQ(breaker->Admit(), Decision::kModel);
  breaker->Record({milliseconds(1), true});
  breaker->Record({milliseconds(1), false});
  EXPECT_EQ(breaker->state(), BreakerState::kOpen);
  ASSERT_EQ(transitions_.size(), 3u);
  EXPECT_EQ(transitions_[2].from, BreakerState::kHalfOpen);
  EXPECT_EQ(transitions_[2].to, BreakerState::kOpen);
  EXPECT_THAT(transitions_[2].reason, HasSubstr("probe failed"));
  // A fresh open period starts at the failure.
  EXPECT_EQ(breaker->Admit(), Decision::kFallback);
  clock_.Advance(seconds(4));
  EXPECT_EQ(breaker->Admit(), Decision::kFallback);
  clock_.Advance(seconds(1));
  EXPECT_EQ(breaker->Admit(), Decision::kModel);
  EXPECT_EQ(breaker->state(), BreakerState::kHalfOpen);
}

TEST_F(CircuitBreakerTest, SlowProbeReopens) {
  CircuitBreakerOptions options = BaseOptions();
  options.p99_threshold = milliseconds(200);
  options.queue_fullness_threshold = 0.9;
  auto breaker = Make(options);
  OpenByQueue(*breaker);
  clock_.Advance(seconds(5));
  ASSERT_EQ(breaker->Admit(), Decision::kModel);
  breaker->Record({milliseconds(200), true});  // at the threshold: fine
  EXPECT_EQ(breaker->state(), BreakerState::kHalfOpen);
  breaker->Record({milliseconds(201), true});
  EXPECT_EQ(breaker->state(), BreakerState::kOpen);
  EXPECT_THAT(transitions_.back().reason, HasSubstr("probe took"));
}

TEST_F(CircuitBreakerTest, QueueStillFullReopensFromHalfOpen) {
  CircuitBreakerOptions options = BaseOptions();
  options.queue_fullness_threshold = 0.9;
  auto breaker = Make(options);
  OpenByQueue(*breaker);
  clock_.Advance(seconds(5));
  ASSERT_EQ(breaker->Admit(), Decision::kModel);
  breaker->ObserveQueue(0.95);
  EXPECT_EQ(breaker->state(), BreakerState::kOpen);
}

TEST_F(CircuitBreakerTest, LostProbesAreReplacedAfterOpenDuration) {
  CircuitBreakerOptions options = BaseOptions();
  options.queue_fullness_threshold = 0.9;
  auto breaker = Make(options);
  OpenByQueue(*breaker);
  clock_.Advance(seconds(5));
  ASSERT_EQ(breaker->Admit(), Decision::kModel);
  ASSERT_EQ(breaker->Admit(), Decision::kModel);
  breaker->Record({milliseconds(1), true});  // the other probe never reports
  EXPECT_EQ(breaker->Admit(), Decision::kFallback);
  clock_.Advance(seconds(5) - nanoseconds(1));
  EXPECT_EQ(breaker->Admit(), Decision::kFallback);
  clock_.Advance(nanoseconds(1));
  EXPECT_EQ(breaker->Admit(), Decision::kModel);  // replaces the lost probe only
  EXPECT_EQ(breaker->Admit(), Decision::kFallback);
  breaker->Record({milliseconds(1), true});
  EXPECT_EQ(breaker->state(), BreakerState::kClosed);
}

TEST_F(CircuitBreakerTest, OldSamplesAgeOutOfTheWindow) {
  CircuitBreakerOptions options = BaseOptions();
  options.p99_threshold = milliseconds(200);
  options.min_samples = 10;
  options.error_rate_threshold = 0.5;
  options.min_requests = 10;
  auto breaker = Make(options);
  for (int i = 0; i < 9; ++i) breaker->Record({milliseconds(500), false});
  clock_.Advance(seconds(11));
  // Without expiry the tenth slow failure would open the breaker on both triggers.
  breaker->Record({milliseconds(500), false});
  EXPECT_EQ(breaker->state(), BreakerState::kClosed);
  EXPECT_EQ(breaker->GetStats().window_requests, 1);
  for (int i = 0; i < 9; ++i) breaker->Record({milliseconds(500), false});
  EXPECT_EQ(breaker->state(), BreakerState::kOpen);
}

TEST_F(CircuitBreakerTest, StatsReportWindow) {
  CircuitBreakerOptions options = BaseOptions();
  auto breaker = Make(options);
  for (int i = 0; i < 100; ++i) breaker->Record({milliseconds(i < 98 ? 10 : 400), i % 10 != 0});
  const CircuitBreaker::Stats stats = breaker->GetStats();
  EXPECT_EQ(stats.state, BreakerState::kClosed);
  EXPECT_EQ(stats.window_requests, 100);
  EXPECT_EQ(stats.window_errors, 10);
  // Rank 99 of 100 is 400 ms; the estimate is its bucket's upper bound, at most 25% above.
  EXPECT_GE(stats.window_p99, milliseconds(400));
  EXPECT_LE(stats.window_p99, milliseconds(500));
  EXPECT_EQ(stats.open_remaining, CircuitBreaker::duration::zero());
  EXPECT_EQ(BreakerStateName(BreakerState::kHalfOpen), "half_open");
}

TEST_F(CircuitBreakerTest, RejectsInvalidOptions) {
  const auto expect_invalid = [this](auto mutate) {
    CircuitBreakerOptions options = BaseOptions();
    mutate(options);
    const auto breaker = CircuitBreaker::Create(options);
    EXPECT_EQ(breaker.status().code(), absl::StatusCode::kInvalidArgument);
  };
  expect_invalid([](CircuitBreakerOptions& o) { o.p99_threshold = milliseconds(-1); });
  expect_invalid([](CircuitBreakerOptions& o) { o.latency_window = seconds(0); });
  expect_invalid([](CircuitBreakerOptions& o) { o.window_slices = 0; });
  expect_invalid([](CircuitBreakerOptions& o) { o.min_samples = 0; });
  expect_invalid([](CircuitBreakerOptions& o) { o.error_rate_threshold = 1.5; });
  expect_invalid([](CircuitBreakerOptions& o) { o.error_rate_threshold = -0.1; });
  expect_invalid([](CircuitBreakerOptions& o) { o.min_requests = 0; });
  expect_invalid([](CircuitBreakerOptions& o) { o.queue_fullness_threshold = 2.0; });
  expect_invalid([](CircuitBreakerOptions& o) { o.open_duration = seconds(-1); });
  expect_invalid([](CircuitBreakerOptions& o) { o.half_open_probes = 0; });
  EXPECT_TRUE(CircuitBreaker::Create(CircuitBreakerOptions{}).ok());
}

// Threads hammer Admit/Record/ObserveQueue while another moves the clock. The reported transitions
// must form one valid chain matching the final state and the transition count.
TEST_F(CircuitBreakerTest, ConcurrentUseKeepsStateConsistent) {
  CircuitBreakerOptions options = BaseOptions();
  options.p99_threshold = milliseconds(100);
  options.min_samples = 20;
  options.error_rate_threshold = 0.3;
  options.min_requests = 20;
  options.queue_fullness_threshold = 0.95;
  options.open_duration = milliseconds(50);
  options.half_open_probes = 3;
  auto breaker = Make(options);

  std::atomic<bool> stop{false};
  std::atomic<int64_t> model_admits{0};
  std::atomic<int64_t> fallback_admits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      uint32_t seed = 12345u + static_cast<uint32_t>(t);
      for (int i = 0; i < 20000; ++i) {
        seed = seed * 1664525u + 1013904223u;
        if (breaker->Admit() == Decision::kModel) {
          ++model_admits;
          const bool slow = (seed >> 8) % 50 == 0;
          const bool ok = (seed >> 16) % 5 != 0;
          breaker->Record({milliseconds(slow ? 300 : 10), ok});
        } else {
          ++fallback_admits;
        }
        if ((seed >> 4) % 997 == 0) breaker->ObserveQueue(1.0);
      }
    });
  }
  std::thread ticker([&] {
    while (!stop.load()) {
      clock_.Advance(milliseconds(7));
      std::this_thread::yield();
    }
  });
  for (std::thread& thread : threads) thread.join();
  stop = true;
  ticker.join();

  EXPECT_EQ(model_admits + fallback_admits, 4 * 20000);
  EXPECT_GT(model_admits.load(), 0);
  const CircuitBreaker::Stats stats = breaker->GetStats();
  EXPECT_GT(stats.transitions, 0);  // ObserveQueue(1.0) alone opens it at least once
  ASSERT_EQ(static_cast<int64_t>(transitions_.size()), stats.transitions);
  BreakerState expected_from = BreakerState::kClosed;
  for (const TransitionLog& t : transitions_) {
    ASSERT_EQ(t.from, expected_from);
    const bool valid = (t.from == BreakerState::kClosed && t.to == BreakerState::kOpen) ||
                       (t.from == BreakerState::kOpen && t.to == BreakerState::kHalfOpen) ||
                       (t.from == BreakerState::kHalfOpen && t.to == BreakerState::kOpen) ||
                       (t.from == BreakerState::kHalfOpen && t.to == BreakerState::kClosed);
    ASSERT_TRUE(valid) << BreakerStateName(t.from) << " -> " << BreakerStateName(t.to);
    expected_from = t.to;
  }
  EXPECT_EQ(expected_from, stats.state);
  EXPECT_EQ(breaker->state(), stats.state);
}

}  // namespace
}  // namespace tide::guard
