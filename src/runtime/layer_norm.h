// tide::runtime::LayerNorm — y = (s - mean(s)) / sqrt(var(s) + epsilon) x gamma + beta over each
// row's last axis, s = x + skip + bias: ONNX LayerNormalization (no skip, no bias) and ONNX
// Runtime's com.microsoft.SkipLayerNormalization (its first output) in one kernel.
//
// With AVX-512 (checked at run time) a row is summed, centred and scaled 16 lanes at a time in
// three passes over y (the row stays in L1), the variance from the centred values (not
// E[s^2] - mean^2); FP32 throughout.
//
// Contract:
//  - x, y: [rows, cols] row-major FP32 (y may be x); skip: [rows, cols] or null; gamma: [cols];
//    beta, bias: [cols] or null (zero). epsilon > 0.
//  - |y - reference| <= 1e-5 x max(1, |y|) (layer_norm_test, against double accumulation).
//  - `parallel_for` splits rows (runtime/parallel_for.h); thread-safe for distinct y.
//  - LayerNormReference: the plain loops in double, the tests' oracle and the path without
//    AVX-512; LayerNormIsVectorized says which one LayerNorm runs here.
#pragma once

#include <cstdint>

#include "runtime/parallel_for.h"

namespace tide::runtime {

struct LayerNormInputs {
  const float* x = nullptr;
  const float* skip = nullptr;
  const float* bias = nullptr;
  const float* gamma = nullptr;
  const float* beta = nullptr;
};

void LayerNorm(int64_t rows, int64_t cols, float epsilon, const LayerNormInputs& in, float* y,
               const ParallelFor& parallel_for = nullptr);
void LayerNormReference(int64_t rows, int64_t cols, float epsilon, const LayerNormInputs& in, float* y);
bool LayerNormIsVectorized();

}  // namespace tide::runtime
