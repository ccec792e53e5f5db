#include "tracing/span_context.h"

#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace tide::tracing {
namespace {

TEST(SpanContextTest, HexRoundTripIsLowercase) {
  const TraceId trace{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36};
  EXPECT_EQ(ToHex(trace), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(TraceIdFromHex("4bf92f3577b34da6a3ce929d0e0e4736"), trace);
  const SpanId span{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7};
  EXPECT_EQ(ToHex(span), "00f067aa0ba902b7");
  EXPECT_EQ(SpanIdFromHex("00f067aa0ba902b7"), span);
}

TEST(SpanContextTest, FromHexRefusesUppercaseWrongLengthAndNonHex) {
  EXPECT_FALSE(TraceIdFromHex("4BF92F3577B34DA6A3CE929D0E0E4736"));
  EXPECT_FALSE(TraceIdFromHex("4bf92f3577b34da6a3ce929d0e0e473"));
  EXPECT_FALSE(SpanIdFromHex("00f067aa0ba902b7a"));
  EXPECT_FALSE(SpanIdFromHex("00f067aa0ba902bg"));
}

TEST(SpanContextTest, AllZeroIdsAreInvalid) {
  EXPECT_FALSE(IsValid(TraceId{}));
  EXPECT_FALSE(IsValid(SpanId{}));
  SpanContext context;
  EXPECT_FALSE(context.IsValid());
  context.trace_id = IdGenerator::NewTraceId();
  EXPECT_FALSE(context.IsValid());
  context.span_id = IdGenerator::NewSpanId();
  EXPECT_TRUE(context.IsValid());
}

TEST(SpanContextTest, GeneratedIdsAreValidAndDistinctAcrossThreads) {
  absl::Mutex mu;
  std::set<TraceId> traces;
  std::set<SpanId> spans;
  std::vector<std::thread> threads;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 2000;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      std::vector<TraceId> local_traces;
      std::vector<SpanId> local_spans;
      for (int i = 0; i < kPerThread; ++i) {
        local_traces.push_back(IdGenerator::NewTraceId());
        local_spans.push_back(IdGenerator::NewSpanId());
      }
      absl::MutexLock lock(&mu);
      for (const TraceId& id : local_traces) {
        EXPECT_TRUE(IsValid(id));
        traces.insert(id);
      }
      for (const SpanId& id : local_spans) {
        EXPECT_TRUE(IsValid(id));
        spans.insert(id);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(traces.size(), size_t{kThreads * kPerThread});
  EXPECT_EQ(spans.size(), size_t{kThreads * kPerThread});
}

}  // namespace
}  // namespace tide::tracing
