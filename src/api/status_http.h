// tide::api status table — the ONE place that maps absl::StatusCode to an HTTP status, a gRPC
// status code, and TEI's "error_type"; plus the JSON error body every endpoint sends.
//
// Contract:
//  - Pure functions, thread-safe, never fail.
//  - Code conventions used across tide (parsers in src/api follow them):
//      InvalidArgument    -> 400  malformed request (JSON syntax, bad header value)
//      FailedPrecondition -> 422  well-formed but invalid (wrong type, missing/empty field,
//                                 limit exceeded, input too long with truncate=false)
//      OutOfRange         -> 422
//      NotFound           -> 404  Unauthenticated -> 401   PermissionDenied -> 403
//      ResourceExhausted  -> 429  Unavailable     -> 503   DeadlineExceeded -> 504
//      Unimplemented      -> 501  Cancelled       -> 499 (client closed request)
//      everything else    -> 500 (including Ok passed by mistake: there is no error body for Ok)
//  - gRPC codes are identical to absl codes by construction (absl mirrors google.rpc.Code).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace tide::api {

// HTTP status code for an error status.
int HttpStatusFor(absl::StatusCode code);

// gRPC status code (grpc::StatusCode value) for a status code: the identity.
int GrpcStatusFor(absl::StatusCode code);

// TEI-style error category: "validation", "not_found", "overloaded", "unhealthy", "timeout",
// "unauthorized", "forbidden", "unimplemented", "cancelled" or "backend".
std::string_view ErrorTypeFor(absl::StatusCode code);

// {"error":"<message>","error_type":"<type>"} — compact JSON, message escaped and cut at
// kMaxErrorMessageBytes (common/error_echo.h; a backstop: sites that quote client names cap each
// at kMaxEchoedBytes). Used by every endpoint of routes/service.cc. The HTTP layer's own errors
// (http::JsonError) use the same error_type per status (http::ErrorTypeForStatus).
std::string ErrorBody(const absl::Status& status);

}  // namespace tide::api
