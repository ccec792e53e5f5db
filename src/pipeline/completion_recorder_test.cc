// CompletionRecorder: the metrics and the access-log record of a finished request come from its
// domain outcome (the error's kind, the version, the degraded flag), for either protocol.
#include "pipeline/completion_recorder.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/error.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "serving/fallback.h"
#include "serving/scoring.h"

namespace tide::pipeline {
namespace {

class MemorySink : public serving::AccessLogSink {
 public:
  absl::Status Write(std::string_view lines) override {
    absl::MutexLock lock(&mu_);
    text_.append(lines);
    return absl::OkStatus();
  }
  absl::Status Reopen() override { return absl::OkStatus(); }
  std::vector<nlohmann::json> Records() {
    absl::MutexLock lock(&mu_);
    std::vector<nlohmann::json> out;
    size_t begin = 0;
    for (size_t end; (end = text_.find('\n', begin)) != std::string::npos; begin = end + 1) {
      out.push_back(nlohmann::json::parse(text_.substr(begin, end - begin)));
    }
    return out;
  }

 private:
  absl::Mutex mu_;
  std::string text_;
};

struct Fixture {
  Fixture() {
    auto m = serving::ServingMetrics::Create();
    EXPECT_TRUE(m.ok());
    metrics = *std::move(m);
    auto s = std::make_unique<MemorySink>();
    sink = s.get();
    auto l = serving::AccessLog::Create(std::move(s), {});
    EXPECT_TRUE(l.ok());
    log = *std::move(l);
  }
  double Requests(const std::string& model, const std::string& version, const std::string& endpoint,
                  const std::string& status, const std::string& protocol) {
    return metrics->requests->WithLabels({model, version, endpoint, status, protocol})->Value();
  }
  std::unique_ptr<serving::ServingMetrics> metrics;
  MemorySink* sink = nullptr;
  std::unique_ptr<serving::AccessLog> log;
};

TEST(CompletionRecorder, AnErrorIsRecordedWithItsKindsStatusAndTypeOnEitherProtocol) {
  Fixture f;
  CompletionRecorder recorder(f.metrics.get(), f.log.get());
  ASSERT_TRUE(recorder.logs());
  Outcome outcome;
  outcome.status = errors::InvalidInput("field 'query' must not be empty");
  outcome.set_model("m", 3);
  for (const char* protocol : {"http", "grpc"}) {
    Completion c;
    c.protocol = protocol;
    c.endpoint = "rerank";
    c.received_at = Steady::now();
    c.outcome = &outcome;
    c.ok_status = 200;  // ignored for an error: the kind decides
    c.request_id = "r-1";
    recorder.Record(c);
  }
  EXPECT_EQ(f.Requests("m", "3", "rerank", "422", "http"), 1);
  EXPECT_EQ(f.Requests("m", "3", "rerank", "422", "grpc"), 1);
  f.log->Flush();
  const std::vector<nlohmann::json> records = f.sink->Records();
  ASSERT_EQ(records.size(), 2u);
  for (const nlohmann::json& r : records) {
    EXPECT_EQ(r["status"], 422);
    EXPECT_EQ(r["error_type"], "validation");
    EXPECT_EQ(r["model"], "m");
    EXPECT_EQ(r["version"], "3");
    EXPECT_EQ(r["degraded"], false);
    EXPECT_EQ(r["request_id"], "r-1");
    EXPECT_TRUE(r["queue_ms"].is_null());
  }
  EXPECT_EQ(records[0]["protocol"], "http");
  EXPECT_EQ(records[1]["protocol"], "grpc");
}

TEST(CompletionRecorder, DegradedComesFromTheOutcomeAndTimingsGoToTheStageHistograms) {
  Fixture f;
  CompletionRecorder recorder(f.metrics.get(), f.log.get());
  // A fallback's answer: OK and degraded, without timings.
  Outcome fallback;
  fallback.set_model("m", 1);
  fallback.fallback = serving::kFallbackBm25;
  // No fallback while the breaker is open: an error, degraded too.
  Outcome unavailable;
  unavailable.status = serving::DegradedUnavailableError("m");
  // A model's answer with its timings.
  Outcome model;
  model.set_model("m", 1);
  model.timings = serving::StageTimings{};
  model.timings->queue = std::chrono::milliseconds(7);
  model.post = Steady::now();
  const Steady::time_point received = Steady::now();
  for (Outcome* o : {&fallback, &unavailable, &model}) {
    Completion c;
    c.endpoint = "rerank";
    c.received_at = received;
    c.outcome = o;
    c.timings = o->Complete(received);
    recorder.Record(c);
  }
  EXPECT_EQ(model.Complete(received), &*model.timings);  // completed once
  EXPECT_EQ(f.metrics->stage_duration->WithLabels({"m", "1", "queue"})->TakeSnapshot().count, 1u);
  f.log->Flush();
  const std::vector<nlohmann::json> records = f.sink->Records();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0]["degraded"], true);
  EXPECT_EQ(records[0]["status"], 200);
  EXPECT_TRUE(records[0]["queue_ms"].is_null());
  EXPECT_EQ(records[1]["degraded"], true);
  EXPECT_EQ(records[1]["status"], 503);
  EXPECT_EQ(records[2]["degraded"], false);
  EXPECT_DOUBLE_EQ(records[2]["queue_ms"].get<double>(), 7.0);
}

TEST(CompletionRecorder, ASuccessMayCarryTheEdgesStatusAndARefusalNamesItsKey) {
  Fixture f;
  CompletionRecorder recorder(f.metrics.get(), nullptr);
  EXPECT_FALSE(recorder.logs());
  Outcome not_ready;
  Completion c;
  c.endpoint = "health_ready";
  c.outcome = &not_ready;
  c.ok_status = 503;
  EXPECT_EQ(CompletionRecorder::StatusOf(c), 503);
  recorder.Record(c);
  EXPECT_EQ(f.Requests("", "", "health_ready", "503", "http"), 1);

  CompletionRecorder logged(nullptr, f.log.get());
  Outcome refused;
  refused.status = WithKeyName(errors::Overloaded("key 'team-a' is over its requests_per_second quota"), "team-a");
  Completion r;
  r.protocol = "grpc";
  r.endpoint = "infer";
  r.outcome = &refused;
  logged.Record(r);
  f.log->Flush();
  const std::vector<nlohmann::json> records = f.sink->Records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["status"], 429);
  EXPECT_EQ(records[0]["error_type"], "overloaded");
  EXPECT_EQ(records[0]["key"], "team-a");
}

}  // namespace
}  // namespace tide::pipeline
