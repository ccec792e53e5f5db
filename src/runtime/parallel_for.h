// tide::runtime::ParallelFor — how tide's kernels spread independent units of work over a pool
// (ONNX Runtime's intra-op threads, through KernelContext_ParallelFor, in runtime/tide_ops.cc).
//
// Contract: parallel_for(units, fn) runs fn(u) once for every u in [0, units), in any order, on
// any threads, and returns when all have run. RunUnits runs them serially when `parallel_for` is
// empty or there is one unit. RunRowBlocks splits `rows` rows of `cols` values into blocks of
// about `values_per_block` values (at least one row each) and runs fn(first_row, end_row) per block.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace tide::runtime {

using ParallelFor = std::function<void(size_t units, const std::function<void(size_t)>& fn)>;

inline void RunUnits(size_t units, const ParallelFor& parallel_for, const std::function<void(size_t)>& fn) {
  if (parallel_for == nullptr || units <= 1) {
    for (size_t u = 0; u < units; ++u) fn(u);
    return;
  }
  parallel_for(units, fn);
}

inline void RunRowBlocks(int64_t rows, int64_t cols, int64_t values_per_block, const ParallelFor& parallel_for,
                         const std::function<void(int64_t, int64_t)>& fn) {
  if (rows <= 0 || cols <= 0) return;
  const int64_t rows_per_block = std::max<int64_t>(1, values_per_block / cols);
  const size_t blocks = static_cast<size_t>((rows + rows_per_block - 1) / rows_per_block);
  RunUnits(blocks, parallel_for, [&](size_t b) {
    const int64_t r0 = static_cast<int64_t>(b) * rows_per_block;
    fn(r0, std::min(rows, r0 + rows_per_block));
  });
}

}  // namespace tide::runtime
