#include "runtime/padded_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/avx512_math.h"

namespace tide::runtime {
namespace {

constexpr int kBlockRows = 8;     // query rows per block
constexpr int kKeyBlock = 32;     // keys per score block (two vectors)
constexpr int64_t kMaxVectorHeadSize = 128;

struct Scratch {
  std::vector<int32_t> keys;  // real key positions of the row
  std::vector<float> kt;      // [head_size][keys padded to 32]: K^T with its bias
  std::vector<float> v;       // [keys][head_size]: V with its bias
  std::vector<float> q;       // [8][head_size]: the block's queries with bias, times scale
  std::vector<float> p;       // [8][keys padded]: scores, then unnormalized probabilities
  // The BF16 path's packed operands, each 32-bit element a pair of BF16 values:
  std::vector<uint32_t> kt2;  // [head_size / 2][keys padded to 32]: dimensions (2c, 2c + 1) of a key
  std::vector<uint32_t> v2;   // [keys padded to 2 / 2][head_size]: keys (2n, 2n + 1) of a dimension
  std::vector<uint32_t> q2;   // [8][head_size / 2]
  std::vector<uint32_t> p2;   // [8][keys padded / 2]: numerators, keys (2n, 2n + 1)
};

Scratch& ThreadScratch() {
  thread_local Scratch s;
  return s;
}

// Positions of the real keys (mask != 0); every position when none is real.
void RealKeys(const int32_t* mask_row, int64_t seq, std::vector<int32_t>* keys) {
  keys->clear();
  for (int64_t j = 0; j < seq; ++j) {
    if (mask_row[j] != 0) keys->push_back(static_cast<int32_t>(j));
  }
  if (keys->empty()) {
    for (int64_t j = 0; j < seq; ++j) keys->push_back(static_cast<int32_t>(j));
  }
}

// Where unit (b, h) reads and writes: floats per token in q and out / in k and v, and the first
// column of its query head / of its key-value head (h / (heads / kv_heads)).
struct UnitLayout {
  int64_t q_stride, kv_stride, q_col, kv_col;
};
UnitLayout LayoutOf(const AttentionShape& s, int64_t h) {
  const int64_t d = s.head_size, kv_heads = s.KvHeads();
  return {s.heads * d, kv_heads * d, h * d, h / (s.heads / kv_heads) * d};
}

// How many of the packed real keys (in position order) query row i attends: all of them, or with
// causal those at positions <= query_offset + i, at least the first.
int64_t SeenKeys(const AttentionShape& s, const std::vector<int32_t>& keys, int64_t i) {
  const auto all = static_cast<int64_t>(keys.size());
  if (!s.causal) return all;
  const auto upto = static_cast<int64_t>(std::upper_bound(keys.begin(), keys.end(), s.query_offset + i) - keys.begin());
  return std::max<int64_t>(1, upto);
}

void ReferenceUnit(const AttentionShape& s, const float* q, const float* k, const float* v, const float* bias,
                   const int32_t* mask, float* out, int64_t b, int64_t h, std::vector<int32_t>* keys) {
  const int64_t d = s.head_size;
  const UnitLayout at = LayoutOf(s, h);
  RealKeys(mask + b * s.seq, s.seq, keys);
  const float* bq = bias != nullptr ? bias + at.q_col : nullptr;
  const float* bk = bias != nullptr ? bias + at.q_stride + at.kv_col : nullptr;
  const float* bv = bias != nullptr ? bias + at.q_stride + at.kv_stride + at.kv_col : nullptr;
  std::vector<double> scores(keys->size()), acc(static_cast<size_t>(d));
  for (int64_t i = 0; i < s.Queries(); ++i) {
    const auto seen = static_cast<size_t>(SeenKeys(s, *keys, i));
    const float* qi = q + (b * s.Queries() + i) * at.q_stride + at.q_col;
    double best = -std::numeric_limits<double>::infinity();
    for (size_t n = 0; n < seen; ++n) {
      const float* kj = k + (b * s.seq + (*keys)[n]) * at.kv_stride + at.kv_col;
      double dot = 0;
      for (int64_t c = 0; c < d; ++c) {
        dot += static_cast<double>(qi[c] + (bq ? bq[c] : 0.0f)) * static_cast<double>(kj[c] + (bk ? bk[c] : 0.0f));
      }
      scores[n] = dot * s.scale;
      best = std::max(best, scores[n]);
    }
    double sum = 0;
    std::fill(acc.begin(), acc.end(), 0.0);
    for (size_t n = 0; n < seen; ++n) {
      const double p = std::exp(scores[n] - best);
      sum += p;
      const float* vj = v + (b * s.seq + (*keys)[n]) * at.kv_stride + at.kv_col;
      for (int64_t c = 0; c < d; ++c) acc[static_cast<size_t>(c)] += p * (vj[c] + (bv ? bv[c] : 0.0f));
    }
    float* oi = out + (b * s.Queries() + i) * at.q_stride + at.q_col;
    for (int64_t c = 0; c < d; ++c) oi[c] = static_cast<float>(acc[static_cast<size_t>(c)] / sum);
  }
}

// P.V runs over a head's vectors in column chunks of at most 4 (a head of 128 is two chunks of 64
// dimensions), each with as many rows per pass as keep 16 accumulators or fewer: a head's V rows
// are re-read once per pass, so 8 vectors x 2 rows would stream V four times per block of queries
// where 2 chunks x 4 rows stream half of it as often (head 128: 117 -> GFLOP/s measured below).
constexpr int kContextChunk = 4;
constexpr int PassRows(int C) { return C <= 2 ? kBlockRows : 4; }
static_assert(kBlockRows % PassRows(3) == 0 && kBlockRows % PassRows(kContextChunk) == 0);

// Head h's q, k and v bias parts (zeros without a bias).
struct HeadBias {
  const float *q, *k, *v;
};
HeadBias BiasOfHead(const UnitLayout& at, const float* bias) {
  alignas(64) static const float kZeros[kMaxVectorHeadSize] = {};
  if (bias == nullptr) return {kZeros, kZeros, kZeros};
  return {bias + at.q_col, bias + at.q_stride + at.kv_col, bias + at.q_stride + at.kv_stride + at.kv_col};
}

// The keys each of a block's rows attends (rows past the block's end: its last row's); returns the
// keys the block's score loop covers: its last row's (SeenKeys grows with i), rounded up to kKeyBlock.
int64_t BlockSeen(const AttentionShape& s, const std::vector<int32_t>& keys, int64_t i0, int rows,
                  int64_t seen[kBlockRows]) {
  for (int r = 0; r < kBlockRows; ++r) seen[r] = SeenKeys(s, keys, i0 + std::min(r, rows - 1));
  return (seen[kBlockRows - 1] + kKeyBlock - 1) / kKeyBlock * kKeyBlock;
}

// The largest of a row's first n scores.
TIDE_AVX512 inline float RowMax(const float* pr, int64_t n) {
  __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j0 = 0; j0 < n; j0 += 16) m = _mm512_max_ps(m, _mm512_mask_loadu_ps(m, TailMask(j0, n), pr + j0));
  return _mm512_reduce_max_ps(m);
}

// A block's context for head vectors [t0, t0 + C): RP queries x C vectors per register block over
// the keys the pass's last row sees; row r's output at out0 + r x out_stride, scaled by inv[r].
template <int C>
TIDE_AVX512 void ContextColumns(const float* p, int64_t Lp, const float* vp, int64_t D, int t0, int rows,
                                const int64_t* seen, const float* inv, float* out0, int64_t out_stride) {
  constexpr int RP = PassRows(C);
  for (int r0 = 0; r0 < rows; r0 += RP) {
    __m512 acc[RP][C];
    for (int r = 0; r < RP; ++r) {
      for (int t = 0; t < C; ++t) acc[r][t] = _mm512_setzero_ps();
    }
    const float* pr0 = p + r0 * Lp;
    const int64_t np = seen[std::min(r0 + RP, rows) - 1];
    for (int64_t n = 0; n < np; ++n) {
      __m512 vv[C];
      for (int t = 0; t < C; ++t) vv[t] = _mm512_loadu_ps(vp + n * D + 16 * (t0 + t));
      for (int r = 0; r < RP; ++r) {
        const __m512 pb = _mm512_set1_ps(pr0[r * Lp + n]);
        for (int t = 0; t < C; ++t) acc[r][t] = _mm512_fmadd_ps(pb, vv[t], acc[r][t]);
      }
    }
    for (int r = 0; r < RP && r0 + r < rows; ++r) {
      float* oi = out0 + (r0 + r) * out_stride + 16 * t0;
      const __m512 f = _mm512_set1_ps(inv[r0 + r]);
      for (int t = 0; t < C; ++t) _mm512_storeu_ps(oi + 16 * t, _mm512_mul_ps(acc[r][t], f));
    }
  }
}

// One (row b, head h): T vectors of 16 floats per head.
template <int T>
TIDE_AVX512 void VectorUnit(const AttentionShape& s, const float* q, const float* k, const float* v, const float* bias,
                            const int32_t* mask, float* out, int64_t b, int64_t h, Scratch& sc) {
  constexpr int64_t D = 16 * T;
  const UnitLayout at = LayoutOf(s, h);
  const HeadBias hb = BiasOfHead(at, bias);
  const float *bq = hb.q, *bk = hb.k, *bv = hb.v;

  RealKeys(mask + b * s.seq, s.seq, &sc.keys);
  const int64_t L = static_cast<int64_t>(sc.keys.size());
  const int64_t Lp = (L + kKeyBlock - 1) / kKeyBlock * kKeyBlock;
  sc.kt.assign(static_cast<size_t>(D * Lp), 0.0f);
  sc.v.resize(static_cast<size_t>(L * D));
  sc.q.resize(static_cast<size_t>(kBlockRows * D));
  sc.p.resize(static_cast<size_t>(kBlockRows * Lp));
  float* kt = sc.kt.data();
  float* vp = sc.v.data();
  float* qp = sc.q.data();
  float* p = sc.p.data();

  // Pack the real keys: K^T (keys contiguous per dimension) and V, each with its bias.
  for (int64_t n = 0; n < L; ++n) {
    const int64_t row = b * s.seq + sc.keys[static_cast<size_t>(n)];
    const float* kn = k + row * at.kv_stride + at.kv_col;
    const float* vn = v + row * at.kv_stride + at.kv_col;
    alignas(64) float tmp[D];
    for (int t = 0; t < T; ++t) {
      _mm512_store_ps(tmp + 16 * t, _mm512_add_ps(_mm512_loadu_ps(kn + 16 * t), _mm512_loadu_ps(bk + 16 * t)));
      _mm512_storeu_ps(vp + n * D + 16 * t, _mm512_add_ps(_mm512_loadu_ps(vn + 16 * t), _mm512_loadu_ps(bv + 16 * t)));
    }
    for (int64_t c = 0; c < D; ++c) kt[c * Lp + n] = tmp[c];
  }

  const __m512 scale = _mm512_set1_ps(s.scale);
  for (int64_t i0 = 0; i0 < s.Queries(); i0 += kBlockRows) {
    const int rows = static_cast<int>(std::min<int64_t>(kBlockRows, s.Queries() - i0));
    int64_t seen[kBlockRows];  // keys per row: L, or fewer with causal
    const int64_t Lb = BlockSeen(s, sc.keys, i0, rows, seen);
    for (int r = 0; r < kBlockRows; ++r) {
      for (int t = 0; t < T; ++t) {
        __m512 x = _mm512_setzero_ps();
        if (r < rows) {
          const float* qi = q + (b * s.Queries() + i0 + r) * at.q_stride + at.q_col;
          x = _mm512_mul_ps(_mm512_add_ps(_mm512_loadu_ps(qi + 16 * t), _mm512_loadu_ps(bq + 16 * t)), scale);
        }
        _mm512_storeu_ps(qp + r * D + 16 * t, x);
      }
    }
    // Scores: 8 queries x 32 keys per register block, up to the keys the block's last row sees.
    for (int64_t j0 = 0; j0 < Lb; j0 += kKeyBlock) {
      __m512 acc0[kBlockRows], acc1[kBlockRows];
      for (int r = 0; r < kBlockRows; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
      for (int64_t c = 0; c < D; ++c) {
        const __m512 k0 = _mm512_loadu_ps(kt + c * Lp + j0);
        const __m512 k1 = _mm512_loadu_ps(kt + c * Lp + j0 + 16);
        for (int r = 0; r < kBlockRows; ++r) {
          const __m512 qb = _mm512_set1_ps(qp[r * D + c]);
          acc0[r] = _mm512_fmadd_ps(qb, k0, acc0[r]);
          acc1[r] = _mm512_fmadd_ps(qb, k1, acc1[r]);
        }
      }
      for (int r = 0; r < kBlockRows; ++r) {
        _mm512_storeu_ps(p + r * Lp + j0, acc0[r]);
        _mm512_storeu_ps(p + r * Lp + j0 + 16, acc1[r]);
      }
    }
    // Softmax numerators over the keys each row sees (the rest up to Lb becomes 0), and 1 / sum.
    float inv[kBlockRows];
    for (int r = 0; r < kBlockRows; ++r) {
      float* pr = p + r * Lp;
      const int64_t n = seen[r];
      const __m512 best = _mm512_set1_ps(RowMax(pr, n));
      __m512 sum = _mm512_setzero_ps();
      for (int64_t j0 = 0; j0 < Lb; j0 += 16) {
        const __m512 e = _mm512_maskz_mov_ps(TailMask(j0, n), Exp512NonPositive(_mm512_sub_ps(_mm512_loadu_ps(pr + j0), best)));
        _mm512_storeu_ps(pr + j0, e);
        sum = _mm512_add_ps(sum, e);
      }
      inv[r] = 1.0f / _mm512_reduce_add_ps(sum);
    }
    // Context, in column chunks of the head.
    float* out0 = out + (b * s.Queries() + i0) * at.q_stride + at.q_col;
    constexpr int C0 = T < kContextChunk ? T : kContextChunk;
    ContextColumns<C0>(p, Lp, vp, D, 0, rows, seen, inv, out0, at.q_stride);
    if constexpr (T > kContextChunk) ContextColumns<T - kContextChunk>(p, Lp, vp, D, kContextChunk, rows, seen, inv, out0, at.q_stride);
  }
}

// BF16 helpers: 16 floats -> 16 BF16 (round to nearest even) and back.
TIDE_AVX512_BF16 inline __m256i ToBf16(__m512 x) { return reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(x)); }
TIDE_AVX512_BF16 inline __m512 FromBf16(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
TIDE_AVX512_BF16 inline __m512 DotBf16(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
}

// ContextColumns with the numerators and V in BF16 pairs: a key pair per step (p2 rows of Lp2 pairs,
// V as key pairs of each dimension, D pairs per key pair).
template <int C>
TIDE_AVX512_BF16 void ContextColumnsBf16(const uint32_t* p2, int64_t Lp2, const uint32_t* vp, int64_t D, int t0,
                                         int rows, const int64_t* seen, const float* inv, float* out0,
                                         int64_t out_stride) {
  constexpr int RP = PassRows(C);
  for (int r0 = 0; r0 < rows; r0 += RP) {
    __m512 acc[RP][C];
    for (int r = 0; r < RP; ++r) {
      for (int t = 0; t < C; ++t) acc[r][t] = _mm512_setzero_ps();
    }
    const uint32_t* pr0 = p2 + r0 * Lp2;
    const int64_t np2 = (seen[std::min(r0 + RP, rows) - 1] + 1) / 2;  // key pairs the pass's last row sees
    for (int64_t n2 = 0; n2 < np2; ++n2) {
      __m512i vv[C];
      for (int t = 0; t < C; ++t) vv[t] = _mm512_loadu_si512(vp + n2 * D + 16 * (t0 + t));
      for (int r = 0; r < RP; ++r) {
        const __m512i pb = _mm512_set1_epi32(static_cast<int>(pr0[r * Lp2 + n2]));
        for (int t = 0; t < C; ++t) acc[r][t] = DotBf16(acc[r][t], pb, vv[t]);
      }
    }
    for (int r = 0; r < RP && r0 + r < rows; ++r) {
      float* oi = out0 + (r0 + r) * out_stride + 16 * t0;
      const __m512 f = _mm512_set1_ps(inv[r0 + r]);
      for (int t = 0; t < C; ++t) _mm512_storeu_ps(oi + 16 * t, _mm512_mul_ps(acc[r][t], f));
    }
  }
}

// VectorUnit's blocks with both products in BF16 (precision kBf16): K^T packed as dimension pairs
// of each key, V as key pairs of each dimension, so one vdpbf16ps adds two products per lane.
template <int T>
TIDE_AVX512_BF16 void Bf16Unit(const AttentionShape& s, const float* q, const float* k, const float* v,
                               const float* bias, const int32_t* mask, float* out, int64_t b, int64_t h, Scratch& sc) {
  constexpr int64_t D = 16 * T;
  constexpr int64_t D2 = D / 2;  // dimension pairs
  const UnitLayout at = LayoutOf(s, h);
  const HeadBias hb = BiasOfHead(at, bias);
  const float *bq = hb.q, *bk = hb.k, *bv = hb.v;

  RealKeys(mask + b * s.seq, s.seq, &sc.keys);
  const int64_t L = static_cast<int64_t>(sc.keys.size());
  const int64_t Lp = (L + kKeyBlock - 1) / kKeyBlock * kKeyBlock;
  const int64_t L2 = (L + 1) / 2;  // key pairs
  sc.kt2.assign(static_cast<size_t>(D2 * Lp), 0u);
  sc.v2.resize(static_cast<size_t>(L2 * D));
  sc.q2.resize(static_cast<size_t>(kBlockRows * D2));
  sc.p.resize(static_cast<size_t>(kBlockRows * Lp));
  sc.p2.resize(static_cast<size_t>(kBlockRows * Lp / 2));
  uint32_t* kt = sc.kt2.data();
  uint32_t* vp = sc.v2.data();
  uint32_t* qp = sc.q2.data();
  float* p = sc.p.data();
  uint32_t* p2 = sc.p2.data();

  // Pack K^T: a key's row in BF16 is already its dimension pairs; each pair goes to its column.
  for (int64_t n = 0; n < L; ++n) {
    const float* kn = k + (b * s.seq + sc.keys[static_cast<size_t>(n)]) * at.kv_stride + at.kv_col;
    alignas(64) uint32_t tmp[D2];
    for (int t = 0; t < T; ++t) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(tmp + 8 * t),
                         ToBf16(_mm512_add_ps(_mm512_loadu_ps(kn + 16 * t), _mm512_loadu_ps(bk + 16 * t))));
    }
    for (int64_t c = 0; c < D2; ++c) kt[c * Lp + n] = tmp[c];
  }
  // Pack V: keys 2n and 2n + 1 interleaved per dimension (a zero key after an odd last one).
  alignas(64) static const uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                       8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i interleave = _mm512_load_si512(kInterleave);
  for (int64_t n2 = 0; n2 < L2; ++n2) {
    const float* v0 = v + (b * s.seq + sc.keys[static_cast<size_t>(2 * n2)]) * at.kv_stride + at.kv_col;
    const bool has1 = 2 * n2 + 1 < L;
    const float* v1 =
        has1 ? v + (b * s.seq + sc.keys[static_cast<size_t>(2 * n2 + 1)]) * at.kv_stride + at.kv_col : nullptr;
    for (int t = 0; t < T; ++t) {
      const __m512 a = _mm512_add_ps(_mm512_loadu_ps(v0 + 16 * t), _mm512_loadu_ps(bv + 16 * t));
      const __m512 c = has1 ? _mm512_add_ps(_mm512_loadu_ps(v1 + 16 * t), _mm512_loadu_ps(bv + 16 * t))
                            : _mm512_setzero_ps();
      const __m512i ab = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(c, a));  // a's 16 low, c's 16 high
      _mm512_storeu_si512(vp + n2 * D + 16 * t, _mm512_permutexvar_epi16(interleave, ab));
    }
  }

  const __m512 scale = _mm512_set1_ps(s.scale);
  for (int64_t i0 = 0; i0 < s.Queries(); i0 += kBlockRows) {
    const int rows = static_cast<int>(std::min<int64_t>(kBlockRows, s.Queries() - i0));
    int64_t seen[kBlockRows];  // keys per row: L, or fewer with causal
    const int64_t Lb = BlockSeen(s, sc.keys, i0, rows, seen);
    for (int r = 0; r < kBlockRows; ++r) {
      for (int t = 0; t < T; ++t) {
        __m512 x = _mm512_setzero_ps();
        if (r < rows) {
          const float* qi = q + (b * s.Queries() + i0 + r) * at.q_stride + at.q_col;
          x = _mm512_mul_ps(_mm512_add_ps(_mm512_loadu_ps(qi + 16 * t), _mm512_loadu_ps(bq + 16 * t)), scale);
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(qp + r * D2 + 8 * t), ToBf16(x));
      }
    }
    // Scores: 8 queries x 32 keys per register block, a dimension pair per step.
    for (int64_t j0 = 0; j0 < Lb; j0 += kKeyBlock) {
      __m512 acc0[kBlockRows], acc1[kBlockRows];
      for (int r = 0; r < kBlockRows; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
      for (int64_t c = 0; c < D2; ++c) {
        const __m512i k0 = _mm512_loadu_si512(kt + c * Lp + j0);
        const __m512i k1 = _mm512_loadu_si512(kt + c * Lp + j0 + 16);
        for (int r = 0; r < kBlockRows; ++r) {
          const __m512i qb = _mm512_set1_epi32(static_cast<int>(qp[r * D2 + c]));
          acc0[r] = DotBf16(acc0[r], qb, k0);
          acc1[r] = DotBf16(acc1[r], qb, k1);
        }
      }
      for (int r = 0; r < kBlockRows; ++r) {
        _mm512_storeu_ps(p + r * Lp + j0, acc0[r]);
        _mm512_storeu_ps(p + r * Lp + j0 + 16, acc1[r]);
      }
    }
    // Softmax numerators in BF16 over the keys each row sees (the rest up to Lb becomes 0); 1 / their sum.
    float inv[kBlockRows];
    for (int r = 0; r < kBlockRows; ++r) {
      const float* pr = p + r * Lp;
      const int64_t n = seen[r];
      const __m512 best = _mm512_set1_ps(RowMax(pr, n));
      __m512 sum = _mm512_setzero_ps();
      for (int64_t j0 = 0; j0 < Lb; j0 += 16) {
        const __m512 e = _mm512_maskz_mov_ps(TailMask(j0, n), Exp512NonPositiveBf16(_mm512_sub_ps(_mm512_loadu_ps(pr + j0), best)));
        const __m256i e16 = ToBf16(e);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p2 + r * (Lp / 2) + j0 / 2), e16);
        sum = _mm512_add_ps(sum, FromBf16(e16));
      }
      inv[r] = 1.0f / _mm512_reduce_add_ps(sum);
    }
    // Context, in column chunks of the head, a key pair per step.
    float* out0 = out + (b * s.Queries() + i0) * at.q_stride + at.q_col;
    constexpr int C0 = T < kContextChunk ? T : kContextChunk;
    ContextColumnsBf16<C0>(p2, Lp / 2, vp, D, 0, rows, seen, inv, out0, at.q_stride);
    if constexpr (T > kContextChunk) {
      ContextColumnsBf16<T - kContextChunk>(p2, Lp / 2, vp, D, kContextChunk, rows, seen, inv, out0, at.q_stride);
    }
  }
}

using UnitFn = void (*)(const AttentionShape&, const float*, const float*, const float*, const float*, const int32_t*,
                        float*, int64_t, int64_t, Scratch&);

template <int T>
UnitFn UnitOf(bool bf16) {
  return bf16 ? &Bf16Unit<T> : &VectorUnit<T>;
}

UnitFn VectorUnitFor(int64_t head_size, AttentionPrecision precision) {
  const bool bf16 = precision == AttentionPrecision::kBf16 && CpuHasAvx512Bf16();
  switch (head_size) {
    case 16: return UnitOf<1>(bf16);
    case 32: return UnitOf<2>(bf16);
    case 48: return UnitOf<3>(bf16);
    case 64: return UnitOf<4>(bf16);
    case 80: return UnitOf<5>(bf16);
    case 96: return UnitOf<6>(bf16);
    case 112: return UnitOf<7>(bf16);
    case 128: return UnitOf<8>(bf16);
    default: return nullptr;
  }
}

}  // namespace

bool PaddedAttentionCpuSupported() { return CpuHasAvx512(); }

bool PaddedAttentionBf16Supported() { return CpuHasAvx512Bf16(); }

bool PaddedAttentionIsVectorized(int64_t head_size) {
  return head_size <= kMaxVectorHeadSize && VectorUnitFor(head_size, AttentionPrecision::kFp32) != nullptr && CpuHasAvx512();
}

void PaddedAttention(const AttentionShape& shape, const float* q, const float* k, const float* v, const float* bias,
                     const int32_t* mask, float* out, const ParallelFor& parallel_for) {
  const size_t units = static_cast<size_t>(shape.batch * shape.heads);
  const UnitFn unit = PaddedAttentionIsVectorized(shape.head_size) ? VectorUnitFor(shape.head_size, shape.precision) : nullptr;
  RunUnits(units, parallel_for, [&](size_t u) {
    const int64_t b = static_cast<int64_t>(u) / shape.heads, h = static_cast<int64_t>(u) % shape.heads;
    Scratch& sc = ThreadScratch();
    if (unit != nullptr) {
      unit(shape, q, k, v, bias, mask, out, b, h, sc);
    } else {
      ReferenceUnit(shape, q, k, v, bias, mask, out, b, h, &sc.keys);
    }
  });
}

void PaddedAttentionReference(const AttentionShape& shape, const float* q, const float* k, const float* v,
                              const float* bias, const int32_t* mask, float* out) {
  std::vector<int32_t> keys;
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t h = 0; h < shape.heads; ++h) ReferenceUnit(shape, q, k, v, bias, mask, out, b, h, &keys);
  }
}

}  // namespace tide::runtime
