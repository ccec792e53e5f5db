#include "batching/thread_priority.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"

namespace tide::batching {
namespace {

id_t CurrentThreadId() { return static_cast<id_t>(::syscall(SYS_gettid)); }

}  // namespace

int CurrentThreadNice() {
  errno = 0;
  return ::getpriority(PRIO_PROCESS, CurrentThreadId());
}

absl::Status LowerCurrentThreadPriority(int increment) {
  if (increment < 0 || increment > 19)
    return absl::InvalidArgumentError(absl::StrCat("nice increment must be in 0..19, got ", increment));
  if (increment == 0) return absl::OkStatus();
  const int target = std::min(19, CurrentThreadNice() + increment);
  if (::setpriority(PRIO_PROCESS, CurrentThreadId(), target) != 0)
    return absl::InternalError(absl::StrCat("setpriority(", target, "): ", std::strerror(errno)));
  return absl::OkStatus();
}

absl::Status RunOnLoweredThread(int increment, const std::function<absl::Status()>& fn) {
  absl::Status result;
  std::thread t([&] {
    result = LowerCurrentThreadPriority(increment);
    if (result.ok()) result = fn();
  });
  t.join();
  return result;
}

absl::Status UseIdleSchedulingForCurrentThread() {
  sched_param param{};
  param.sched_priority = 0;
  if (::sched_setscheduler(static_cast<pid_t>(CurrentThreadId()), SCHED_IDLE, &param) != 0)
    return absl::InternalError(absl::StrCat("sched_setscheduler(SCHED_IDLE): ", std::strerror(errno)));
  return absl::OkStatus();
}

bool CurrentThreadIsIdleScheduled() { return ::sched_getscheduler(static_cast<pid_t>(CurrentThreadId())) == SCHED_IDLE; }

}  // namespace tide::batching
