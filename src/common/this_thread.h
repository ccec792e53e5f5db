// tide::this_thread — small best-effort settings of the calling thread (Linux).
//
//  - SetCurrentThreadName: the name `top -H`, `ps -L`, perf and gdb show ("tide-http-0",
//    "tide-infer-1", ...); Linux keeps at most 15 bytes, longer names are cut there.
//  - RequestShortTimeSlice: asks the scheduler (EEVDF, Linux 6.6+; honoured for wake-up preemption
//    from 6.12) for a short time slice, so that when this thread wakes up it preempts a thread
//    that is in the middle of a long slice (a compute thread running a GEMM) instead of waiting
//    for that slice to end. For threads that wake often and run briefly: HTTP I/O threads, a load
//    generator's event loop. Unprivileged; the kernel clamps the value to [0.1, 100] ms. Returns
//    false where the kernel refuses it (older kernels ignore or reject the field).
//  - CurrentTimeSliceNs: the slice the kernel reports for the calling thread, or -1.
// Failures change nothing else.
#pragma once

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string>

namespace tide::this_thread {

inline void SetCurrentThreadName(std::string name) {
  if (name.size() > 15) name.resize(15);
  pthread_setname_np(pthread_self(), name.c_str());
}

// struct sched_attr as the kernel defines it (include/uapi/linux/sched/types.h), first version.
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;  // SCHED_OTHER: the requested time slice, ns
  uint64_t sched_deadline;
  uint64_t sched_period;
};

inline bool RequestShortTimeSlice(std::chrono::microseconds slice) {
#ifdef SYS_sched_setattr
  SchedAttr attr{};
  attr.size = sizeof attr;
  attr.sched_policy = SCHED_OTHER;
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
  if (errno != 0) return false;
  attr.sched_nice = nice;  // unchanged (SCHED_FLAG_KEEP_PARAMS would keep the old slice too)
  attr.sched_runtime = static_cast<uint64_t>(std::chrono::nanoseconds(slice).count());
  return syscall(SYS_sched_setattr, 0, &attr, 0) == 0;
#else
  (void)slice;
  return false;
#endif
}

// The calling thread's time slice as the kernel reports it (sched_getattr's sched_runtime), or -1.
inline int64_t CurrentTimeSliceNs() {
#ifdef SYS_sched_getattr
  SchedAttr attr{};
  if (syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) != 0) return -1;
  return static_cast<int64_t>(attr.sched_runtime);
#else
  return -1;
#endif
}

}  // namespace tide::this_thread
