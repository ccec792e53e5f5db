#include "server/http/error_response.h"

#include <string>

#include <nlohmann/json.hpp>

#include "common/error_echo.h"

namespace tide::http {
namespace {

Response JsonErrorOfType(int status, std::string_view error_type, std::string_view message) {
  Response response;
  response.status = status;
  nlohmann::json body = nlohmann::json::object();
  body["error"] = EchoForError(message, kMaxErrorMessageBytes);
  body["error_type"] = std::string(error_type);
  response.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return response;
}

}  // namespace

std::string_view ErrorTypeForStatus(int status) {
  // The first kind answered with `status` (500: kBackend, whose error_type kInternal shares).
  for (const ErrorKindInfo& info : kErrorKinds) {
    if (info.http_status == status) return info.error_type;
  }
  return status >= 400 && status < 500 ? Info(ErrorKind::kMalformedRequest).error_type
                                       : Info(ErrorKind::kInternal).error_type;
}

// The kind's own error_type (kEmpty shares 400 with kMalformedRequest but not its error_type).
Response JsonError(ErrorKind kind, std::string_view message) {
  return JsonErrorOfType(Info(kind).http_status, Info(kind).error_type, message);
}

Response JsonError(int status, std::string_view message) {
  return JsonErrorOfType(status, ErrorTypeForStatus(status), message);
}

Response ServerErrorResponse(ErrorKind kind, std::string_view message) {
  Response response = JsonError(kind, message);
  if (kind == ErrorKind::kUnavailable) response.headers.emplace_back("Retry-After", "1");
  return response;
}

}  // namespace tide::http
