#include "metrics/registry.h"

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tide::metrics {
namespace {

using ::testing::HasSubstr;

TEST(RegistryTest, RendersExactTextForSmallRegistry) {
  Registry registry;
  auto requests = registry.AddCounter("tide_requests_total", "Requests answered.",
                                      {"model", "endpoint", "code"});
  ASSERT_TRUE(requests.ok()) << requests.status();
  auto queue = registry.AddGauge("tide_queue_size", "Requests waiting.\nPer model \\ total.");
  ASSERT_TRUE(queue.ok());
  auto latency = registry.AddHistogram("tide_request_duration_seconds", "Latency.", {"model"},
                                       {0.005, 0.1, 1});
  ASSERT_TRUE(latency.ok());

  (*requests)->WithLabels({"minilm", "rerank", "200"})->Increment();
  (*requests)->WithLabels({"minilm", "rerank", "200"})->Increment(2);
  (*requests)->WithLabels({"bge", "rerank", "429"})->Increment();
  (*queue)->WithLabels({})->Set(7);
  Histogram* minilm = (*latency)->WithLabels({"min\"i\\lm\n"});
  minilm->Observe(0.001);
  minilm->Observe(0.005);  // on the bound: counts in le="0.005"
  minilm->Observe(0.25);
  minilm->Observe(30);

  EXPECT_EQ(registry.RenderText(),
            "# HELP tide_requests_total Requests answered.\n"
            "# TYPE tide_requests_total counter\n"
            "tide_requests_total{model=\"bge\",endpoint=\"rerank\",code=\"429\"} 1\n"
            "tide_requests_total{model=\"minilm\",endpoint=\"rerank\",code=\"200\"} 3\n"
            "# HELP tide_queue_size Requests waiting.\\nPer model \\\\ total.\n"
            "# TYPE tide_queue_size gauge\n"
            "tide_queue_size 7\n"
            "# HELP tide_request_duration_seconds Latency.\n"
            "# TYPE tide_request_duration_seconds histogram\n"
            "tide_request_duration_seconds_bucket{model=\"min\\\"i\\\\lm\\n\",le=\"0.005\"} 2\n"
            "tide_request_duration_seconds_bucket{model=\"min\\\"i\\\\lm\\n\",le=\"0.1\"} 2\n"
            "tide_request_duration_seconds_bucket{model=\"min\\\"i\\\\lm\\n\",le=\"1\"} 3\n"
            "tide_request_duration_seconds_bucket{model=\"min\\\"i\\\\lm\\n\",le=\"+Inf\"} 4\n"
            "tide_request_duration_seconds_sum{model=\"min\\\"i\\\\lm\\n\"} 30.256\n"
            "tide_request_duration_seconds_count{model=\"min\\\"i\\\\lm\\n\"} 4\n");
}

TEST(RegistryTest, LabelLessFamilyRendersZeroAndLabelledEmptyFamilyIsOmitted) {
  Registry registry;
  ASSERT_TRUE(registry.AddCounter("a_total", "A.").ok());
  ASSERT_TRUE(registry.AddCounter("b_total", "B.", {"model"}).ok());
  EXPECT_EQ(registry.RenderText(), "# HELP a_total A.\n# TYPE a_total counter\na_total 0\n");
}

TEST(RegistryTest, WithLabelsReturnsStablePointers) {
  Registry registry;
  auto family = registry.AddGauge("g", "G.", {"k"});
  ASSERT_TRUE(family.ok());
  Gauge* first = (*family)->WithLabels({"x"});
  for (int i = 0; i < 100; ++i) (*family)->WithLabels({"y" + std::to_string(i)});
  EXPECT_EQ((*family)->WithLabels({"x"}), first);
  const std::vector<std::string> as_vector = {"x"};
  EXPECT_EQ((*family)->WithLabels(as_vector), first);
  const std::string as_string = "x";
  EXPECT_EQ((*family)->WithLabels({as_string}), first);
  EXPECT_NE((*family)->WithLabels({"x "}), first);
  first->Increment(5);
  first->Decrement(2);
  EXPECT_DOUBLE_EQ(first->Value(), 3);
}

TEST(RegistryTest, RejectsInvalidDefinitions) {
  Registry registry;
  EXPECT_EQ(registry.AddCounter("1bad", "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddCounter("bad-name", "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddCounter("ok", "", {"__reserved"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddCounter("ok", "", {"a", "a"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddHistogram("h", "", {"le"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddHistogram("h", "", {}, {1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddHistogram("h", "", {}, {2, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(registry.AddCounter("ok", "").ok());
  EXPECT_EQ(registry.AddGauge("ok", "").status().code(), absl::StatusCode::kAlreadyExists);
}

TEST(RegistryTest, TryWithLabelsChecksArity) {
  Registry registry;
  auto family = registry.AddCounter("c_total", "C.", {"a", "b"});
  ASSERT_TRUE(family.ok());
  EXPECT_EQ((*family)->TryWithLabels({"x"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*family)->TryWithLabels({"x", "y"}).ok());
  EXPECT_EQ((*family)->TryWithLabels(std::vector<std::string>{"x", "y", "z"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RegistryDeathTest, WithLabelsAbortsOnWrongArity) {
  Registry registry;
  auto family = registry.AddCounter("c_total", "C.", {"a"});
  ASSERT_TRUE(family.ok());
  EXPECT_DEATH((*family)->WithLabels({"x", "y"}), "takes 1 label values, got 2");
}

TEST(CounterTest, IgnoresNegativeAndNaN) {
  Counter counter;
  counter.Increment(2);
  counter.Increment(-1);
  counter.Increment(std::nan(""));
  EXPECT_DOUBLE_EQ(counter.Value(), 2);
}

TEST(HistogramTest, DefaultLatencyBucketsSpanTenthOfMillisecondToTenSeconds) {
  const std::vector<double> bounds = DefaultLatencyBuckets();
  ASSERT_FALSE(bounds.empty());
  EXPECT_DOUBLE_EQ(bounds.front(), 0.0001);
  EXPECT_DOUBLE_EQ(bounds.back(), 10.0);
  for (size_t i = 1; i < bounds.size(); ++i) EXPECT_GT(bounds[i], bounds[i - 1]);
}

TEST(HistogramTest, ExponentialBuckets) {
  EXPECT_EQ(ExponentialBuckets(1, 2, 4), (std::vector<double>{1, 2, 4, 8}));
  EXPECT_TRUE(ExponentialBuckets(0, 2, 4).empty());
}

TEST(HistogramTest, ConcurrentObservationsAreAllCounted) {
  Registry registry;
  auto family = registry.AddHistogram("h_seconds", "H.", {"t"}, {1, 2});
  auto counter = registry.AddCounter("c_total", "C.", {"t"});
  ASSERT_TRUE(family.ok() && counter.ok());
  constexpr int kThreads = 8;
  constexpr int kPerThread = 10000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Histogram* h = (*family)->WithLabels({"shared"});
      Counter* c = (*counter)->WithLabels({t % 2 ? "odd" : "even"});
      for (int i = 0; i < kPerThread; ++i) {
        h->Observe(i % 3);  // 0, 1, 2: all within bounds
        c->Increment();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const Histogram::Snapshot snapshot = (*family)->WithLabels({"shared"})->TakeSnapshot();
  EXPECT_EQ(snapshot.count, uint64_t{kThreads * kPerThread});
  EXPECT_EQ(snapshot.cumulative_counts[1], snapshot.count);  // le="2" holds everything
  EXPECT_DOUBLE_EQ((*counter)->WithLabels({"odd"})->Value() + (*counter)->WithLabels({"even"})->Value(),
                   kThreads * kPerThread);
  EXPECT_THAT(registry.RenderText(), HasSubstr("h_seconds_count{t=\"shared\"} 80000\n"));
}

TEST(FormatTest, SampleValues) {
  EXPECT_EQ(FormatSampleValue(0), "0");
  EXPECT_EQ(FormatSampleValue(3), "3");
  EXPECT_EQ(FormatSampleValue(0.25), "0.25");
  EXPECT_EQ(FormatSampleValue(0.0001), "0.0001");
  EXPECT_EQ(FormatSampleValue(1e-7), "1e-07");
  EXPECT_EQ(FormatSampleValue(-2.5), "-2.5");
  EXPECT_EQ(FormatSampleValue(1.0 / 0.0), "+Inf");
  EXPECT_EQ(FormatSampleValue(-1.0 / 0.0), "-Inf");
  EXPECT_EQ(FormatSampleValue(std::nan("")), "NaN");
}

}  // namespace
}  // namespace tide::metrics

namespace tide::metrics {
namespace {

TEST(RegistryOpenMetrics, CountersDropTotalInMetadataAndBucketsCarryTheirLatestExemplar) {
  Registry registry;
  auto* requests = *registry.AddCounter("tide_requests_total", "Requests \"answered\"", {"code"});
  requests->WithLabels({"200"})->Increment(3);
  auto* latency = *registry.AddHistogram("tide_latency_seconds", "Latency", {}, {0.1, 1.0});
  Histogram* h = latency->WithLabels({});
  h->Observe(0.05);
  h->ObserveWithExemplar(0.5, "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
  h->ObserveWithExemplar(0.7, "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
  const std::string text = registry.RenderOpenMetrics();
  EXPECT_NE(text.find("# TYPE tide_requests counter\n# HELP tide_requests Requests \\\"answered\\\"\n"
                      "tide_requests_total{code=\"200\"} 3\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tide_latency_seconds_bucket{le=\"0.1\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tide_latency_seconds_bucket{le=\"1\"} 3 # {trace_id=\"4bf92f3577b34da6a3ce929d0e0e4736\","
                      "span_id=\"00f067aa0ba902b7\"} 0.7 "),
            std::string::npos)
      << "the latest exemplar of the bucket: " << text;
  EXPECT_EQ(text.find("0af7651916cd43dd8448eb211c80319c"), std::string::npos);
  EXPECT_EQ(text.substr(text.size() - 6), "# EOF\n");
  // The Prometheus text is unchanged: no exemplars there.
  const std::string plain = registry.RenderText();
  EXPECT_EQ(plain.find("trace_id"), std::string::npos);
  EXPECT_NE(plain.find("# TYPE tide_requests_total counter"), std::string::npos);
  EXPECT_TRUE(AcceptsOpenMetrics("application/openmetrics-text; version=1.0.0,text/plain;q=0.5"));
  EXPECT_FALSE(AcceptsOpenMetrics("text/plain"));
}

}  // namespace
}  // namespace tide::metrics
