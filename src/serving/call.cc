#include "serving/call.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/error.h"

namespace tide::serving {

namespace {

// The longest timeout in microseconds whose nanoseconds still fit the steady clock's int64 (about
// 292 years); longer values saturate to it.
constexpr int64_t kMaxTimeoutUs = std::numeric_limits<int64_t>::max() / 1000;

// start + us, or time_point::max() (no deadline) when that is past what the clock can represent.
Clock::time_point DeadlineAfter(Clock::time_point start, int64_t us) {
  const Clock::duration headroom = Clock::time_point::max() - start;
  const std::chrono::microseconds timeout(us);  // us <= kMaxTimeoutUs: its nanoseconds fit
  if (timeout >= headroom) return Clock::time_point::max();
  return start + timeout;
}

absl::Status CheckTimeout(int64_t us) {
  if (us <= 0) return errors::InvalidInput("timeout must be positive");
  return absl::OkStatus();
}

absl::Status CheckPriority(int64_t priority) {
  if (priority < 0 || priority > std::numeric_limits<int>::max()) {
    return errors::InvalidInput(absl::StrCat("priority must be a non-negative integer, got ", priority));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t TimeoutMsToUs(int64_t ms) {
  if (ms > kMaxTimeoutUs / 1000) return kMaxTimeoutUs;
  if (ms < -(kMaxTimeoutUs / 1000)) return -kMaxTimeoutUs;
  return ms * 1000;
}

absl::StatusOr<RowTask::Admission> AdmissionFor(const CallInfo& info, std::chrono::milliseconds default_timeout) {
  RowTask::Admission a;
  a.client_gone = info.client_gone;
  a.trace = info.trace;
  int64_t timeout = default_timeout.count() > 0 ? TimeoutMsToUs(default_timeout.count()) : 0;
  if (info.timeout_us.has_value()) {
    if (absl::Status s = CheckTimeout(*info.timeout_us); !s.ok()) return s;
    const int64_t own = std::min(*info.timeout_us, kMaxTimeoutUs);
    if (timeout == 0 || own < timeout) timeout = own;
  }
  if (timeout > 0) a.deadline = DeadlineAfter(info.received_at, timeout);
  if (info.priority.has_value()) {
    if (absl::Status s = CheckPriority(*info.priority); !s.ok()) return s;
    a.priority = static_cast<int>(*info.priority);
  }
  return a;
}

absl::Status Call::StillWanted(std::string_view stage) const {
  if (admission_.client_gone != nullptr && admission_.client_gone->IsCancelled()) {
    return errors::Cancelled("the client disconnected");
  }
  if (clock_->Now() >= admission_.deadline) {
    return errors::DeadlineExceeded(absl::StrCat("the request's deadline passed while ", std::string(stage)));
  }
  return absl::OkStatus();
}

absl::Status Call::Refine(std::optional<int64_t> timeout_us, std::optional<int64_t> priority) {
  if (timeout_us.has_value() && !has_own_timeout_) {
    CallInfo info;
    info.received_at = received_at_;
    info.timeout_us = timeout_us;
    auto refined = AdmissionFor(info, default_timeout_);
    if (!refined.ok()) return refined.status();
    admission_.deadline = refined->deadline;
    has_own_timeout_ = true;
  }
  if (priority.has_value() && !has_own_priority_) {
    if (absl::Status s = CheckPriority(*priority); !s.ok()) return s;
    // A tenant asks for at most its max_priority, as on the header (ServiceCore::Admit).
    admission_.priority = static_cast<int>(guard::ClampPriority(tenant_.get(), *priority));
    has_own_priority_ = true;
  }
  return absl::OkStatus();
}

}  // namespace tide::serving
