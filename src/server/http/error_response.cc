#include "server/http/error_response.h"

#include <nlohmann/json.hpp>

#include "common/error_echo.h"

namespace tide::http {

std::string ErrorJsonBody(std::string_view error_type, std::string_view message) {
  nlohmann::json body = nlohmann::json::object();
  body["error"] = EchoForError(message, kMaxErrorMessageBytes);
  body["error_type"] = std::string(error_type);
  // Messages may quote client bytes; replace invalid UTF-8 instead of throwing.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Response ErrorResponse(const absl::Status& status) {
  const ErrorFacts facts = FactsOf(status);
  Response response;
  response.status = facts.info->http_status;
  response.body = ErrorJsonBody(facts.info->error_type, facts.message);
  if (facts.retry_after_ms.has_value()) {
    response.headers.emplace_back("Retry-After", std::to_string(RetryAfterSeconds(*facts.retry_after_ms)));
  }
  if (!facts.challenge.empty()) response.headers.emplace_back("WWW-Authenticate", std::string(facts.challenge));
  if (!facts.degraded.empty()) response.headers.emplace_back("x-tide-degraded", facts.degraded);
  return response;
}

Response JsonError(ErrorKind kind, std::string_view message) {
  return ErrorResponse(MakeError(kind, absl::string_view(message.data(), message.size())));
}

Response ServerErrorResponse(ErrorKind kind, std::string_view message) { return JsonError(kind, message); }

}  // namespace tide::http
