#include "runtime/bias_gelu.h"

#include <cmath>

#include "runtime/avx512_math.h"

namespace tide::runtime {
namespace {

constexpr int64_t kGeluElementsPerUnit = 1 << 14;  // ~64 KB of y per unit of work

// y = a (1 - q) for a >= 0, a q for a < 0, q = erfc(|a| / sqrt 2) / 2 by A&S 7.1.28:
// erfc(z) = (1 + c1 z + ... + c6 z^6)^-16, |error| <= 3e-7, z >= 0 (no exp, one reciprocal).
TIDE_AVX512 inline __m512 Gelu512(__m512 a) {
  const __m512 z = _mm512_mul_ps(_mm512_abs_ps(a), _mm512_set1_ps(0.70710678118654752f));
  __m512 p = _mm512_set1_ps(0.0000430638f);
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(0.0002765672f));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(0.0001520143f));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(0.0092705272f));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(0.0422820123f));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(0.0705230784f));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(1.0f));
  // r = 1 / p: rcp14 and one Newton step (relative error ~1e-8); p >= 1, so r in (0, 1].
  __m512 r = _mm512_rcp14_ps(p);
  r = _mm512_mul_ps(r, _mm512_fnmadd_ps(p, r, _mm512_set1_ps(2.0f)));
  r = _mm512_mul_ps(r, r);  // r^2
  r = _mm512_mul_ps(r, r);  // r^4
  r = _mm512_mul_ps(r, r);  // r^8
  r = _mm512_mul_ps(r, r);  // r^16 = erfc(z)
  const __m512 q = _mm512_mul_ps(r, _mm512_set1_ps(0.5f));
  const __mmask16 neg = _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 factor = _mm512_mask_mov_ps(_mm512_sub_ps(_mm512_set1_ps(1.0f), q), neg, q);
  return _mm512_mul_ps(a, factor);
}

// Whole vectors unmasked (a masked store is slow on AMD's AVX-512), each row's tail masked.
TIDE_AVX512 void GeluRowsVector(int64_t r0, int64_t r1, int64_t cols, const float* x, const float* bias, float* y) {
  const int64_t whole = cols / 16 * 16;
  const __mmask16 tail = TailMask(whole, cols);
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    if (bias != nullptr) {
      for (int64_t c = 0; c < whole; c += 16) {
        _mm512_storeu_ps(yr + c, Gelu512(_mm512_add_ps(_mm512_loadu_ps(xr + c), _mm512_loadu_ps(bias + c))));
      }
    } else {
      for (int64_t c = 0; c < whole; c += 16) _mm512_storeu_ps(yr + c, Gelu512(_mm512_loadu_ps(xr + c)));
    }
    if (tail != 0) {
      __m512 a = _mm512_maskz_loadu_ps(tail, xr + whole);
      if (bias != nullptr) a = _mm512_add_ps(a, _mm512_maskz_loadu_ps(tail, bias + whole));
      _mm512_mask_storeu_ps(yr + whole, tail, Gelu512(a));
    }
  }
}

void GeluRowsReference(int64_t r0, int64_t r1, int64_t cols, const float* x, const float* bias, float* y) {
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const double a = static_cast<double>(x[r * cols + c]) + (bias != nullptr ? bias[c] : 0.0);
      y[r * cols + c] = static_cast<float>(0.5 * a * (1.0 + std::erf(a / std::sqrt(2.0))));
    }
  }
}

}  // namespace

bool BiasGeluIsVectorized() { return CpuHasAvx512(); }

void BiasGelu(int64_t rows, int64_t cols, const float* x, const float* bias, float* y, const ParallelFor& parallel_for) {
  const bool vector = BiasGeluIsVectorized();
  RunRowBlocks(rows, cols, kGeluElementsPerUnit, parallel_for, [&](int64_t r0, int64_t r1) {
    if (vector) {
      GeluRowsVector(r0, r1, cols, x, bias, y);
    } else {
      GeluRowsReference(r0, r1, cols, x, bias, y);
    }
  });
}

void BiasGeluReference(int64_t rows, int64_t cols, const float* x, const float* bias, float* y) {
  if (rows > 0 && cols > 0) GeluRowsReference(0, rows, cols, x, bias, y);
}

}  // namespace tide::runtime
