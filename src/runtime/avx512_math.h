// tide::runtime AVX-512 helpers shared by tide's own kernels (padded_attention, bias_gelu,
// layer_norm): the target attribute, the run-time CPU check and e^x for x <= 0.
//
// Contract:
//  - Functions marked TIDE_AVX512 may only run where CpuHasAvx512() is true, TIDE_AVX512_BF16 where
//    CpuHasAvx512Bf16() is; the build stays portable (no -mavx512f), each kernel checks at run time
//    and falls back to its plain loops.
//  - Exp512NonPositive(x): e^x for x <= 0 as 2^n x Taylor(r) of degree 7, |r| <= ln2 / 2, relative
//    error < 1e-7; x below -87 gives ~e^-87 (nil next to anything the callers add it to).
//    Exp512NonPositiveBf16(x): the same with degree 4 (relative error < 5e-5), for BF16 results.
#pragma once

#include <immintrin.h>

#include <cstdint>

#define TIDE_AVX512 __attribute__((target("avx512f,avx512dq,fma")))
// For kernels that also multiply in BF16 (vdpbf16ps): only where CpuHasAvx512Bf16().
#define TIDE_AVX512_BF16 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx512bf16,fma")))

namespace tide::runtime {

inline bool CpuHasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return has;
}

inline bool CpuHasAvx512Bf16() {
  static const bool has = CpuHasAvx512() && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
  return has;
}

// x = n ln2 + r with n integral and |r| <= ln2 / 2 (x clamped at -87 first); returns r.
TIDE_AVX512 inline __m512 Exp512Reduce(__m512 x, __m512* n) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  *n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_fnmadd_ps(*n, _mm512_set1_ps(0.693145751953125f), x);
  return _mm512_fnmadd_ps(*n, _mm512_set1_ps(1.42860682030941723212e-6f), r);
}

// e^x for x <= 0 to what BF16 keeps (relative error < 5e-5; a BF16 rounding is up to 2^-9): a
// degree-4 Taylor polynomial, for numerators that are rounded to BF16 next.
TIDE_AVX512 inline __m512 Exp512NonPositiveBf16(__m512 x) {
  __m512 n;
  const __m512 r = Exp512Reduce(x, &n);
  __m512 p = _mm512_set1_ps(1.0f / 24);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

TIDE_AVX512 inline __m512 Exp512NonPositive(__m512 x) {
  __m512 n;
  const __m512 r = Exp512Reduce(x, &n);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// Lanes [0, n - j0) of a 16-float vector starting at j0, all 16 when n - j0 >= 16.
inline __mmask16 TailMask(int64_t j0, int64_t n) {
  const int64_t left = n - j0;
  if (left >= 16) return 0xFFFF;
  if (left <= 0) return 0;
  return static_cast<__mmask16>((1u << left) - 1u);
}

}  // namespace tide::runtime
