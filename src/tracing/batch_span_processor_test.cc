#include "tracing/batch_span_processor.h"

#include <deque>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "wait_for.h"

namespace tide::tracing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using tide::test_support::WaitFor;

constexpr seconds kHang{20};

// A fake exporter: answers from a script (then ok), records each call's batch size, the fake time
// and the timeout it was given; can be held inside Export until released.
class FakeExporter final : public SpanExporter {
 public:
  struct Call {
    size_t spans;
    Clock::time_point at;
    milliseconds timeout;
  };
  explicit FakeExporter(Clock* clock) : clock_(clock) {}

  ExportResult Export(const std::vector<SpanData>& spans, milliseconds timeout) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back(Call{spans.size(), clock_->Now(), timeout});
    mu_.Await(absl::Condition(+[](bool* held) { return !*held; }, &held_));
    if (script_.empty()) return ExportResult::Ok();
    ExportResult result = script_.front();
    script_.pop_front();
    return result;
  }
  void Script(std::vector<ExportResult> results) {
    absl::MutexLock lock(&mu_);
    for (auto& r : results) script_.push_back(std::move(r));
  }
  void Hold(bool held) {
    absl::MutexLock lock(&mu_);
    held_ = held;
  }
  std::vector<Call> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  size_t call_count() const { return calls().size(); }

 private:
  Clock* clock_;
  mutable absl::Mutex mu_;
  std::deque<ExportResult> script_;
  std::vector<Call> calls_;
  bool held_ = false;
};

template <typename F>
BatchSpanProcessorOptions With(F set) {
  BatchSpanProcessorOptions options;
  set(options);
  return options;
}

SpanData Named(int i) {
  SpanData span;
  span.name = "span" + std::to_string(i);
  return span;
}

class BatchSpanProcessorTest : public ::testing::Test {
 protected:
  void Start(BatchSpanProcessorOptions options) {
    auto exporter = std::make_unique<FakeExporter>(&clock_);
    exporter_ = exporter.get();
    processor_ = std::make_unique<BatchSpanProcessor>(options, std::move(exporter), &clock_);
  }
  Clock::time_point Later() { return clock_.Now() + seconds(3600); }

  FakeClock clock_;
  FakeExporter* exporter_ = nullptr;
  std::unique_ptr<BatchSpanProcessor> processor_;
};

TEST_F(BatchSpanProcessorTest, AFullBatchIsExportedWithoutWaitingForTheDelay) {
  Start(With([](BatchSpanProcessorOptions& o) { o.max_queue_size = 8; o.max_export_batch_size = 4; }));
  for (int i = 0; i < 4; ++i) processor_->OnEnd(Named(i));
  ASSERT_TRUE(WaitFor([&] { return processor_->counters().exported_spans == 4; }, kHang, "a batch of 4"));
  EXPECT_EQ(exporter_->calls().at(0).spans, 4u);
}

TEST_F(BatchSpanProcessorTest, ASmallBatchWaitsForTheScheduleDelay) {
  Start(With([](BatchSpanProcessorOptions& o) { o.schedule_delay = milliseconds(5000); }));
  processor_->OnEnd(Named(0));
  clock_.Advance(milliseconds(4000));
  EXPECT_EQ(processor_->counters().exported_spans, 0u);
  // The fake clock wakes the thread at 5 s; step until it has.
  ASSERT_TRUE(WaitFor([&] {
    clock_.Advance(milliseconds(500));
    return processor_->counters().exported_spans == 1;
  }, kHang, "the scheduled export"));
}

TEST_F(BatchSpanProcessorTest, AZeroScheduleDelayExportsEachSpanAtOnce) {
  Start(With([](BatchSpanProcessorOptions& o) { o.schedule_delay = milliseconds(0); }));
  processor_->OnEnd(Named(0));
  ASSERT_TRUE(WaitFor([&] { return processor_->counters().exported_spans == 1; }, kHang, "the first span"));
  processor_->OnEnd(Named(1));  // after an idle spell
  ASSERT_TRUE(WaitFor([&] { return processor_->counters().exported_spans == 2; }, kHang, "the second span"));
}

TEST_F(BatchSpanProcessorTest, AFullQueueDropsAndCountsWithoutBlocking) {
  Start(With([](BatchSpanProcessorOptions& o) { o.max_queue_size = 4; o.max_export_batch_size = 2; }));
  exporter_->Hold(true);
  processor_->OnEnd(Named(0));
  processor_->OnEnd(Named(1));
  // The thread takes the first batch and is held inside Export.
  ASSERT_TRUE(WaitFor([&] { return exporter_->call_count() == 1; }, kHang, "the first export"));
  // The queue refills to 4; everything past that is dropped, and OnEnd returns although the
  // exporter is stuck.
  for (int i = 2; i < 12; ++i) processor_->OnEnd(Named(i));
  EXPECT_EQ(processor_->queued(), 4u);
  EXPECT_EQ(processor_->counters().dropped_queue_full, 6u);
  exporter_->Hold(false);
  ASSERT_TRUE(processor_->ForceFlush(Later()));
  EXPECT_EQ(processor_->counters().exported_spans, 6u);
  EXPECT_EQ(processor_->counters().dropped_queue_full, 6u);
}

TEST_F(BatchSpanProcessorTest, ForceFlushExportsEverythingAcceptedBeforeIt) {
  Start(With([](BatchSpanProcessorOptions& o) { o.max_export_batch_size = 3; }));
  for (int i = 0; i < 7; ++i) processor_->OnEnd(Named(i));
  ASSERT_TRUE(processor_->ForceFlush(Later()));
  EXPECT_EQ(processor_->counters().exported_spans, 7u);
  size_t total = 0;
  for (const FakeExporter::Call& call : exporter_->calls()) {
    EXPECT_LE(call.spans, 3u);
    total += call.spans;
  }
  EXPECT_EQ(total, 7u);
  EXPECT_TRUE(processor_->ForceFlush(Later()));  // nothing left: at once
}

TEST_F(BatchSpanProcessorTest, ForceFlushGivesUpAtItsDeadline) {
  Start({});
  exporter_->Hold(true);
  processor_->OnEnd(Named(0));
  EXPECT_FALSE(processor_->ForceFlush(clock_.Now()));
  exporter_->Hold(false);
  EXPECT_TRUE(processor_->ForceFlush(Later()));
}

TEST_F(BatchSpanProcessorTest, ShutdownExportsWhatIsQueuedThenRefusesSpans) {
  Start(With([](BatchSpanProcessorOptions& o) { o.max_export_batch_size = 512; }));
  for (int i = 0; i < 5; ++i) processor_->OnEnd(Named(i));
  EXPECT_TRUE(processor_->Shutdown(Later()));
  EXPECT_EQ(processor_->counters().exported_spans, 5u);
  processor_->OnEnd(Named(5));
  EXPECT_EQ(processor_->counters().dropped_queue_full, 1u);
  EXPECT_TRUE(processor_->Shutdown(Later()));  // idempotent
}

TEST_F(BatchSpanProcessorTest, RetryableFailuresAreRetriedWithExponentialBackoff) {
  Start(With([](BatchSpanProcessorOptions& o) {
    o.initial_backoff = milliseconds(1000);
    o.max_backoff = milliseconds(2000);
  }));
  exporter_->Script({ExportResult::Retryable("503"), ExportResult::Retryable("503"),
                     ExportResult::Retryable("503")});
  processor_->OnEnd(Named(0));
  processor_->ForceFlush(clock_.Now());  // start the export now; do not wait
  // Step the fake clock 50 ms at a time; each retry happens once its backoff has passed.
  ASSERT_TRUE(WaitFor([&] {
    if (processor_->counters().exported_spans == 1) return true;
    if (exporter_->call_count() > 0) clock_.Advance(milliseconds(50));
    return false;
  }, kHang, "the fourth attempt to succeed"));
  const std::vector<FakeExporter::Call> calls = exporter_->calls();
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(processor_->counters().retries, 3u);
  EXPECT_EQ(processor_->counters().failed_exports, 0u);
  // Backoff n is initial * 2^n, at most max_backoff, scaled into [0.8, 1.2). The gap is observed on
  // the fake clock, which this thread steps by 50 ms while the exporter thread runs: allow a few
  // steps of slack above (steps that may land between a failed attempt and the processor reading
  // the clock), none below.
  const double base[] = {1000, 2000, 2000};
  for (int i = 0; i < 3; ++i) {
    const double gap = std::chrono::duration<double, std::milli>(calls[i + 1].at - calls[i].at).count();
    EXPECT_GE(gap, 0.8 * base[i]) << "retry " << i;
    EXPECT_LT(gap, 1.2 * base[i] + 250) << "retry " << i;
  }
  // Each attempt gets the time left of the export timeout (30 s) as its timeout, at most 10 s.
  EXPECT_EQ(calls[0].timeout, milliseconds(10000));
}

TEST_F(BatchSpanProcessorTest, RetryAfterFromTheReceiverIsUsed) {
  Start({});
  exporter_->Script({ExportResult::Retryable("429", milliseconds(3000))});
  processor_->OnEnd(Named(0));
  processor_->ForceFlush(clock_.Now());
  ASSERT_TRUE(WaitFor([&] {
    if (processor_->counters().exported_spans == 1) return true;
    if (exporter_->call_count() > 0) clock_.Advance(milliseconds(100));
    return false;
  }, kHang, "the retry after 3 s"));
  const std::vector<FakeExporter::Call> calls = exporter_->calls();
  ASSERT_EQ(calls.size(), 2u);
  const auto gap = std::chrono::duration_cast<milliseconds>(calls[1].at - calls[0].at);
  EXPECT_GE(gap, milliseconds(3000));
  EXPECT_LT(gap, milliseconds(3000 + 500));  // a few 100 ms steps of slack, as above
}

TEST_F(BatchSpanProcessorTest, RetriesStopAtTheExportTimeoutAndTheFailureIsCounted) {
  Start(With([](BatchSpanProcessorOptions& o) {
    o.export_timeout = milliseconds(3000);
    o.initial_backoff = milliseconds(1000);
  }));
  std::vector<ExportResult> failures(20, ExportResult::Retryable("unavailable"));
  exporter_->Script(failures);
  processor_->OnEnd(Named(0));
  processor_->OnEnd(Named(1));
  processor_->ForceFlush(clock_.Now());
  ASSERT_TRUE(WaitFor([&] {
    if (processor_->counters().failed_exports == 1) return true;
    if (exporter_->call_count() > 0) clock_.Advance(milliseconds(50));
    return false;
  }, kHang, "the export to be given up"));
  const BatchSpanProcessorCounters c = processor_->counters();
  EXPECT_EQ(c.failed_spans, 2u);
  EXPECT_EQ(c.exported_spans, 0u);
  // 1 s then 2 s of backoff fit in 3 s only without the second: 2 or 3 attempts, never more.
  EXPECT_GE(exporter_->call_count(), 2u);
  EXPECT_LE(exporter_->call_count(), 3u);
  for (const FakeExporter::Call& call : exporter_->calls()) EXPECT_LE(call.timeout, milliseconds(3000));
}

TEST_F(BatchSpanProcessorTest, APermanentFailureIsNotRetried) {
  Start({});
  exporter_->Script({ExportResult::Failed("400 bad request")});
  processor_->OnEnd(Named(0));
  ASSERT_TRUE(processor_->ForceFlush(Later()));
  EXPECT_EQ(exporter_->call_count(), 1u);
  EXPECT_EQ(processor_->counters().failed_exports, 1u);
  EXPECT_EQ(processor_->counters().retries, 0u);
  EXPECT_EQ(processor_->last_error(), "400 bad request");
}

TEST_F(BatchSpanProcessorTest, ShutdownAtItsDeadlineAbandonsRetriesAndCountsWhatIsLeft) {
  Start(With([](BatchSpanProcessorOptions& o) { o.max_export_batch_size = 1; }));
  std::vector<ExportResult> failures(20, ExportResult::Retryable("unavailable"));
  exporter_->Script(failures);
  processor_->OnEnd(Named(0));
  processor_->OnEnd(Named(1));
  processor_->ForceFlush(clock_.Now());
  ASSERT_TRUE(WaitFor([&] { return exporter_->call_count() >= 1; }, kHang, "the first attempt"));
  // The thread is in its backoff; a shutdown with no time left ends it.
  EXPECT_FALSE(processor_->Shutdown(clock_.Now()));
  const BatchSpanProcessorCounters c = processor_->counters();
  EXPECT_EQ(c.exported_spans, 0u);
  EXPECT_EQ(c.failed_spans, 2u);
}

}  // namespace
}  // namespace tide::tracing
