// tide::http error rendering — the ONE HTTP rendering of an error, used by the routes
// (server/routes) and by the HTTP server's own answers (framing, limits, a dropped request).
//
// Contract:
//  - ErrorResponse(status) renders FactsOf(status) (common/error.h): the kind's HTTP status, the
//    JSON body {"error": "<message>", "error_type": "<the kind's error_type>"} (compact; the message
//    cut at kMaxErrorMessageBytes, common/error_echo.h; invalid UTF-8 replaced), and the headers the
//    facts call for: Retry-After (the status's RetryAfterMs, else the kind's hint: 1 s for
//    overloaded and unavailable; whole seconds, rounded up), WWW-Authenticate (the kind's
//    challenge: Bearer on 401) and x-tide-degraded (the Degraded payload).
//  - A status without a kind renders as internal (500) and is counted (KindOf); OK is a bug too.
//  - JsonError(kind, message) is ErrorResponse of MakeError(kind, message).
//  - ServerErrorResponse(kind, message) is the one function the HTTP layer renders its own errors
//    with (framing, limits, timeouts, the connection cap, a dropped Responder): JsonError of the
//    kind, so such an answer looks like every other error of its kind (the connection cap's 503
//    carries the kind's Retry-After).
//  - Pure functions apart from KindOf's count; thread-safe; never fail.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/error.h"
#include "server/http/http_message.h"

namespace tide::http {

Response ErrorResponse(const absl::Status& status);
Response JsonError(ErrorKind kind, std::string_view message);

Response ServerErrorResponse(ErrorKind kind, std::string_view message);

// The JSON body alone: {"error": message, "error_type": error_type}.
std::string ErrorJsonBody(std::string_view error_type, std::string_view message);

}  // namespace tide::http
