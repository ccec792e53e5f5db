// tide::grpc_edge status rendering — the ONE gRPC rendering of an error: an absl::Status as the
// grpc::Status the gRPC edge answers and the trailing metadata that goes with it, from the error's
// facts (FactsOf, common/error.h: the kind's row of the one table and the status's payloads).
//
// Contract:
//  - ToGrpcStatus: the code is the kind's grpc_code (INVALID_ARGUMENT for 400 and 422,
//    UNAUTHENTICATED, NOT_FOUND, RESOURCE_EXHAUSTED for 413/429/431, UNAVAILABLE for 503,
//    DEADLINE_EXCEEDED, CANCELLED, UNIMPLEMENTED, INTERNAL); the message is the status's message.
//    OK maps to OK. A status without a kind answers INTERNAL and is counted (KindOf).
//  - AddErrorTrailers adds what an HTTP answer says in headers: the retry hint (the status's
//    RetryAfterMs, else the kind's: 1 s for overloaded and unavailable) as `retry-after` (whole
//    seconds, rounded up) and `grpc-retry-pushback-ms` (the hint gRPC's own retry policy reads),
//    `x-tide-error-type` (TEI's error_type), and `x-tide-degraded` (the Degraded payload). Call
//    before Finish.
//  - Thread-safe (pure) except that AddErrorTrailers writes to the context.
#pragma once

#include "absl/status/status.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace tide::grpc_edge {

grpc::Status ToGrpcStatus(const absl::Status& status);
void AddErrorTrailers(const absl::Status& status, grpc::CallbackServerContext* context);

}  // namespace tide::grpc_edge
