// tide::batching thread priority — lowering the scheduling priority of compute threads so that the
// server's I/O threads win the CPU when they wake up (a 429 or a health probe must not wait behind a
// 100 ms GEMM on a saturated machine).
//
// Contract:
//  - Linux: nice values are per thread (setpriority on the thread id). Raising one's own nice value
//    needs no privilege; lowering it back does, so a lowered thread stays lowered. Threads inherit
//    the nice value of the thread that creates them.
//  - LowerCurrentThreadPriority(n): adds n (0..19, clamped at 19) to the calling thread's nice
//    value. 0 does nothing. Errors: INVALID_ARGUMENT for n outside 0..19, INTERNAL with the errno
//    text when the system call fails.
//  - CurrentThreadNice(): the calling thread's nice value.
//  - RunOnLoweredThread(n, fn): runs fn on a new thread lowered by n and waits for it, so that every
//    thread fn creates (e.g. an inference library's own thread pool) is born lowered too. Returns
//    fn's status, or the lowering error (fn then does not run).
#pragma once

#include <functional>

#include "absl/status/status.h"

namespace tide::batching {

absl::Status LowerCurrentThreadPriority(int increment);
int CurrentThreadNice();
absl::Status RunOnLoweredThread(int increment, const std::function<absl::Status()>& fn);

}  // namespace tide::batching
