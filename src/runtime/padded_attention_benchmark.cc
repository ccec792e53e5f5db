// PaddedAttention at the shapes the issue-#30 benchmarks run: MiniLM-L6 (12 heads of 32) on a batch
// of 2 x 448 tokens and on one SciFact-length pair (336), bge-reranker-base (12 heads of 64) on one
// pair; one layer per iteration, one thread. items_per_second = attention FLOPs (4 x S x L x H per
// row) per second, so it reads as GFLOP/s against the MatMul ceiling (build/bench/roofline_bench).
// BM_Reference/... is the plain loops, for scale. Measured here (Zen 5, one core): 156 / 149 / 175
// GFLOP/s for the three shapes, the reference 4.
//   ninja -C <build> tide_padded_attention_benchmark && <build>/src/runtime/tide_padded_attention_benchmark
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/padded_attention.h"

namespace tide::runtime {
namespace {

struct Case {
  AttentionShape shape;
  std::vector<float> q, k, v, bias, out;
  std::vector<int32_t> mask;
};

Case MakeCase(int64_t batch, int64_t seq, int64_t heads, int64_t head_size) {
  Case c;
  c.shape = {batch, seq, heads, head_size, 0.125f};
  const size_t n = static_cast<size_t>(batch * seq * heads * head_size);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  for (auto* t : {&c.q, &c.k, &c.v}) {
    t->resize(n);
    for (float& x : *t) x = dist(rng);
  }
  c.bias.assign(static_cast<size_t>(3 * heads * head_size), 0.01f);
  c.out.resize(n);
  c.mask.assign(static_cast<size_t>(batch * seq), 1);
  return c;
}

void Run(benchmark::State& state, bool reference) {
  Case c = MakeCase(state.range(0), state.range(1), state.range(2), state.range(3));
  for (auto _ : state) {
    if (reference) {
      PaddedAttentionReference(c.shape, c.q.data(), c.k.data(), c.v.data(), c.bias.data(), c.mask.data(), c.out.data());
    } else {
      PaddedAttention(c.shape, c.q.data(), c.k.data(), c.v.data(), c.bias.data(), c.mask.data(), c.out.data());
    }
    benchmark::DoNotOptimize(c.out.data());
  }
  const double flops = 4.0 * c.shape.batch * c.shape.seq * c.shape.seq * c.shape.heads * c.shape.head_size;
  state.SetItemsProcessed(static_cast<int64_t>(flops) * state.iterations());
  state.SetLabel(!reference && PaddedAttentionIsVectorized(c.shape.head_size) ? "avx512" : "reference loops");
}

// A decoder's causal grouped-query attention (Qwen3-0.6B: 16 query heads, 8 key/value heads of
// 128); items = the causal FLOPs (4 x S (S + 1) / 2 x H per row), what the kernel computes.
void BM_CausalAttention(benchmark::State& state) {
  const int64_t seq = state.range(0), heads = state.range(1), kv_heads = state.range(2), d = state.range(3);
  Case c = MakeCase(1, seq, heads, d);
  c.shape.kv_heads = kv_heads;
  c.shape.causal = true;
  c.shape.scale = 1.0f / std::sqrt(static_cast<float>(d));
  c.shape.precision = state.range(4) != 0 ? AttentionPrecision::kBf16 : AttentionPrecision::kFp32;
  for (auto _ : state) {
    PaddedAttention(c.shape, c.q.data(), c.k.data(), c.v.data(), nullptr, c.mask.data(), c.out.data());
    benchmark::DoNotOptimize(c.out.data());
  }
  const double flops = 4.0 * seq * (seq + 1) / 2 * heads * d;
  state.SetItemsProcessed(static_cast<int64_t>(flops) * state.iterations());
  state.SetLabel(state.range(4) != 0 ? "bf16" : "fp32");
}

void BM_PaddedAttention(benchmark::State& state) { Run(state, false); }
void BM_Reference(benchmark::State& state) { Run(state, true); }

// {batch, seq, heads, head_size}
BENCHMARK(BM_PaddedAttention)->Args({2, 448, 12, 32})->Args({1, 336, 12, 32})->Args({1, 336, 12, 64})->Args({1, 416, 16, 128})->Unit(benchmark::kMillisecond);
// {seq, heads, kv_heads, head_size, bf16}
BENCHMARK(BM_CausalAttention)->Args({416, 16, 8, 128, 0})->Args({416, 16, 8, 128, 1})->Args({126, 16, 8, 128, 0})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Reference)->Args({1, 336, 12, 64})->Unit(benchmark::kMillisecond)->Iterations(2);

}  // namespace
}  // namespace tide::runtime

BENCHMARK_MAIN();
