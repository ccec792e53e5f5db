// tide::bench roofline — the practical FP32 and INT8 ceilings of this machine, measured through
// ONNX Runtime's own kernels (MLAS) on one large MatMul, so a benchmark can report its useful
// GFLOP/s as a fraction of what the CPU actually delivers (the nominal peak, cores x clock x
// FLOP/cycle, is not a ceiling: the CPU boosts above the clock /proc/cpuinfo reports).
//
// Contract: MeasureRoofline builds each graph in memory (libonnx-dev protobuf classes), opens one
// ONNX Runtime session per (kernel, intra-op threads), and runs them in alternating rounds (round
// 1: every session, round 2: every session, ...) so load from other processes spreads over all
// rows alike; each row's figure is the median of its rounds. Blocking (takes about
// kernels x threads x rounds x seconds_per_round); errors from ONNX Runtime -> INTERNAL.
// Operation counts: 2 x M x K x N multiply-adds for every kernel (an INT8 "FLOP" is one int8
// multiply or add), whatever the kernel does inside.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tide::bench {

enum class RooflineKernel {
  kFp32MatMul,             // MatMul float x float initializer (pre-packed B, MLAS SGEMM)
  kMatMulIntegerU8S8,      // MatMulInteger uint8 x int8 initializer -> int32
  kMatMulIntegerU8U8,      // MatMulInteger uint8 x uint8 initializer -> int32
  kDynamicQuantizeMatMul,  // com.microsoft DynamicQuantizeMatMul float x int8 initializer -> float
};

const char* RooflineKernelName(RooflineKernel kernel);

struct RooflineOptions {
  int64_t m = 1024, k = 1024, n = 1024;  // [M, K] x [K, N]; default: a large square MatMul
  std::vector<RooflineKernel> kernels = {RooflineKernel::kFp32MatMul, RooflineKernel::kMatMulIntegerU8S8,
                                         RooflineKernel::kMatMulIntegerU8U8, RooflineKernel::kDynamicQuantizeMatMul};
  std::vector<int> threads = {1, 2};  // intra-op threads per session
  int rounds = 3;                     // alternating rounds; the median is reported
  double seconds_per_round = 1.0;     // run time of one row in one round (after one warm-up run)
  bool allow_spinning = true;         // ONNX Runtime's default: the best the kernels can do
};

struct RooflineRow {
  RooflineKernel kernel;
  int threads = 0;
  double gflops = 0;                  // median over rounds (GOP/s for the integer kernels)
  std::vector<double> round_gflops;   // every round, in order
  // Median over rounds of GFLOP per second of this process's CPU time: what the kernel does with
  // the CPU it actually gets, which other load on a shared machine changes much less than
  // GFLOP/s (spinning threads count as CPU time).
  double gflops_per_cpu_s = 0;
  std::vector<double> round_gflops_per_cpu_s;
};

absl::StatusOr<std::vector<RooflineRow>> MeasureRoofline(const RooflineOptions& options);

// The row's GFLOP/s, or 0 when absent.
double RooflineCeiling(const std::vector<RooflineRow>& rows, RooflineKernel kernel, int threads);

// "kernel threads median GFLOP/CPU-s [round, round, ...]" lines, one per row, with a header naming the shape.
std::string FormatRoofline(const RooflineOptions& options, const std::vector<RooflineRow>& rows);

}  // namespace tide::bench
