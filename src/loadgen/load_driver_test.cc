#include "loadgen/load_driver.h"

#include <array>
#include <deque>
#include <functional>

#include "gtest/gtest.h"
#include "loadgen/event_loop.h"

namespace tide::loadgen {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1'000'000'000;

// A sender with `slots` parallel lanes on virtual time; a request waits for a free lane (the
// stall the driver must not hide) and then takes service_time(request_index, start) ns.
class FakeTransport final : public Transport {
 public:
  FakeTransport(SimulatedEventLoop* loop, int slots, std::function<int64_t(size_t, int64_t)> service_time)
      : loop_(loop), free_slots_(slots), service_time_(std::move(service_time)) {}
  std::function<int(size_t)> status_of = [](size_t) { return 200; };
  std::function<int(size_t)> grpc_status_of;  // set: a gRPC transport's answers (no HTTP status)
  std::vector<int64_t> send_times;  // when each request actually started

  void Send(size_t index, std::function<void(const TransportResult&)> done) override {
    queue_.push_back({index, std::move(done)});
    Pump();
  }

 private:
  void Pump() {
    while (free_slots_ > 0 && !queue_.empty()) {
      auto [index, done] = std::move(queue_.front());
      queue_.pop_front();
      --free_slots_;
      send_times.push_back(loop_->Now());
      loop_->RunAt(loop_->Now() + service_time_(index, loop_->Now()), [this, index, done] {
        ++free_slots_;
        TransportResult r;
        if (grpc_status_of) {
          r.grpc_status = grpc_status_of(index);
          if (r.grpc_status != 0) r.error = "grpc " + std::to_string(r.grpc_status);
        } else {
          r.http_status = status_of(index);
        }
        Pump();
        done(r);
      });
    }
  }
  SimulatedEventLoop* loop_;
  int free_slots_;
  std::function<int64_t(size_t, int64_t)> service_time_;
  std::deque<std::pair<size_t, std::function<void(const TransportResult&)>>> queue_;
};

TEST(RunLoad, ClosedLoopKeepsConcurrencyRequestsOutstanding) {
  SimulatedEventLoop loop;
  FakeTransport t(&loop, 2, [](size_t, int64_t) { return 10 * kMs; });
  LoadOptions o;
  o.concurrency = 2;
  o.warmup_ns = 1 * kS;
  o.duration_ns = 5 * kS;
  auto r = RunLoad(&loop, &t, o);
  ASSERT_TRUE(r.ok()) << r.status();
  // Two lanes of 10 ms: 200 requests/s. Completions exactly at the window's end belong to the
  // next window, so the 5 s window holds 2 * 500 of them.
  EXPECT_EQ(r->completed, 1000u);
  EXPECT_DOUBLE_EQ(r->measured_seconds, 5.0);
  EXPECT_DOUBLE_EQ(r->throughput(), 200.0);
  EXPECT_EQ(r->latency.Percentile(0), 10.0);
  EXPECT_EQ(r->latency.Percentile(100), 10.0);
  EXPECT_TRUE(r->errors.empty());
  EXPECT_EQ(r->outstanding_at_end, 2u);
}

TEST(RunLoad, OpenLoopWithoutQueueingMeasuresTheServiceTime) {
  SimulatedEventLoop loop;
  FakeTransport t(&loop, 1, [](size_t, int64_t) { return 10 * kMs; });
  LoadOptions o;
  o.request_rate = 50;
  o.warmup_ns = 0;
  o.duration_ns = 2 * kS;
  auto r = RunLoad(&loop, &t, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 100u);
  EXPECT_EQ(r->latency.Percentile(100), 10.0);
  for (size_t i = 1; i < t.send_times.size(); ++i) EXPECT_EQ(t.send_times[i] - t.send_times[i - 1], 20 * kMs);
}

TEST(RunLoad, OpenLoopMeasuresFromTheIntendedSendTimeWhenTheSenderStalls) {
  // One lane; every request takes 5 ms except request 10, which stalls for 300 ms. Requests are
  // due every 10 ms. Request 10+m (m >= 1) is due at 100 + 10m ms but can only start at
  // 400 + 5(m-1) ms; measured from its intended time its latency is 300 - 5m ms (while the
  // backlog lasts), from its actual send it would be 5 ms.
  SimulatedEventLoop loop;
  FakeTransport t(&loop, 1, [](size_t i, int64_t) { return i == 10 ? 300 * kMs : 5 * kMs; });
  LoadOptions o;
  o.request_rate = 100;
  o.warmup_ns = 0;
  o.duration_ns = 2 * kS;
  auto r = RunLoad(&loop, &t, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 200u);
  EXPECT_EQ(r->latency.Percentile(100), 300.0);
  size_t over_100ms = 0, at_5ms = 0;
  for (double v : r->latency.samples()) {
    over_100ms += v > 100;
    at_5ms += v == 5;
  }
  // Request 10 (300 ms) and requests 11..49 (295 .. 105 ms).
  EXPECT_EQ(over_100ms, 40u);
  // Before the stall 10 requests, after the backlog drains the rest: every one of those is 5 ms.
  EXPECT_GT(at_5ms, 100u);
  // Sends really were delayed: request 11 left at 400 ms, not at its intended 110 ms.
  EXPECT_EQ(t.send_times[11], 400 * kMs);
}

TEST(RunLoad, OpenLoopDrainsIssuedRequestsSoTheSlowestAreNotDropped) {
  // Due every 10 ms, served one at a time in 20 ms: request k completes at 20(k+1) ms, latency
  // 10k + 20 ms. The 1 s window holds k = 0..48; k = 49..99 were issued before the end and are
  // drained, up to request 99 at 1010 ms.
  SimulatedEventLoop loop;
  FakeTransport t(&loop, 1, [](size_t, int64_t) { return 20 * kMs; });
  LoadOptions o;
  o.request_rate = 100;
  o.warmup_ns = 0;
  o.duration_ns = 1 * kS;
  auto r = RunLoad(&loop, &t, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->fixed_duration);
  EXPECT_EQ(r->completed, 49u);
  EXPECT_DOUBLE_EQ(r->throughput(), 49.0);
  EXPECT_EQ(r->drained, 51u);
  EXPECT_EQ(r->outstanding_at_end, 0u);
  ASSERT_EQ(r->latency.count(), 100u);
  EXPECT_EQ(r->latency.Percentile(0), 20.0);
  EXPECT_EQ(r->latency.Percentile(100), 1010.0);
  EXPECT_EQ(r->latency.Percentile(50), 510.0);  // rank 50 of 20, 30, ..., 1010

  // With the drain bounded, what is left is reported as outstanding.
  SimulatedEventLoop loop2;
  FakeTransport t2(&loop2, 1, [](size_t, int64_t) { return 20 * kMs; });
  o.drain_ns = 100 * kMs;
  auto r2 = RunLoad(&loop2, &t2, o);
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(r2->drained, 5u);  // completions at 1000 (exclusive end of the window) .. 1080 ms
  EXPECT_EQ(r2->outstanding_at_end, 46u);
}

TEST(RunLoad, StopsWhenThreeWindowsAreStable) {
  SimulatedEventLoop loop;
  FakeTransport t(&loop, 4, [](size_t, int64_t) { return 8 * kMs; });
  LoadOptions o;
  o.concurrency = 4;
  o.warmup_ns = 1 * kS;
  o.window_ns = 1 * kS;
  auto r = RunLoad(&loop, &t, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->stable);
  EXPECT_EQ(r->windows.size(), 3u);
  EXPECT_DOUBLE_EQ(r->measured_seconds, 3.0);
  EXPECT_EQ(r->completed, 1500u);  // 500/s over the 3 aggregated windows
}

TEST(RunLoad, GivesUpAfterMaxWindowsWhenThroughputKeepsChanging) {
  SimulatedEventLoop loop;
  // Service time alternates by second: 10 ms in even seconds, 30 ms in odd ones.
  FakeTransport t(&loop, 1, [](size_t, int64_t now) { return (now / kS) % 2 == 0 ? 10 * kMs : 30 * kMs; });
  LoadOptions o;
  o.concurrency = 1;
  o.warmup_ns = 0;
  o.window_ns = 1 * kS;
  o.max_windows = 6;
  auto r = RunLoad(&loop, &t, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->stable);
  EXPECT_EQ(r->windows.size(), 6u);
  EXPECT_DOUBLE_EQ(r->measured_seconds, 3.0);  // still the last three windows
}

TEST(RunLoad, CountsErrorsByKindAndKeepsThemOutOfTheLatencies) {
  SimulatedEventLoop loop;
  FakeTransport t(&loop, 1, [](size_t i, int64_t) { return i % 4 == 3 ? 1 * kMs : 10 * kMs; });
  t.status_of = [](size_t i) { return i % 4 == 3 ? 503 : 200; };
  LoadOptions o;
  o.concurrency = 1;
  o.warmup_ns = 0;
  o.duration_ns = 31 * kMs * 10;  // ten cycles of 10+10+10+1 ms
  auto r = RunLoad(&loop, &t, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->errors.count("http 503"), 1u);
  EXPECT_EQ(r->errors.at("http 503"), 9u);  // the tenth 503 completes exactly at the end
  EXPECT_EQ(r->completed, 30u);
  EXPECT_EQ(r->latency.Percentile(0), 10.0);
  // The 503s are shed answers: their own latencies are kept apart (1 ms each).
  EXPECT_EQ(r->shed_latency.count(), 9u);
  EXPECT_EQ(r->shed_latency.Percentile(100), 1.0);
}

TEST(RunLoad, OpenLoopTimesShedAnswersFromTheIntendedSendTimeButNotOtherErrors) {
  SimulatedEventLoop loop;
  // One lane: every request queues behind the previous one, so a quick 429 still waits.
  FakeTransport t(&loop, 1, [](size_t i, int64_t) { return i % 2 == 1 ? kMs / 2 : 2 * kMs; });
  t.status_of = [](size_t i) { return i % 4 == 1 ? 429 : i % 4 == 3 ? 500 : 200; };
  LoadOptions o;
  o.request_rate = 400;  // one every 2.5 ms: the lane keeps up, nothing queues
  o.warmup_ns = 0;
  o.duration_ns = 1 * kS;
  auto r = RunLoad(&loop, &t, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->errors.at("http 429"), 90u);
  EXPECT_GT(r->errors.at("http 500"), 90u);
  EXPECT_EQ(r->shed_latency.count(), r->errors.at("http 429"));  // 500 is not a shed answer
  EXPECT_EQ(r->shed_latency.Percentile(0), 0.5);
  EXPECT_EQ(r->shed_latency.Percentile(100), 0.5);
  EXPECT_EQ(r->latency.Percentile(50), 2.0);
}

TEST(RunLoad, GrpcAnswersCountByTheirCodeAndShedCodesAreShedAnswers) {
  SimulatedEventLoop loop;
  FakeTransport t(&loop, 1, [](size_t i, int64_t) { return i % 4 == 0 ? 10 * kMs : 1 * kMs; });
  // 0 OK, 8 RESOURCE_EXHAUSTED and 14 UNAVAILABLE (shed), 13 INTERNAL (not shed).
  t.grpc_status_of = [](size_t i) { return std::array<int, 4>{0, 8, 14, 13}[i % 4]; };
  LoadOptions o;
  o.concurrency = 1;
  o.warmup_ns = 0;
  o.duration_ns = 13 * kMs * 10;  // ten cycles of 10+1+1+1 ms
  auto r = RunLoad(&loop, &t, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 10u);
  EXPECT_EQ(r->latency.Percentile(0), 10.0);
  EXPECT_EQ(r->errors.at("grpc 8"), 10u);
  EXPECT_EQ(r->errors.at("grpc 14"), 10u);
  EXPECT_EQ(r->errors.at("grpc 13"), 9u);  // the tenth completes exactly at the end
  EXPECT_EQ(r->shed_latency.count(), 20u);
  EXPECT_EQ(r->errors.count("http 0"), 0u);
}

TEST(RunLoad, RejectsInconsistentOptions) {
  SimulatedEventLoop loop;
  FakeTransport t(&loop, 1, [](size_t, int64_t) { return kMs; });
  LoadOptions o;
  o.concurrency = 0;
  EXPECT_FALSE(RunLoad(&loop, &t, o).ok());
  o.concurrency = 1;
  o.max_windows = 2;  // fewer than stable_windows
  EXPECT_FALSE(RunLoad(&loop, &t, o).ok());
}

TEST(WindowsStable, BothThroughputAndP99MustAgree) {
  std::vector<WindowStats> w = {{100, 0, 100, 10}, {100, 0, 105, 10.5}, {100, 0, 96, 9.6}};
  EXPECT_TRUE(WindowsStable(w, 3, 0.10));
  w[1].p99_ms = 20;
  EXPECT_FALSE(WindowsStable(w, 3, 0.10));
  w[1].p99_ms = 10;
  w[2].throughput = 70;
  EXPECT_FALSE(WindowsStable(w, 3, 0.10));
  EXPECT_FALSE(WindowsStable(w, 4, 0.10));  // not enough windows
}

}  // namespace
}  // namespace tide::loadgen
