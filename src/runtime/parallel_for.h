// tide::runtime::ParallelFor — how tide's kernels spread independent units of work over a pool
// (ONNX Runtime's intra-op threads, through KernelContext_ParallelFor, in runtime/tide_ops.cc).
//
// Contract: parallel_for(units, fn) runs fn(u) once for every u in [0, units), in any order, on
// any threads, and returns when all have run. RunUnits runs them serially when `parallel_for` is
// empty or there is one unit.
#pragma once

#include <cstddef>
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

}  // namespace tide::runtime
