#include "batching/batch.h"

namespace tide::batching {

std::string_view DropReasonName(DropReason reason) {
  switch (reason) {
    case DropReason::kDeadlineExceeded: return "deadline_exceeded";
    case DropReason::kCancelled: return "cancelled";
    case DropReason::kQueueTimeout: return "queue_timeout";
    case DropReason::kShutdown: return "shutdown";
    case DropReason::kRunnerError: return "runner_error";
  }
  return "unknown";
}

absl::Status DropStatus(DropReason reason) {
  switch (reason) {
    case DropReason::kDeadlineExceeded:
      return absl::DeadlineExceededError("request deadline passed while queued");
    case DropReason::kCancelled: return absl::CancelledError("client cancelled the request");
    case DropReason::kQueueTimeout: return absl::UnavailableError("request timed out in the queue");
    case DropReason::kShutdown: return absl::UnavailableError("server is shutting down");
    case DropReason::kRunnerError: return absl::InternalError("model instance failed the batch");
  }
  return absl::UnknownError("unknown drop reason");
}

}  // namespace tide::batching
