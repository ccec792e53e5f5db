#include "serving/access_log.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "serving/serving_metrics.h"

namespace tide::serving {
namespace {

using ::testing::ElementsAre;

// Records what the writer hands it; optionally holds the writer inside Write until released, and
// fails writes on demand.
class FakeSink : public AccessLogSink {
 public:
  absl::Status Write(std::string_view lines) override {
    if (block_ && !blocked_once_) {  // the first write only: the writer is then stuck in it
      blocked_once_ = true;
      entered_.Notify();
      release_.WaitForNotification();
    }
    absl::MutexLock lock(&mu_);
    ++writes_;
    if (fail_) return absl::UnavailableError("disk full");
    text_.append(lines);
    return absl::OkStatus();
  }
  absl::Status Reopen() override {
    absl::MutexLock lock(&mu_);
    text_ += "<reopened>\n";
    ++reopens_;
    return absl::OkStatus();
  }
  std::vector<std::string> Lines() {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t nl; (nl = text_.find('\n', start)) != std::string::npos; start = nl + 1) {
      out.push_back(text_.substr(start, nl - start));
    }
    return out;
  }
  int reopens() {
    absl::MutexLock lock(&mu_);
    return reopens_;
  }
  void set_fail(bool fail) {
    absl::MutexLock lock(&mu_);
    fail_ = fail;
  }

  bool block_ = false;  // set before the log is created
  bool blocked_once_ = false;  // the writer thread's only
  absl::Notification entered_, release_;

 private:
  absl::Mutex mu_;
  std::string text_;
  int writes_ = 0;
  int reopens_ = 0;
  bool fail_ = false;
};

AccessRecord Record(std::string id) {
  AccessRecord r;
  r.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(1764590400123));  // 2025-12-01T12:00:00.123Z
  r.route = "rerank";
  r.request_id = std::move(id);
  return r;
}

TEST(AccessLogFormat, OneJsonObjectWithEveryFieldInOrder) {
  AccessRecord r = Record("req-1");
  r.protocol = "grpc";
  r.model = "minilm";
  r.version = "2";
  r.status = 429;
  r.error_type = "overloaded";
  r.key = "tenant-a";
  r.pairs = 16;
  r.cache_hits = 5;
  r.degraded = true;
  r.queue_ms = 1.25;
  r.inference_ms = 3.5;
  r.total_ms = 7.0004;
  EXPECT_EQ(FormatAccessRecord(r),
            R"({"time":"2025-12-01T12:00:00.123Z","protocol":"grpc","route":"rerank","model":"minilm","version":"2",)"
            R"("status":429,"error_type":"overloaded","key":"tenant-a","pairs":16,"cache_hits":5,"degraded":true,)"
            R"("queue_ms":1.25,"inference_ms":3.5,"total_ms":7.0,"request_id":"req-1"})");
}

TEST(AccessLogFormat, UnknownTimingsAreNullAndClientStringsCannotBreakTheLine) {
  AccessRecord r = Record("evil\"}\n{\"status\":200 \xff");
  const std::string line = FormatAccessRecord(r);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  auto j = nlohmann::json::parse(line);
  EXPECT_TRUE(j["queue_ms"].is_null());
  EXPECT_TRUE(j["inference_ms"].is_null());
  EXPECT_EQ(j["status"], 0);
  EXPECT_EQ(j["request_id"].get<std::string>().substr(0, 16), "evil\"}\n{\"status\"");
  // Terminal escapes and carriage returns in a model name or request id are JSON escapes too.
  AccessRecord ansi = Record("id\r\x1b[2J");
  ansi.model = "m\x1b[31m\n";
  const std::string ansi_line = FormatAccessRecord(ansi);
  for (char c : ansi_line) EXPECT_GE(static_cast<unsigned char>(c), 0x20) << ansi_line;
  EXPECT_NE(ansi_line.find(R"("model":"m\u001b[31m\n")"), std::string::npos) << ansi_line;
  EXPECT_NE(ansi_line.find(R"("request_id":"id\r\u001b[2J")"), std::string::npos) << ansi_line;
}

TEST(AccessLog, WritesEveryRecordInOrder) {
  auto sink = std::make_unique<FakeSink>();
  FakeSink* fake = sink.get();
  auto log = AccessLog::Create(std::move(sink), {});
  ASSERT_TRUE(log.ok()) << log.status();
  for (int i = 0; i < 100; ++i) (*log)->Log(Record("r" + std::to_string(i)));
  (*log)->Flush();
  std::vector<std::string> lines = fake->Lines();
  ASSERT_EQ(lines.size(), 100u);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(nlohmann::json::parse(lines[i])["request_id"], "r" + std::to_string(i));
  }
  EXPECT_EQ((*log)->dropped(), 0u);
}

// A writer stuck in its sink never blocks Log: past max_pending, records are dropped and counted.
TEST(AccessLog, AFullQueueDropsAndCountsInsteadOfBlocking) {
  auto metrics = ServingMetrics::Create();
  ASSERT_TRUE(metrics.ok());
  metrics::Counter* dropped = (*metrics)->access_log_dropped->WithLabels({});
  auto sink = std::make_unique<FakeSink>();
  FakeSink* fake = sink.get();
  fake->block_ = true;
  AccessLogOptions o;
  o.max_pending = 4;
  o.dropped = dropped;
  auto log = AccessLog::Create(std::move(sink), o);
  ASSERT_TRUE(log.ok());
  (*log)->Log(Record("first"));
  fake->entered_.WaitForNotification();  // the writer holds "first" inside Write
  for (int i = 0; i < 10; ++i) (*log)->Log(Record("q" + std::to_string(i)));  // returns at once
  EXPECT_EQ((*log)->dropped(), 6u);  // 4 queued, 6 dropped
  EXPECT_EQ(dropped->Value(), 6);
  fake->release_.Notify();
  (*log)->Flush();
  std::vector<std::string> ids;
  for (const std::string& line : fake->Lines()) ids.push_back(nlohmann::json::parse(line)["request_id"]);
  EXPECT_THAT(ids, ElementsAre("first", "q0", "q1", "q2", "q3"));
}

TEST(AccessLog, ReopenReopensTheSinkBeforeTheNextWrite) {
  auto sink = std::make_unique<FakeSink>();
  FakeSink* fake = sink.get();
  auto log = AccessLog::Create(std::move(sink), {});
  ASSERT_TRUE(log.ok());
  (*log)->Log(Record("before"));
  (*log)->Flush();
  (*log)->Reopen();
  (*log)->Log(Record("after"));
  (*log)->Flush();
  std::vector<std::string> lines = fake->Lines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(nlohmann::json::parse(lines[0])["request_id"], "before");
  EXPECT_EQ(lines[1], "<reopened>");
  EXPECT_EQ(nlohmann::json::parse(lines[2])["request_id"], "after");
  EXPECT_EQ(fake->reopens(), 1);
}

TEST(AccessLog, AFailedWriteCountsItsRecordsAsDropped) {
  auto sink = std::make_unique<FakeSink>();
  FakeSink* fake = sink.get();
  auto log = AccessLog::Create(std::move(sink), {});
  ASSERT_TRUE(log.ok());
  fake->set_fail(true);
  (*log)->Log(Record("lost"));
  (*log)->Flush();
  EXPECT_EQ((*log)->dropped(), 1u);
  fake->set_fail(false);
  (*log)->Log(Record("kept"));
  (*log)->Flush();
  ASSERT_EQ(fake->Lines().size(), 1u);
  EXPECT_EQ((*log)->dropped(), 1u);
}

// Writes into a buffer that outlives the log (the log owns its sink).
class SharedSink : public AccessLogSink {
 public:
  explicit SharedSink(std::shared_ptr<std::string> out) : out_(std::move(out)) {}
  absl::Status Write(std::string_view lines) override {
    out_->append(lines);
    return absl::OkStatus();
  }
  absl::Status Reopen() override { return absl::OkStatus(); }

 private:
  std::shared_ptr<std::string> out_;
};

TEST(AccessLog, TheDestructorWritesWhatIsQueued) {
  auto out = std::make_shared<std::string>();
  {
    auto log = AccessLog::Create(std::make_unique<SharedSink>(out), {});
    ASSERT_TRUE(log.ok());
    for (int i = 0; i < 10; ++i) (*log)->Log(Record("x"));
  }
  EXPECT_EQ(std::count(out->begin(), out->end(), '\n'), 10);
}

TEST(FileAccessLogSink, AppendsAndReopensAfterARename) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/tide_access_log_test.log";
  std::remove(path.c_str());
  std::remove((path + ".1").c_str());
  auto sink = FileAccessLogSink::Open(path);
  ASSERT_TRUE(sink.ok()) << sink.status();
  ASSERT_TRUE((*sink)->Write("one\n").ok());
  ASSERT_EQ(std::rename(path.c_str(), (path + ".1").c_str()), 0);  // logrotate
  ASSERT_TRUE((*sink)->Write("two\n").ok());                        // still the renamed file
  ASSERT_TRUE((*sink)->Reopen().ok());
  ASSERT_TRUE((*sink)->Write("three\n").ok());
  auto read = [](const std::string& p) {
    std::string out;
    if (FILE* f = std::fopen(p.c_str(), "r")) {
      char buf[256];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
      std::fclose(f);
    }
    return out;
  };
  EXPECT_EQ(read(path + ".1"), "one\ntwo\n");
  EXPECT_EQ(read(path), "three\n");
  EXPECT_FALSE(FileAccessLogSink::Open(dir + "/no/such/dir/x.log").ok());
}

}  // namespace
}  // namespace tide::serving
