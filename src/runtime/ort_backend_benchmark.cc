// OrtBackend on the shared DistilBERT export: one batched Run of B rows against B single-row Runs
// of the same rows (the reference, measured in the same process). Compare items_per_second of
// BM_Batched/B with BM_SingleRows/B: their ratio is what batching buys on this machine.
//   ninja -C <build> tide_runtime_benchmark && <build>/src/runtime/tide_runtime_benchmark
// Needs ../shared/assets (relative to the working directory or TIDE_SOURCE_DIR).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>
#include <optional>

#include "runtime/ort_backend.h"
#include "shared_assets.h"

namespace tide::runtime {
namespace {

std::unique_ptr<OrtBackend> Backend(benchmark::State& state) {
  const std::optional<std::filesystem::path> model = tide::testing::SharedAsset(tide::testing::kTinyDistilBertModel);
  if (!model) {
    state.SkipWithError(tide::testing::MissingSharedAsset(tide::testing::kTinyDistilBertModel).c_str());
    return nullptr;
  }
  auto backend = OrtBackend::Create({.model_path = model->string(), .intra_op_threads = 1});
  if (!backend.ok()) {
    state.SkipWithError(std::string(backend.status().message()).c_str());
    return nullptr;
  }
  return *std::move(backend);
}

TokenBatch Rows(int64_t batch, int64_t seq) {
  TokenBatch b;
  b.Resize(batch, seq, false);
  for (int64_t i = 0; i < batch * seq; ++i) {
    b.input_ids[i] = 1000 + (i * 7919) % 20000;
    b.attention_mask[i] = 1;
  }
  return b;
}

constexpr int64_t kSeq = 128;

void BM_Batched(benchmark::State& state) {
  auto backend = Backend(state);
  if (!backend) return;
  const TokenBatch batch = Rows(state.range(0), kSeq);
  Logits out;
  for (auto _ : state) {
    if (!backend->Run(batch, &out).ok()) state.SkipWithError("Run failed");
    benchmark::DoNotOptimize(out.values.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_SingleRows(benchmark::State& state) {
  auto backend = Backend(state);
  if (!backend) return;
  const TokenBatch row = Rows(1, kSeq);
  Logits out;
  for (auto _ : state) {
    for (int64_t i = 0; i < state.range(0); ++i) {
      if (!backend->Run(row, &out).ok()) state.SkipWithError("Run failed");
      benchmark::DoNotOptimize(out.values.data());
    }
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

BENCHMARK(BM_Batched)->Arg(1)->Arg(8)->Arg(32)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SingleRows)->Arg(1)->Arg(8)->Arg(32)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tide::runtime

BENCHMARK_MAIN();
