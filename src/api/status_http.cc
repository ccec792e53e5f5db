#include "api/status_http.h"

#include <nlohmann/json.hpp>

#include "common/error_echo.h"

namespace tide::api {

int HttpStatusFor(ErrorKind kind) { return Info(kind).http_status; }
int HttpStatusFor(const absl::Status& status) { return HttpStatusFor(KindOf(status)); }
int HttpStatusFor(absl::StatusCode code) { return HttpStatusFor(KindForCode(code)); }

int GrpcStatusFor(ErrorKind kind) { return Info(kind).grpc_code; }
int GrpcStatusFor(const absl::Status& status) { return GrpcStatusFor(KindOf(status)); }
int GrpcStatusFor(absl::StatusCode code) { return GrpcStatusFor(KindForCode(code)); }

std::string_view ErrorTypeFor(ErrorKind kind) { return Info(kind).error_type; }
std::string_view ErrorTypeFor(const absl::Status& status) { return ErrorTypeFor(KindOf(status)); }
std::string_view ErrorTypeFor(absl::StatusCode code) { return ErrorTypeFor(KindForCode(code)); }

std::string ErrorBody(const absl::Status& status) {
  nlohmann::json body = nlohmann::json::object();
  const absl::string_view message = status.message();
  body["error"] = EchoForError(std::string_view(message.data(), message.size()), kMaxErrorMessageBytes);
  body["error_type"] = std::string(ErrorTypeFor(status));
  // Messages may quote client bytes; replace invalid UTF-8 instead of throwing.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tide::api
