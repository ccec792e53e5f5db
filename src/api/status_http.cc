#include "api/status_http.h"

#include <nlohmann/json.hpp>

#include "common/error_echo.h"

namespace tide::api {

int HttpStatusFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
      return 400;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 422;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kCancelled:
      return 499;
    default:
      return 500;
  }
}

int GrpcStatusFor(absl::StatusCode code) { return static_cast<int>(code); }

std::string_view ErrorTypeFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return "validation";
    case absl::StatusCode::kNotFound:
      return "not_found";
    case absl::StatusCode::kResourceExhausted:
      return "overloaded";
    case absl::StatusCode::kUnavailable:
      return "unhealthy";
    case absl::StatusCode::kDeadlineExceeded:
      return "timeout";
    case absl::StatusCode::kUnauthenticated:
      return "unauthorized";
    case absl::StatusCode::kPermissionDenied:
      return "forbidden";
    case absl::StatusCode::kUnimplemented:
      return "unimplemented";
    case absl::StatusCode::kCancelled:
      return "cancelled";
    default:
      return "backend";
  }
}

std::string ErrorBody(const absl::Status& status) {
  nlohmann::json body = nlohmann::json::object();
  const absl::string_view message = status.message();
  body["error"] = EchoForError(std::string_view(message.data(), message.size()), kMaxErrorMessageBytes);
  body["error_type"] = std::string(ErrorTypeFor(status.code()));
  // Messages may quote client bytes; replace invalid UTF-8 instead of throwing.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tide::api
