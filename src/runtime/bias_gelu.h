// tide::runtime::BiasGelu — y = GELU(x + bias), the erf form of a BERT / XLM-R feed-forward layer,
// in one pass.
//
// What ONNX Runtime computes for Add(x, bias) -> Gelu (or com.microsoft.BiasGelu), with the
// difference in how: with AVX-512 (checked at run time) 16 lanes at a time, erfc from
// Abramowitz & Stegun 7.1.28 (a degree-6 polynomial to the power -16, |error| <= 3e-7: no exp, one
// reciprocal) written as y = a (1 - q) for a >= 0 and a q below, q = erfc(|a| / sqrt 2) / 2, so
// large negative inputs go smoothly to 0; reading x once and writing y once (ONNX Runtime's Add
// and Gelu are two passes, its BiasGelu a slower one).
//
// Contract:
//  - x, y: [rows, cols] row-major FP32 (y may be x); bias: [cols] or null (zero).
//  - |y - GELU_exact(x + bias)| <= 1e-6 x max(1, |y|) (bias_gelu_test, against std::erf in double).
//  - `parallel_for` splits rows (runtime/parallel_for.h); thread-safe for distinct y.
//  - BiasGeluReference: the plain loop (std::erf in double), the tests' oracle and the path
//    without AVX-512; BiasGeluIsVectorized says which one BiasGelu runs here.
#pragma once

#include <cstdint>

#include "runtime/parallel_for.h"

namespace tide::runtime {

void BiasGelu(int64_t rows, int64_t cols, const float* x, const float* bias, float* y,
              const ParallelFor& parallel_for = nullptr);
void BiasGeluReference(int64_t rows, int64_t cols, const float* x, const float* bias, float* y);
bool BiasGeluIsVectorized();

}  // namespace tide::runtime
