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
//  - UseIdleSchedulingForCurrentThread(): puts the calling thread under SCHED_IDLE (Linux): it runs
//    only when no normal thread of the machine wants its CPU, and a normal thread that wakes up
//    preempts it at once. No privilege is needed to enter it; leaving it needs one, so use it on
//    dedicated threads only (serving/shadow_lane.h). Threads it creates afterwards inherit it.
//    Errors: INTERNAL with the errno text. CurrentThreadIsIdleScheduled() says whether it is in force.
//  - A thread under SCHED_IDLE must not hold a lock that a normal thread waits for on a request
//    path: when preempted it keeps the lock until the CPU is idle again (priority inversion).
#pragma once

#include <functional>

#include "absl/status/status.h"

namespace tide::batching {

absl::Status LowerCurrentThreadPriority(int increment);
int CurrentThreadNice();
absl::Status RunOnLoweredThread(int increment, const std::function<absl::Status()>& fn);
absl::Status UseIdleSchedulingForCurrentThread();
bool CurrentThreadIsIdleScheduled();

}  // namespace tide::batching
