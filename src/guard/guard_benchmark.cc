// Cost of the guards on the request path (Google Benchmark), next to references measured in the
// same run: a steady_clock read and an uncontended absl::Mutex lock/unlock. Compare ratios, not
// absolute times, across machines.
//
//   ninja -C build-guard guard_benchmark && build-guard/src/guard/guard_benchmark
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include <benchmark/benchmark.h>

#include "absl/synchronization/mutex.h"
#include "guard/api_key.h"
#include "guard/bm25.h"
#include "guard/circuit_breaker.h"
#include "guard/concurrency_limiter.h"

namespace tide::guard {
namespace {

void BM_Reference_SteadyClockNow(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(std::chrono::steady_clock::now());
}
BENCHMARK(BM_Reference_SteadyClockNow);

void BM_Reference_MutexLockUnlock(benchmark::State& state) {
  static absl::Mutex mu;
  for (auto _ : state) {
    absl::MutexLock lock(&mu);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_Reference_MutexLockUnlock)->Threads(1)->Threads(2);

std::unique_ptr<CircuitBreaker> MakeBreaker() {
  CircuitBreakerOptions options;
  options.p99_threshold = std::chrono::milliseconds(200);
  options.error_rate_threshold = 0.5;
  options.queue_fullness_threshold = 0.9;
  options.open_duration = std::chrono::hours(1);
  return *CircuitBreaker::Create(options);
}

// Closed: one atomic load.
void BM_BreakerAdmitClosed(benchmark::State& state) {
  static std::unique_ptr<CircuitBreaker> breaker = MakeBreaker();
  for (auto _ : state) benchmark::DoNotOptimize(breaker->Admit());
}
BENCHMARK(BM_BreakerAdmitClosed)->Threads(1)->Threads(2);

// Closed: Admit plus Record (clock read, lock, window update, trigger check) per request.
void BM_BreakerAdmitAndRecord(benchmark::State& state) {
  static std::unique_ptr<CircuitBreaker> breaker = MakeBreaker();
  int64_t i = 0;
  for (auto _ : state) {
    if (breaker->Admit() == CircuitBreaker::Decision::kModel) {
      breaker->Record({std::chrono::microseconds(1000 + (i++ & 1023)), true});
    }
  }
}
BENCHMARK(BM_BreakerAdmitAndRecord)->Threads(1)->Threads(2);

// Open: every request takes the lock to learn it gets the fallback.
void BM_BreakerAdmitOpen(benchmark::State& state) {
  static std::unique_ptr<CircuitBreaker> breaker = [] {
    auto b = MakeBreaker();
    b->ObserveQueue(1.0);
    return b;
  }();
  for (auto _ : state) benchmark::DoNotOptimize(breaker->Admit());
}
BENCHMARK(BM_BreakerAdmitOpen)->Threads(1)->Threads(2);

// Load shedding: grant + release, and the rejection path at the limit.
void BM_LimiterAcquireRelease(benchmark::State& state) {
  static ConcurrencyLimiter limiter(512);
  for (auto _ : state) {
    auto permit = limiter.TryAcquire();
    benchmark::DoNotOptimize(permit);
  }
}
BENCHMARK(BM_LimiterAcquireRelease)->Threads(1)->Threads(2);

void BM_LimiterReject(benchmark::State& state) {
  static ConcurrencyLimiter limiter(1);
  static auto held = limiter.TryAcquire();
  for (auto _ : state) benchmark::DoNotOptimize(limiter.TryAcquire());
}
BENCHMARK(BM_LimiterReject)->Threads(1)->Threads(2);

void BM_ApiKeyMatches(benchmark::State& state) {
  const std::string key(40, 'k');
  const std::string header = "Bearer " + key;
  for (auto _ : state) benchmark::DoNotOptimize(ApiKeyMatches(header, key));
}
BENCHMARK(BM_ApiKeyMatches);

// A rerank request: a query of 16 tokens and range(0) documents of 256 tokens from a 30k vocabulary.
void BM_Bm25Score(benchmark::State& state) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> token(1000, 31000);
  std::vector<int64_t> query(16);
  for (int64_t& t : query) t = token(rng);
  std::vector<std::vector<int64_t>> documents(static_cast<size_t>(state.range(0)), std::vector<int64_t>(256));
  for (auto& document : documents) {
    for (int64_t& t : document) t = token(rng);
    document[0] = query[0];
  }
  std::vector<std::span<const int64_t>> spans(documents.begin(), documents.end());
  auto scorer = *Bm25Scorer::Create();
  std::vector<float> scores;
  for (auto _ : state) {
    scorer->Score(query, std::span<const std::span<const int64_t>>(spans), &scores);
    benchmark::DoNotOptimize(scores.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0) * 256);  // document tokens
}
BENCHMARK(BM_Bm25Score)->Arg(10)->Arg(100)->Arg(1000);

}  // namespace
}  // namespace tide::guard

BENCHMARK_MAIN();
