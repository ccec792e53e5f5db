// tide::ErrorKind — what went wrong, in the domain's words, carried on an absl::Status as a payload
// (Envoy's http/status.h does the same), and the ONE table that maps a kind to the HTTP status,
// the JSON `error_type`, the gRPC code and the kind's own answer facts (a retry hint, an auth
// challenge). Every edge answers the same mistake the same way.
//
// Contract:
//  - Make errors with the constructors below (tide::errors::InvalidInput("...") etc.): each sets
//    the absl code that matches the kind and attaches the kind as a payload.
//  - A status from a library (absl::*Error in config, tokenizer, runtime, ...) has no kind. It gets
//    one, chosen deliberately, where it enters serving: WithKind / EnsureKind at that boundary.
//    There is no kind implied by an absl code.
//  - KindOf(status) reads the payload. A status without one (or an OK status) that is asked for its
//    kind is a bug: it is counted (ErrorsWithoutKind(), tide_errors_without_kind_total through
//    SetErrorWithoutKindHook) and answers kInternal; production keeps serving. Tests assert the count.
//  - Facts an answer carries besides its kind are typed payloads: RetryAfterMs (a quota's wait),
//    Degraded (a model that could not answer, no fallback), KeyName (the access log's key).
//    FactsOf(status) gathers them with the kind's row; each edge renders FactsOf once
//    (server/http/error_response.h, server/grpc/grpc_status.h).
//  - Info(kind) is the table row: constexpr, thread-safe, never fails. KindOf/FactsOf are
//    thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace tide {

enum class ErrorKind {
  kMalformedRequest,  // syntax: JSON syntax, a bad header value, refused HTTP framing
  kInvalidInput,      // well-formed but invalid: wrong type, missing or empty field, a limit
                      // exceeded, an input too long with truncate=false, a value out of range
  kEmpty,             // an empty batch (no texts, documents or inputs): TEI's `Empty` error type
  kUnauthenticated,   // missing or wrong API key
  kForbidden,         // authenticated but not allowed
  kNotFound,          // unknown model, version or path
  kMethodNotAllowed,  // wrong method for a known path
  kRequestTimeout,    // the client was too slow sending its request (slowloris)
  kPayloadTooLarge,   // a body (or one request's estimated memory) over its limit
  kHeadersTooLarge,   // request line + headers over their limit
  kUnsupportedMediaType,  // a Content-Type the route does not take (admin routes: application/json only)
  kOverloaded,        // an edge limit: concurrency, in-flight bytes, a quota (retry soon)
  kUnavailable,       // not ready, draining, queue full, breaker open without fallback
  kDeadlineExceeded,  // the request's deadline passed
  kCancelled,         // the client went away
  kUnimplemented,     // a feature tide does not offer (e.g. a transfer coding)
  kModelUnsupported,  // the model cannot answer this call (TEI's 424: /embed_all on a model
                      // without token states)
  kBackend,           // the inference engine failed (its text goes to the log, not the client)
  kInternal,          // a bug
};

// One row of the table.
struct ErrorKindInfo {
  ErrorKind kind;
  std::string_view name;        // stable identifier, also the payload value
  absl::StatusCode code;        // the absl code statuses of this kind carry
  int http_status;              // HTTP status answered
  std::string_view error_type;  // JSON "error_type" (TEI's categories, lower-case)
  int grpc_code;                // grpc::StatusCode value answered on the gRPC edge
  int64_t retry_after_ms;       // the retry hint when the status carries none (0: no hint):
                                // HTTP Retry-After, gRPC retry-after / grpc-retry-pushback-ms
  std::string_view challenge;   // HTTP WWW-Authenticate on this kind ("" = none)
};

// The table. gRPC codes are google.rpc.Code values (OK 0, CANCELLED 1, INVALID_ARGUMENT 3,
// DEADLINE_EXCEEDED 4, NOT_FOUND 5, PERMISSION_DENIED 7, RESOURCE_EXHAUSTED 8, UNIMPLEMENTED 12,
// INTERNAL 13, UNAVAILABLE 14, UNAUTHENTICATED 16). Overload and unavailability are short-lived:
// their default retry hint is 1 s.
inline constexpr std::array<ErrorKindInfo, 19> kErrorKinds = {{
    {ErrorKind::kMalformedRequest, "malformed_request", absl::StatusCode::kInvalidArgument, 400, "validation", 3, 0, ""},
    {ErrorKind::kInvalidInput, "invalid_input", absl::StatusCode::kFailedPrecondition, 422, "validation", 3, 0, ""},
    {ErrorKind::kEmpty, "empty", absl::StatusCode::kInvalidArgument, 400, "empty", 3, 0, ""},
    {ErrorKind::kUnauthenticated, "unauthenticated", absl::StatusCode::kUnauthenticated, 401, "unauthorized", 16, 0, "Bearer"},
    {ErrorKind::kForbidden, "forbidden", absl::StatusCode::kPermissionDenied, 403, "forbidden", 7, 0, ""},
    {ErrorKind::kNotFound, "not_found", absl::StatusCode::kNotFound, 404, "not_found", 5, 0, ""},
    {ErrorKind::kMethodNotAllowed, "method_not_allowed", absl::StatusCode::kUnimplemented, 405, "validation", 12, 0, ""},
    {ErrorKind::kRequestTimeout, "request_timeout", absl::StatusCode::kDeadlineExceeded, 408, "timeout", 4, 0, ""},
    {ErrorKind::kPayloadTooLarge, "payload_too_large", absl::StatusCode::kResourceExhausted, 413, "validation", 8, 0, ""},
    {ErrorKind::kHeadersTooLarge, "headers_too_large", absl::StatusCode::kResourceExhausted, 431, "validation", 8, 0, ""},
    {ErrorKind::kUnsupportedMediaType, "unsupported_media_type", absl::StatusCode::kInvalidArgument, 415, "validation", 3, 0, ""},
    {ErrorKind::kOverloaded, "overloaded", absl::StatusCode::kResourceExhausted, 429, "overloaded", 8, 1000, ""},
    {ErrorKind::kUnavailable, "unavailable", absl::StatusCode::kUnavailable, 503, "unhealthy", 14, 1000, ""},
    {ErrorKind::kDeadlineExceeded, "deadline_exceeded", absl::StatusCode::kDeadlineExceeded, 504, "timeout", 4, 0, ""},
    {ErrorKind::kCancelled, "cancelled", absl::StatusCode::kCancelled, 499, "cancelled", 1, 0, ""},
    {ErrorKind::kUnimplemented, "unimplemented", absl::StatusCode::kUnimplemented, 501, "unimplemented", 12, 0, ""},
    {ErrorKind::kModelUnsupported, "model_unsupported", absl::StatusCode::kFailedPrecondition, 424, "backend", 9, 0, ""},
    {ErrorKind::kBackend, "backend", absl::StatusCode::kInternal, 500, "backend", 13, 0, ""},
    {ErrorKind::kInternal, "internal", absl::StatusCode::kInternal, 500, "backend", 13, 0, ""},
}};

// Rows are in enum order, one per kind (so Info is an index; error_test.cc walks them).
constexpr bool ErrorKindRowsInEnumOrder() {
  for (std::size_t i = 0; i < kErrorKinds.size(); ++i) {
    if (static_cast<std::size_t>(kErrorKinds[i].kind) != i) return false;
  }
  return static_cast<std::size_t>(ErrorKind::kInternal) + 1 == kErrorKinds.size();
}
static_assert(ErrorKindRowsInEnumOrder(), "kErrorKinds: one row per ErrorKind, in enum order");

constexpr const ErrorKindInfo& Info(ErrorKind kind) {
  return kErrorKinds[static_cast<std::size_t>(kind)];
}

// The payload's type URL on absl::Status.
inline constexpr absl::string_view kErrorKindPayloadUrl = "type.tide.dev/ErrorKind";

// The kind `status` carries; nullopt for OK, for a status from a library that no boundary gave a
// kind, and for a payload naming no kind (another version, garbage). Pure.
std::optional<ErrorKind> FindKind(const absl::Status& status);

// The kind of `status`. Without one (FindKind is nullopt): counted as an error without a kind
// (ErrorsWithoutKind, the hook) and answered as kInternal. Edges render through this.
ErrorKind KindOf(const absl::Status& status);

// Errors without a kind asked for their kind in this process (KindOf), for tests and the metric.
uint64_t ErrorsWithoutKind();
// Called (after counting) for each of them, e.g. to count tide_errors_without_kind_total and log
// the status; nullptr removes it. Set once at start; the hook must be thread-safe.
using ErrorWithoutKindHook = void (*)(const absl::Status& status);
void SetErrorWithoutKindHook(ErrorWithoutKindHook hook);

// A status of `kind` with `message`.
absl::Status MakeError(ErrorKind kind, absl::string_view message);

// `status` with its kind replaced by `kind` (message, code and other payloads kept). OK stays OK.
absl::Status WithKind(absl::Status status, ErrorKind kind);

// A boundary where library statuses enter serving: `status` with `kind` unless it carries a kind
// already (a tide error passed through keeps its own). OK stays OK.
absl::Status EnsureKind(absl::Status status, ErrorKind kind);
template <typename T>
absl::StatusOr<T> EnsureKind(absl::StatusOr<T> value, ErrorKind kind) {
  if (value.ok()) return value;
  return EnsureKind(std::move(value).status(), kind);
}

// How long a refused client should wait before retrying (a quota's token bucket), carried on the
// status as a payload; it overrides the kind's default hint (ErrorKindInfo::retry_after_ms).
inline constexpr absl::string_view kRetryAfterPayloadUrl = "type.tide.dev/RetryAfterMs";
absl::Status WithRetryAfter(absl::Status status, int64_t milliseconds);
std::optional<int64_t> RetryAfterMs(const absl::Status& status);

// A degraded answer: what could not answer normally ("unavailable": the model could not answer
// and it has no fallback), carried as a payload; edges render it as `x-tide-degraded`.
inline constexpr absl::string_view kDegradedPayloadUrl = "tide.dev/degraded";
absl::Status WithDegraded(absl::Status status, absl::string_view what);
std::string DegradedOf(const absl::Status& status);  // "" when not degraded

// The API key's name (never the key) a refusal belongs to (a key over its quota), carried on the
// status as a payload for the access log; the call that would know it was never admitted.
inline constexpr absl::string_view kKeyNamePayloadUrl = "type.tide.dev/KeyName";
absl::Status WithKeyName(absl::Status status, absl::string_view name);
std::string KeyNameOf(const absl::Status& status);

// Everything an edge renders for an error, protocol-neutral: the kind's row and the payloads.
struct ErrorFacts {
  const ErrorKindInfo* info;             // never null (kInternal for a status without a kind)
  std::string message;                   // the status's message (edges cap what they echo)
  std::optional<int64_t> retry_after_ms; // RetryAfterMs, else the kind's hint (nullopt: none)
  std::string_view challenge;            // the kind's auth challenge ("" = none)
  std::string degraded;                  // DegradedOf ("" = not degraded)
};
ErrorFacts FactsOf(const absl::Status& status);

// A retry hint in whole seconds, rounded up, at least 1 (HTTP Retry-After, gRPC retry-after).
int64_t RetryAfterSeconds(int64_t milliseconds);

namespace errors {
inline absl::Status MalformedRequest(absl::string_view m) { return MakeError(ErrorKind::kMalformedRequest, m); }
inline absl::Status InvalidInput(absl::string_view m) { return MakeError(ErrorKind::kInvalidInput, m); }
inline absl::Status Empty(absl::string_view m) { return MakeError(ErrorKind::kEmpty, m); }
inline absl::Status Unauthenticated(absl::string_view m) { return MakeError(ErrorKind::kUnauthenticated, m); }
inline absl::Status Forbidden(absl::string_view m) { return MakeError(ErrorKind::kForbidden, m); }
inline absl::Status UnsupportedMediaType(absl::string_view m) { return MakeError(ErrorKind::kUnsupportedMediaType, m); }
inline absl::Status NotFound(absl::string_view m) { return MakeError(ErrorKind::kNotFound, m); }
inline absl::Status MethodNotAllowed(absl::string_view m) { return MakeError(ErrorKind::kMethodNotAllowed, m); }
inline absl::Status RequestTimeout(absl::string_view m) { return MakeError(ErrorKind::kRequestTimeout, m); }
inline absl::Status PayloadTooLarge(absl::string_view m) { return MakeError(ErrorKind::kPayloadTooLarge, m); }
inline absl::Status HeadersTooLarge(absl::string_view m) { return MakeError(ErrorKind::kHeadersTooLarge, m); }
inline absl::Status Overloaded(absl::string_view m) { return MakeError(ErrorKind::kOverloaded, m); }
inline absl::Status Unavailable(absl::string_view m) { return MakeError(ErrorKind::kUnavailable, m); }
inline absl::Status DeadlineExceeded(absl::string_view m) { return MakeError(ErrorKind::kDeadlineExceeded, m); }
inline absl::Status Cancelled(absl::string_view m) { return MakeError(ErrorKind::kCancelled, m); }
inline absl::Status Unimplemented(absl::string_view m) { return MakeError(ErrorKind::kUnimplemented, m); }
inline absl::Status Backend(absl::string_view m) { return MakeError(ErrorKind::kBackend, m); }
inline absl::Status ModelUnsupported(absl::string_view m) { return MakeError(ErrorKind::kModelUnsupported, m); }
inline absl::Status Internal(absl::string_view m) { return MakeError(ErrorKind::kInternal, m); }
}  // namespace errors

}  // namespace tide
