#include "tracing/tracer.h"

#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "tracing/trace_context.h"

namespace tide::tracing {
namespace {

class CollectingProcessor final : public SpanProcessor {
 public:
  void OnEnd(SpanData span) override {
    absl::MutexLock lock(&mu_);
    spans_.push_back(std::move(span));
  }
  std::vector<SpanData> spans() const {
    absl::MutexLock lock(&mu_);
    return spans_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<SpanData> spans_;
};

StartSpanOptions Kind(SpanKind kind) {
  StartSpanOptions options;
  options.kind = kind;
  return options;
}

StartSpanOptions ChildOf(const SpanContext& parent) {
  StartSpanOptions options;
  options.parent = parent;
  return options;
}

class TracerTest : public ::testing::Test {
 protected:
  FakeWallClock clock_{1'000'000'000};
  CollectingProcessor processor_;
  Tracer tracer_{std::shared_ptr<Sampler>(MakeAlwaysOnSampler()), &processor_, &clock_};
  Tracer off_{std::shared_ptr<Sampler>(MakeAlwaysOffSampler()), &processor_, &clock_};
};

TEST_F(TracerTest, RootSpanRecordsNameKindTimesAttributesAndStatus) {
  Span span = tracer_.StartSpan("POST /rerank", Kind(SpanKind::kServer));
  ASSERT_TRUE(span.IsRecording());
  EXPECT_TRUE(span.context().IsValid());
  EXPECT_TRUE(span.context().sampled());
  EXPECT_FALSE(span.context().remote);
  span.SetAttribute("http.request.method", "POST");
  span.SetAttribute("http.response.status_code", 200);
  span.SetAttribute("tide.batch.fill", 0.75);
  span.SetAttribute("tide.degraded", false);
  span.SetAttribute("http.request.method", std::string_view("PUT"));  // overwrites
  span.SetStatus(StatusCode::kError, "model failed");
  clock_.Advance(5'000);
  span.End();
  span.End();  // idempotent
  span.SetAttribute("late", true);  // after End: ignored

  const std::vector<SpanData> spans = processor_.spans();
  ASSERT_EQ(spans.size(), 1u);
  const SpanData& data = spans[0];
  EXPECT_EQ(data.name, "POST /rerank");
  EXPECT_EQ(data.kind, SpanKind::kServer);
  EXPECT_EQ(data.context, span.context());
  EXPECT_FALSE(IsValid(data.parent_span_id));
  EXPECT_EQ(data.start_unix_nanos, 1'000'000'000);
  EXPECT_EQ(data.end_unix_nanos, 1'000'005'000);
  ASSERT_EQ(data.attributes.size(), 4u);
  EXPECT_EQ(data.attributes[0], (Attribute{"http.request.method", std::string("PUT")}));
  EXPECT_EQ(data.attributes[1], (Attribute{"http.response.status_code", int64_t{200}}));
  EXPECT_EQ(data.attributes[2], (Attribute{"tide.batch.fill", 0.75}));
  EXPECT_EQ(data.attributes[3], (Attribute{"tide.degraded", false}));
  EXPECT_EQ(data.status, StatusCode::kError);
  EXPECT_EQ(data.status_message, "model failed");
}

TEST_F(TracerTest, ChildOfARemoteParentContinuesItsTrace) {
  std::optional<SpanContext> parent =
      Extract(std::string_view("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
              std::string_view("rojo=1"), nullptr);
  ASSERT_TRUE(parent);
  Span span = tracer_.StartSpan("child", ChildOf(*parent));
  EXPECT_EQ(span.context().trace_id, parent->trace_id);
  EXPECT_NE(span.context().span_id, parent->span_id);
  EXPECT_EQ(span.context().trace_state, "rojo=1");
  EXPECT_FALSE(span.context().remote);
  span.End(42);
  const SpanData data = processor_.spans().at(0);
  EXPECT_EQ(data.parent_span_id, parent->span_id);
  EXPECT_TRUE(data.parent_remote);
  EXPECT_EQ(data.end_unix_nanos, 42);
}

TEST_F(TracerTest, AnUnsampledSpanHasAContextButRecordsNothing) {
  Span span = off_.StartSpan("dropped", Kind(SpanKind::kServer));
  EXPECT_FALSE(span.IsRecording());
  EXPECT_TRUE(span.context().IsValid());
  EXPECT_FALSE(span.context().sampled());
  span.SetAttribute("k", "v");
  span.AddEvent("e");
  span.SetStatus(StatusCode::kOk);
  span.End();
  EXPECT_TRUE(processor_.spans().empty());
  // Its children stay in the trace and (parent-based) unsampled.
  Tracer parent_based{std::shared_ptr<Sampler>(MakeParentBasedSampler(MakeAlwaysOnSampler())), &processor_, &clock_};
  Span child = parent_based.StartSpan("child", ChildOf(span.context()));
  EXPECT_EQ(child.context().trace_id, span.context().trace_id);
  EXPECT_FALSE(child.IsRecording());
}

TEST_F(TracerTest, AGivenDecisionOverridesTheSampler) {
  // A root that follows another span's decision (tide.shadow follows the request it links to).
  StartSpanOptions keep;
  keep.sampled = true;
  Span kept = off_.StartSpan("kept", std::move(keep));
  EXPECT_TRUE(kept.IsRecording());
  EXPECT_TRUE(kept.context().sampled());
  StartSpanOptions drop;
  drop.sampled = false;
  Span dropped = tracer_.StartSpan("dropped", std::move(drop));
  EXPECT_FALSE(dropped.IsRecording());
  EXPECT_FALSE(dropped.context().sampled());
  kept.End();
  dropped.End();
  ASSERT_EQ(processor_.spans().size(), 1u);
  EXPECT_EQ(processor_.spans()[0].name, "kept");
}

TEST_F(TracerTest, WithoutAProcessorNothingRecordsButIdsAreMade) {
  Tracer tracer{std::shared_ptr<Sampler>(MakeAlwaysOnSampler()), nullptr, &clock_};
  Span span = tracer.StartSpan("x");
  EXPECT_FALSE(span.IsRecording());
  EXPECT_TRUE(span.context().IsValid());
  EXPECT_TRUE(span.context().sampled());
}

TEST_F(TracerTest, StatusRules) {
  Span a = tracer_.StartSpan("a");
  a.SetStatus(StatusCode::kOk, "ignored message");
  a.SetStatus(StatusCode::kError, "too late");  // Ok is final
  a.SetStatus(StatusCode::kUnset);
  a.End();
  Span b = tracer_.StartSpan("b");
  b.SetStatus(StatusCode::kError, "first");
  b.SetStatus(StatusCode::kUnset);  // ignored
  b.End();
  const std::vector<SpanData> spans = processor_.spans();
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].status, StatusCode::kOk);
  EXPECT_EQ(spans[0].status_message, "");
  EXPECT_EQ(spans[1].status, StatusCode::kError);
  EXPECT_EQ(spans[1].status_message, "first");
}

TEST_F(TracerTest, LinksEventsAndStartOptions) {
  Span batch_a = tracer_.StartSpan("request a");
  Span batch_b = tracer_.StartSpan("request b");
  StartSpanOptions options;
  options.links.push_back(SpanLink{batch_a.context(), {{"tide.rows", int64_t{3}}}});
  options.links.push_back(SpanLink{SpanContext{}, {}});  // invalid: skipped
  options.attributes.push_back(Attribute{"tide.model", std::string("m")});
  options.start_unix_nanos = 7;
  Span batch = tracer_.StartSpan("batch", std::move(options));
  batch.AddLink(batch_b.context());
  batch.AddEvent("queued", 8, {{"depth", int64_t{2}}});
  clock_.Set(9);
  batch.AddEvent("ran");
  batch.End(10);
  const SpanData data = processor_.spans().at(0);
  EXPECT_EQ(data.start_unix_nanos, 7);
  ASSERT_EQ(data.attributes.size(), 1u);
  EXPECT_EQ(data.attributes[0].key, "tide.model");
  ASSERT_EQ(data.links.size(), 2u);
  EXPECT_EQ(data.links[0].context, batch_a.context());
  EXPECT_EQ(data.links[0].attributes.at(0), (Attribute{"tide.rows", int64_t{3}}));
  EXPECT_EQ(data.links[1].context, batch_b.context());
  ASSERT_EQ(data.events.size(), 2u);
  EXPECT_EQ(data.events[0].name, "queued");
  EXPECT_EQ(data.events[0].time_unix_nanos, 8);
  EXPECT_EQ(data.events[1].time_unix_nanos, 9);
}

TEST_F(TracerTest, AttributeLimitDropsAndCounts) {
  Span span = tracer_.StartSpan("many");
  for (size_t i = 0; i < kMaxAttributes + 5; ++i) span.SetAttribute("k" + std::to_string(i), int64_t(i));
  span.SetAttribute("k0", int64_t{-1});  // overwriting an existing key still works at the limit
  span.End();
  const SpanData data = processor_.spans().at(0);
  EXPECT_EQ(data.attributes.size(), kMaxAttributes);
  EXPECT_EQ(data.dropped_attributes, 5u);
  EXPECT_EQ(data.attributes[0], (Attribute{"k0", int64_t{-1}}));
}

TEST_F(TracerTest, DestructorAndMoveAssignmentEndTheSpan) {
  { Span span = tracer_.StartSpan("scoped"); }
  Span moved = tracer_.StartSpan("first");
  moved = tracer_.StartSpan("second");  // ends "first"
  EXPECT_EQ(processor_.spans().size(), 2u);
  moved.End();
  const std::vector<SpanData> spans = processor_.spans();
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].name, "scoped");
  EXPECT_EQ(spans[1].name, "first");
  EXPECT_EQ(spans[2].name, "second");
}

TEST_F(TracerTest, ConcurrentEndsHandTheSpanOverExactlyOnce) {
  for (int round = 0; round < 50; ++round) {
    Span span = tracer_.StartSpan("raced");
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&span, t] {
        span.SetAttribute("t" + std::to_string(t), true);
        span.End();
      });
    }
    for (std::thread& t : threads) t.join();
  }
  EXPECT_EQ(processor_.spans().size(), 50u);
}

}  // namespace
}  // namespace tide::tracing
