// tide::grpc_edge status mapping — an absl::Status as the grpc::Status the gRPC edge answers, from
// the ONE error table (common/error.h through api::GrpcStatusFor), plus the trailing metadata that
// goes with some answers.
//
// Contract:
//  - ToGrpcStatus: the code is api::GrpcStatusFor(status) (INVALID_ARGUMENT for 400 and 422,
//    UNAUTHENTICATED, NOT_FOUND, RESOURCE_EXHAUSTED for 413/429, UNAVAILABLE for 503,
//    DEADLINE_EXCEEDED, CANCELLED, UNIMPLEMENTED, INTERNAL); the message is the status's message.
//    OK maps to OK.
//  - AddErrorTrailers adds what an HTTP answer says in headers: `retry-after: 1` and
//    `grpc-retry-pushback-ms: 1000` (the hint gRPC's own retry policy reads) to RESOURCE_EXHAUSTED
//    and UNAVAILABLE answers, `x-tide-error-type` (TEI's error_type), and
//    `x-tide-degraded: unavailable` for serving::DegradedUnavailableError. Call before Finish.
//  - Thread-safe (pure) except that AddErrorTrailers writes to the context.
#pragma once

#include "absl/status/status.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace tide::grpc_edge {

grpc::Status ToGrpcStatus(const absl::Status& status);
void AddErrorTrailers(const absl::Status& status, grpc::CallbackServerContext* context);

}  // namespace tide::grpc_edge
