// Cost of tracing on the request path (Google Benchmark), next to references measured in the same
// run: a steady_clock read and an uncontended absl::Mutex lock/unlock. Compare ratios, not absolute
// times, across machines.
//
//   cmake --build build --target tracing_benchmark && build/src/tracing/tracing_benchmark
#include <chrono>
#include <memory>

#include <benchmark/benchmark.h>

#include "absl/synchronization/mutex.h"
#include "tracing/batch_span_processor.h"
#include "tracing/trace_context.h"
#include "tracing/tracer.h"

namespace tide::tracing {
namespace {

void BM_Reference_SteadyClockNow(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(std::chrono::steady_clock::now());
}
BENCHMARK(BM_Reference_SteadyClockNow);

void BM_Reference_MutexLockUnlock(benchmark::State& state) {
  static absl::Mutex mu;
  for (auto _ : state) {
    mu.Lock();
    mu.Unlock();
  }
}
BENCHMARK(BM_Reference_MutexLockUnlock);

void BM_NewSpanId(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(IdGenerator::NewSpanId());
}
BENCHMARK(BM_NewSpanId);

void BM_ParseTraceparent(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
  }
}
BENCHMARK(BM_ParseTraceparent);

class DiscardingExporter final : public SpanExporter {
 public:
  ExportResult Export(const std::vector<SpanData>&, std::chrono::milliseconds) override { return ExportResult::Ok(); }
};

// A request-sized span: start, four attributes (one string), end.
void Annotated(const Tracer& tracer) {
  Span span = tracer.StartSpan("POST /rerank");
  span.SetAttribute("http.request.method", "POST");
  span.SetAttribute("http.response.status_code", 200);
  span.SetAttribute("tide.documents", 16);
  span.SetAttribute("tide.degraded", false);
  span.End();
}

void BM_Span_Unsampled(benchmark::State& state) {
  BatchSpanProcessor processor({}, std::make_unique<DiscardingExporter>());
  const Tracer tracer(std::shared_ptr<Sampler>(MakeAlwaysOffSampler()), &processor);
  for (auto _ : state) Annotated(tracer);
}
BENCHMARK(BM_Span_Unsampled);

void BM_Span_SampledIntoBatchProcessor(benchmark::State& state) {
  BatchSpanProcessorOptions options;
  options.max_queue_size = 1 << 16;
  BatchSpanProcessor processor(options, std::make_unique<DiscardingExporter>());
  const Tracer tracer(std::shared_ptr<Sampler>(MakeAlwaysOnSampler()), &processor);
  for (auto _ : state) Annotated(tracer);
  state.counters["dropped"] = static_cast<double>(processor.counters().dropped_queue_full);
}
BENCHMARK(BM_Span_SampledIntoBatchProcessor);

}  // namespace
}  // namespace tide::tracing

BENCHMARK_MAIN();
