// tide::api status lookups — an error's HTTP status, gRPC code and TEI "error_type", read from the
// ONE table, tide::kErrorKinds (common/error.h), through the error's ErrorKind.
//
// Contract:
//  - Pure functions, thread-safe, never fail.
//  - The Status overloads use KindOf(status): the kind attached by tide::errors::* / MakeError /
//    WithKind / EnsureKind. A status without a kind (or OK) is counted as such (KindOf) and
//    answers as kInternal (500, INTERNAL, "backend"): there is no kind implied by an absl code.
//  - The one HTTP rendering of an error (body and headers) is http::ErrorResponse
//    (server/http/error_response.h); the gRPC one is grpc_edge::ToGrpcStatus/AddErrorTrailers.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "common/error.h"

namespace tide::api {

// HTTP status code for an error.
int HttpStatusFor(ErrorKind kind);
int HttpStatusFor(const absl::Status& status);

// gRPC status code (grpc::StatusCode / google.rpc.Code value) for an error.
int GrpcStatusFor(ErrorKind kind);
int GrpcStatusFor(const absl::Status& status);

// TEI-style error category: "validation", "empty", "not_found", "overloaded", "unhealthy",
// "timeout", "unauthorized", "forbidden", "unimplemented", "cancelled" or "backend".
std::string_view ErrorTypeFor(ErrorKind kind);
std::string_view ErrorTypeFor(const absl::Status& status);

}  // namespace tide::api
