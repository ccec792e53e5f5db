// tide::http error responses — the JSON body {"error": ..., "error_type": ...} of an error, and the
// server's own answers (framing, limits, timeouts, the connection cap, a dropped Responder).
//
// Contract:
//  - Pure; thread-safe; never throws. A message longer than kMaxErrorMessageBytes
//    (common/error_echo.h) is cut there; invalid UTF-8 is replaced, never rejected.
//  - ServerErrorResponse is the one function the HTTP layer renders its own errors with: every
//    answer the server gives without a Handler goes through it, so how such an answer looks
//    (body, error_type, Retry-After) is decided here and nowhere else.
#pragma once

#include <string_view>

#include "common/error.h"
#include "server/http/http_message.h"

namespace tide::http {

// A JSON error response {"error": message, "error_type": ErrorTypeForStatus(status)} with
// `status`.
Response JsonError(int status, std::string_view message);
// The same with the HTTP status and error_type of `kind` (tide::kErrorKinds, common/error.h).
Response JsonError(ErrorKind kind, std::string_view message);

// The error_type of an error answered with HTTP `status`, from the one table (tide::kErrorKinds):
// the error_type of the first kind answered with `status` (so 400, 405, 413, 422, 431
// "validation", 401 "unauthorized", 403 "forbidden", 404 "not_found", 408 and 504 "timeout",
// 429 "overloaded", 499 "cancelled", 501 "unimplemented", 503 "unhealthy", 500 "backend");
// a status no kind uses: other 4xx "validation", anything else "backend".
std::string_view ErrorTypeForStatus(int status);

// The server's own answer for an error of `kind`: JsonError(kind, message), and for kUnavailable
// (the connection cap) `Retry-After: 1`.
Response ServerErrorResponse(ErrorKind kind, std::string_view message);

}  // namespace tide::http
