#include "common/error.h"

#include <algorithm>
#include <atomic>

namespace tide {

namespace {

std::atomic<uint64_t> errors_without_kind{0};
std::atomic<ErrorWithoutKindHook> error_without_kind_hook{nullptr};

absl::Cord NameOf(ErrorKind kind) {
  const std::string_view name = Info(kind).name;
  return absl::Cord(absl::string_view(name.data(), name.size()));
}

}  // namespace

std::optional<ErrorKind> FindKind(const absl::Status& status) {
  if (status.ok()) return std::nullopt;
  const auto payload = status.GetPayload(kErrorKindPayloadUrl);
  if (!payload.has_value()) return std::nullopt;
  for (const ErrorKindInfo& info : kErrorKinds) {
    if (*payload == absl::string_view(info.name.data(), info.name.size())) return info.kind;
  }
  return std::nullopt;
}

ErrorKind KindOf(const absl::Status& status) {
  if (std::optional<ErrorKind> kind = FindKind(status); kind.has_value()) return *kind;
  errors_without_kind.fetch_add(1, std::memory_order_relaxed);
  if (ErrorWithoutKindHook hook = error_without_kind_hook.load(std::memory_order_acquire); hook != nullptr) {
    hook(status);
  }
  return ErrorKind::kInternal;
}

uint64_t ErrorsWithoutKind() { return errors_without_kind.load(std::memory_order_relaxed); }

void SetErrorWithoutKindHook(ErrorWithoutKindHook hook) {
  error_without_kind_hook.store(hook, std::memory_order_release);
}

absl::Status MakeError(ErrorKind kind, absl::string_view message) {
  absl::Status status(Info(kind).code, message);
  status.SetPayload(kErrorKindPayloadUrl, NameOf(kind));
  return status;
}

absl::Status WithKind(absl::Status status, ErrorKind kind) {
  if (!status.ok()) status.SetPayload(kErrorKindPayloadUrl, NameOf(kind));
  return status;
}

absl::Status EnsureKind(absl::Status status, ErrorKind kind) {
  if (status.ok() || FindKind(status).has_value()) return status;
  return WithKind(std::move(status), kind);
}

absl::Status WithRetryAfter(absl::Status status, int64_t milliseconds) {
  status.SetPayload(kRetryAfterPayloadUrl, absl::Cord(std::to_string(std::max<int64_t>(0, milliseconds))));
  return status;
}

std::optional<int64_t> RetryAfterMs(const absl::Status& status) {
  const auto payload = status.GetPayload(kRetryAfterPayloadUrl);
  if (!payload.has_value()) return std::nullopt;
  const std::string text(*payload);
  if (text.empty() || text.size() > 18) return std::nullopt;
  int64_t ms = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    ms = ms * 10 + (c - '0');
  }
  return ms;
}

absl::Status WithDegraded(absl::Status status, absl::string_view what) {
  status.SetPayload(kDegradedPayloadUrl, absl::Cord(what));
  return status;
}

std::string DegradedOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kDegradedPayloadUrl);
  return payload.has_value() ? std::string(*payload) : std::string();
}

absl::Status WithKeyName(absl::Status status, absl::string_view name) {
  status.SetPayload(kKeyNamePayloadUrl, absl::Cord(name));
  return status;
}

std::string KeyNameOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kKeyNamePayloadUrl);
  return payload.has_value() ? std::string(*payload) : std::string();
}

ErrorFacts FactsOf(const absl::Status& status) {
  const ErrorKindInfo& info = Info(KindOf(status));
  ErrorFacts facts{&info, std::string(status.message()), RetryAfterMs(status), info.challenge, DegradedOf(status)};
  if (!facts.retry_after_ms.has_value() && info.retry_after_ms > 0) facts.retry_after_ms = info.retry_after_ms;
  return facts;
}

int64_t RetryAfterSeconds(int64_t milliseconds) { return std::max<int64_t>(1, (milliseconds + 999) / 1000); }

}  // namespace tide
