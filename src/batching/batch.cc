#include "batching/batch.h"
#include "common/error.h"

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
      return errors::DeadlineExceeded("request deadline passed while queued");
    case DropReason::kCancelled: return errors::Cancelled("client cancelled the request");
    case DropReason::kQueueTimeout: return errors::Unavailable("request timed out in the queue");
    case DropReason::kShutdown: return errors::Unavailable("server is shutting down");
    case DropReason::kRunnerError: return errors::Backend("model instance failed the batch");
  }
  return errors::Internal("unknown drop reason");
}

}  // namespace tide::batching
