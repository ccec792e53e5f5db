#include "runtime/layer_norm.h"

#include <cmath>
#include <vector>

#include "runtime/avx512_math.h"

namespace tide::runtime {
namespace {

constexpr int64_t kNormElementsPerUnit = 1 << 14;

// s = x + skip + bias, 16 lanes at c: whole vectors unmasked (a masked store is slow on AMD's
// AVX-512), the row's tail masked.
template <bool kMasked>
TIDE_AVX512 inline __m512 Load512(const float* p, __mmask16 m) {
  return kMasked ? _mm512_maskz_loadu_ps(m, p) : _mm512_loadu_ps(p);
}

template <bool kMasked>
TIDE_AVX512 inline __m512 Sum512(const float* xr, const float* sr, const float* bias, int64_t c, __mmask16 m) {
  __m512 s = Load512<kMasked>(xr + c, m);
  if (sr != nullptr) s = _mm512_add_ps(s, Load512<kMasked>(sr + c, m));
  if (bias != nullptr) s = _mm512_add_ps(s, Load512<kMasked>(bias + c, m));
  return s;
}

// Two accumulators per pass (fewer dependent adds in a row), whole vectors first, the masked tail
// last; three passes over y (sum, centred squares, normalize), the row in L1.
TIDE_AVX512 void NormRowsVector(int64_t r0, int64_t r1, int64_t cols, float epsilon, const LayerNormInputs& in, float* y) {
  const float inv_cols = 1.0f / static_cast<float>(cols);
  const int64_t whole2 = cols / 32 * 32, whole = cols / 16 * 16;
  const __mmask16 tail = TailMask(whole, cols);
  // Locals, not in.*: the intrinsics' stores may alias anything, so members would be reloaded.
  const float* const bias = in.bias;
  const float* const gamma = in.gamma;
  const float* const beta = in.beta;
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = in.x + r * cols;
    const float* sr = in.skip != nullptr ? in.skip + r * cols : nullptr;
    float* yr = y + r * cols;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    int64_t c = 0;
    for (; c < whole2; c += 32) {
      const __m512 v0 = Sum512<false>(xr, sr, bias, c, 0), v1 = Sum512<false>(xr, sr, bias, c + 16, 0);
      _mm512_storeu_ps(yr + c, v0);
      _mm512_storeu_ps(yr + c + 16, v1);
      a0 = _mm512_add_ps(a0, v0);
      a1 = _mm512_add_ps(a1, v1);
    }
    if (c < whole) {
      const __m512 v = Sum512<false>(xr, sr, bias, c, 0);
      _mm512_storeu_ps(yr + c, v);
      a0 = _mm512_add_ps(a0, v);
    }
    if (tail != 0) {
      const __m512 v = Sum512<true>(xr, sr, bias, whole, tail);
      _mm512_mask_storeu_ps(yr + whole, tail, v);
      a1 = _mm512_add_ps(a1, v);
    }
    const __m512 mean = _mm512_set1_ps(_mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) * inv_cols);
    a0 = a1 = _mm512_setzero_ps();
    for (c = 0; c < whole2; c += 32) {
      const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(yr + c), mean);
      const __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(yr + c + 16), mean);
      a0 = _mm512_fmadd_ps(d0, d0, a0);
      a1 = _mm512_fmadd_ps(d1, d1, a1);
    }
    if (c < whole) {
      const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(yr + c), mean);
      a0 = _mm512_fmadd_ps(d, d, a0);
    }
    if (tail != 0) {
      const __m512 d = _mm512_maskz_sub_ps(tail, _mm512_maskz_loadu_ps(tail, yr + whole), mean);
      a1 = _mm512_fmadd_ps(d, d, a1);
    }
    const float var = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) * inv_cols;
    const __m512 rstd = _mm512_set1_ps(1.0f / std::sqrt(var + epsilon));
    for (c = 0; c < whole; c += 16) {
      const __m512 g = _mm512_mul_ps(_mm512_loadu_ps(gamma + c), rstd);
      const __m512 b = beta != nullptr ? _mm512_loadu_ps(beta + c) : _mm512_setzero_ps();
      _mm512_storeu_ps(yr + c, _mm512_fmadd_ps(_mm512_sub_ps(_mm512_loadu_ps(yr + c), mean), g, b));
    }
    if (tail != 0) {
      const __m512 g = _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, gamma + whole), rstd);
      const __m512 b = beta != nullptr ? _mm512_maskz_loadu_ps(tail, beta + whole) : _mm512_setzero_ps();
      const __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(tail, yr + whole), mean);
      _mm512_mask_storeu_ps(yr + whole, tail, _mm512_fmadd_ps(d, g, b));
    }
  }
}

void NormRowsReference(int64_t r0, int64_t r1, int64_t cols, float epsilon, const LayerNormInputs& in, float* y) {
  std::vector<double> s(static_cast<size_t>(cols));
  for (int64_t r = r0; r < r1; ++r) {
    double mean = 0;
    for (int64_t c = 0; c < cols; ++c) {
      double v = in.x[r * cols + c];
      if (in.skip != nullptr) v += in.skip[r * cols + c];
      if (in.bias != nullptr) v += in.bias[c];
      s[static_cast<size_t>(c)] = v;
      mean += v;
    }
    mean /= static_cast<double>(cols);
    double var = 0;
    for (int64_t c = 0; c < cols; ++c) var += (s[static_cast<size_t>(c)] - mean) * (s[static_cast<size_t>(c)] - mean);
    var /= static_cast<double>(cols);
    const double rstd = 1.0 / std::sqrt(var + static_cast<double>(epsilon));
    for (int64_t c = 0; c < cols; ++c) {
      const double v = (s[static_cast<size_t>(c)] - mean) * rstd * in.gamma[c] + (in.beta != nullptr ? in.beta[c] : 0.0);
      y[r * cols + c] = static_cast<float>(v);
    }
  }
}

}  // namespace

bool LayerNormIsVectorized() { return CpuHasAvx512(); }

void LayerNorm(int64_t rows, int64_t cols, float epsilon, const LayerNormInputs& in, float* y,
               const ParallelFor& parallel_for) {
  const bool vector = LayerNormIsVectorized();
  RunRowBlocks(rows, cols, kNormElementsPerUnit, parallel_for, [&](int64_t r0, int64_t r1) {
    if (vector) {
      NormRowsVector(r0, r1, cols, epsilon, in, y);
    } else {
      NormRowsReference(r0, r1, cols, epsilon, in, y);
    }
  });
}

void LayerNormReference(int64_t rows, int64_t cols, float epsilon, const LayerNormInputs& in, float* y) {
  if (rows > 0 && cols > 0) NormRowsReference(0, rows, cols, epsilon, in, y);
}

}  // namespace tide::runtime
