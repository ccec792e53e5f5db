// Per-task overhead of the batcher: Enqueue + Form on BatchFormer (no locks), and Submit +
// WaitForBatch on Batcher (one thread, so the lock is uncontended). The reference in the same run
// is a plain FIFO of unique_ptrs (push + pop): the ratio is the cost of batching decisions.
//
//   build-batch/src/batching/batching_benchmark
#include <deque>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "batching/batch_former.h"
#include "batching/batcher.h"
#include "batching/test_task.h"

namespace tide::batching {
namespace {

using testing::FakeTask;
using testing::Journal;

std::vector<size_t> MixedLengths(size_t n) {
  std::vector<size_t> lens(n);
  uint32_t rng = 7;
  for (size_t& len : lens) {
    rng = rng * 1664525u + 1013904223u;
    len = 8 + (rng >> 8) % 500;
  }
  return lens;
}

// Reference: FIFO push and pop of the same heap-allocated tasks.
void BM_FifoReference(benchmark::State& state) {
  const size_t depth = static_cast<size_t>(state.range(0));
  const std::vector<size_t> lens = MixedLengths(depth);
  Journal journal;
  std::deque<std::unique_ptr<FakeTask>> fifo;
  for (auto _ : state) {
    for (size_t i = 0; i < depth; ++i) fifo.push_back(std::make_unique<FakeTask>(&journal, static_cast<int>(i), lens[i]));
    while (!fifo.empty()) {
      benchmark::DoNotOptimize(fifo.front().get());
      fifo.pop_front();
    }
  }
  state.SetItemsProcessed(state.iterations() * depth);
}
BENCHMARK(BM_FifoReference)->Arg(32)->Arg(256)->Arg(2048);

// `depth` tasks queued, then batches formed (max_batch_size 32) until the queue is empty.
void BM_FormerEnqueueAndForm(benchmark::State& state) {
  const size_t depth = static_cast<size_t>(state.range(0));
  const std::vector<size_t> lens = MixedLengths(depth);
  BatcherOptions o;
  o.max_batch_size = 32;
  o.max_batch_tokens = 1 << 20;
  auto former = *BatchFormer<FakeTask>::Create(o);
  Journal journal;
  const Clock::time_point now = Clock::time_point{} + std::chrono::hours(1);
  size_t padded = 0, real = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < depth; ++i) {
      auto t = std::make_unique<FakeTask>(&journal, static_cast<int>(i), lens[i]);
      if (!former->Enqueue(t, now).ok()) state.SkipWithError("enqueue failed");
    }
    while (!former->empty()) {
      auto r = former->Form(now);
      padded += r.batch->padded_tokens;
      real += r.batch->real_tokens;
    }
  }
  state.SetItemsProcessed(state.iterations() * depth);
  state.counters["padding_ratio"] = padded == 0 ? 0.0 : 1.0 - static_cast<double>(real) / padded;
}
BENCHMARK(BM_FormerEnqueueAndForm)->Arg(32)->Arg(256)->Arg(2048);

void BM_BatcherSubmitAndWait(benchmark::State& state) {
  const size_t depth = static_cast<size_t>(state.range(0));
  const std::vector<size_t> lens = MixedLengths(depth);
  BatcherOptions o;
  o.max_batch_size = 32;
  o.max_batch_tokens = 1 << 20;
  Batcher<FakeTask>::Options bo;
  bo.batching = o;
  auto batcher = *Batcher<FakeTask>::Create(bo);
  Journal journal;
  Batch<FakeTask> batch;
  for (auto _ : state) {
    for (size_t i = 0; i < depth; ++i) {
      auto t = std::make_unique<FakeTask>(&journal, static_cast<int>(i), lens[i]);
      if (!batcher->Submit(t).ok()) state.SkipWithError("submit failed");
    }
    size_t got = 0;
    while (got < depth && batcher->WaitForBatch(&batch)) got += batch.size();
  }
  state.SetItemsProcessed(state.iterations() * depth);
}
BENCHMARK(BM_BatcherSubmitAndWait)->Arg(32)->Arg(256)->Arg(2048);

}  // namespace
}  // namespace tide::batching

BENCHMARK_MAIN();
