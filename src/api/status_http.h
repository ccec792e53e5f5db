// tide::api status rendering — an error status as an HTTP status, a gRPC status code and TEI's
// "error_type", plus the JSON error body every endpoint sends. All of it reads the ONE table,
// tide::kErrorKinds (common/error.h), through the status's ErrorKind (KindOf).
//
// Contract:
//  - Pure functions, thread-safe, never fail.
//  - The Status overloads use KindOf(status): the kind attached by tide::errors::* / MakeError /
//    WithKind, else the kind the absl code implies (KindForCode: InvalidArgument 400,
//    FailedPrecondition and OutOfRange 422, ResourceExhausted 429, ...). Prefer them: only they
//    see kinds whose HTTP status the absl code alone cannot tell (405, 408, 413, 431).
//  - The absl::StatusCode overloads are KindForCode(code) looked up in the same table; they exist
//    so callers written before kinds keep compiling and keep their answers.
//  - An OK status passed by mistake answers as kInternal (500): there is no error body for OK.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/error.h"

namespace tide::api {

// HTTP status code for an error.
int HttpStatusFor(ErrorKind kind);
int HttpStatusFor(const absl::Status& status);
int HttpStatusFor(absl::StatusCode code);

// gRPC status code (grpc::StatusCode / google.rpc.Code value) for an error.
int GrpcStatusFor(ErrorKind kind);
int GrpcStatusFor(const absl::Status& status);
int GrpcStatusFor(absl::StatusCode code);

// TEI-style error category: "validation", "not_found", "overloaded", "unhealthy", "timeout",
// "unauthorized", "forbidden", "unimplemented", "cancelled" or "backend".
std::string_view ErrorTypeFor(ErrorKind kind);
std::string_view ErrorTypeFor(const absl::Status& status);
std::string_view ErrorTypeFor(absl::StatusCode code);

// {"error":"<message>","error_type":"<ErrorTypeFor(status)>"} — compact JSON, message escaped
// and cut at kMaxErrorMessageBytes (common/error_echo.h; a backstop: sites that quote client names
// cap each at kMaxEchoedBytes). Used by every endpoint of routes/service.cc. The HTTP layer's own
// errors (http::JsonError) take their error_type from the same table (http::ErrorTypeForStatus).
std::string ErrorBody(const absl::Status& status);

}  // namespace tide::api
