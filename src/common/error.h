// tide::ErrorKind — what went wrong, in the domain's words, carried on an absl::Status as a payload
// (Envoy's http/status.h does the same), and the ONE table that maps a kind to the HTTP status,
// the JSON `error_type` and the gRPC code. Every edge answers the same mistake the same way.
//
// Contract:
//  - Make errors with the constructors below (tide::errors::InvalidInput("...") etc.): each sets
//    the absl code that matches the kind and attaches the kind as a payload.
//  - KindOf(status) reads the payload; a status made elsewhere (absl::InvalidArgumentError, an
//    error from a library) has no payload and gets the kind its absl code implies
//    (KindForCode), so existing code keeps its answers while call sites move to explicit kinds.
//  - Info(kind) is the table row. Header-only, constexpr, thread-safe, never fails.
#pragma once

#include <array>
#include <cstdint>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
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
};

// The table. gRPC codes are google.rpc.Code values (OK 0, CANCELLED 1, INVALID_ARGUMENT 3,
// DEADLINE_EXCEEDED 4, NOT_FOUND 5, PERMISSION_DENIED 7, RESOURCE_EXHAUSTED 8, UNIMPLEMENTED 12,
// INTERNAL 13, UNAVAILABLE 14, UNAUTHENTICATED 16).
inline constexpr std::array<ErrorKindInfo, 18> kErrorKinds = {{
    {ErrorKind::kMalformedRequest, "malformed_request", absl::StatusCode::kInvalidArgument, 400, "validation", 3},
    {ErrorKind::kInvalidInput, "invalid_input", absl::StatusCode::kFailedPrecondition, 422, "validation", 3},
    {ErrorKind::kEmpty, "empty", absl::StatusCode::kInvalidArgument, 400, "empty", 3},
    {ErrorKind::kUnauthenticated, "unauthenticated", absl::StatusCode::kUnauthenticated, 401, "unauthorized", 16},
    {ErrorKind::kForbidden, "forbidden", absl::StatusCode::kPermissionDenied, 403, "forbidden", 7},
    {ErrorKind::kNotFound, "not_found", absl::StatusCode::kNotFound, 404, "not_found", 5},
    {ErrorKind::kMethodNotAllowed, "method_not_allowed", absl::StatusCode::kUnimplemented, 405, "validation", 12},
    {ErrorKind::kRequestTimeout, "request_timeout", absl::StatusCode::kDeadlineExceeded, 408, "timeout", 4},
    {ErrorKind::kPayloadTooLarge, "payload_too_large", absl::StatusCode::kResourceExhausted, 413, "validation", 8},
    {ErrorKind::kHeadersTooLarge, "headers_too_large", absl::StatusCode::kResourceExhausted, 431, "validation", 8},
    {ErrorKind::kUnsupportedMediaType, "unsupported_media_type", absl::StatusCode::kInvalidArgument, 415, "validation", 3},
    {ErrorKind::kOverloaded, "overloaded", absl::StatusCode::kResourceExhausted, 429, "overloaded", 8},
    {ErrorKind::kUnavailable, "unavailable", absl::StatusCode::kUnavailable, 503, "unhealthy", 14},
    {ErrorKind::kDeadlineExceeded, "deadline_exceeded", absl::StatusCode::kDeadlineExceeded, 504, "timeout", 4},
    {ErrorKind::kCancelled, "cancelled", absl::StatusCode::kCancelled, 499, "cancelled", 1},
    {ErrorKind::kUnimplemented, "unimplemented", absl::StatusCode::kUnimplemented, 501, "unimplemented", 12},
    {ErrorKind::kBackend, "backend", absl::StatusCode::kInternal, 500, "backend", 13},
    {ErrorKind::kInternal, "internal", absl::StatusCode::kInternal, 500, "backend", 13},
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

// The kind a status without a payload implies, from its absl code (the conventions tide used
// before kinds: InvalidArgument 400, FailedPrecondition/OutOfRange 422, ...).
constexpr ErrorKind KindForCode(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument: return ErrorKind::kMalformedRequest;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange: return ErrorKind::kInvalidInput;
    case absl::StatusCode::kUnauthenticated: return ErrorKind::kUnauthenticated;
    case absl::StatusCode::kPermissionDenied: return ErrorKind::kForbidden;
    case absl::StatusCode::kNotFound: return ErrorKind::kNotFound;
    case absl::StatusCode::kResourceExhausted: return ErrorKind::kOverloaded;
    case absl::StatusCode::kUnavailable: return ErrorKind::kUnavailable;
    case absl::StatusCode::kDeadlineExceeded: return ErrorKind::kDeadlineExceeded;
    case absl::StatusCode::kCancelled: return ErrorKind::kCancelled;
    case absl::StatusCode::kUnimplemented: return ErrorKind::kUnimplemented;
    default: return ErrorKind::kInternal;
  }
}

// The kind of `status` (its payload, else KindForCode). An OK status has no kind: kInternal.
inline ErrorKind KindOf(const absl::Status& status) {
  if (auto payload = status.GetPayload(kErrorKindPayloadUrl); payload.has_value()) {
    const std::string name(*payload);
    for (const ErrorKindInfo& info : kErrorKinds) {
      if (info.name == name) return info.kind;
    }
  }
  return KindForCode(status.code());
}

// A status of `kind` with `message`.
inline absl::Status MakeError(ErrorKind kind, absl::string_view message) {
  const ErrorKindInfo& info = Info(kind);
  absl::Status status(info.code, message);
  status.SetPayload(kErrorKindPayloadUrl, absl::Cord(absl::string_view(info.name.data(), info.name.size())));
  return status;
}

// `status` with its kind replaced by `kind` (message and code kept).
inline absl::Status WithKind(absl::Status status, ErrorKind kind) {
  const ErrorKindInfo& info = Info(kind);
  status.SetPayload(kErrorKindPayloadUrl, absl::Cord(absl::string_view(info.name.data(), info.name.size())));
  return status;
}

// How long a refused client should wait before retrying (a quota's token bucket), carried on the
// status as a payload; edges render it (HTTP Retry-After in whole seconds, rounded up).
inline constexpr absl::string_view kRetryAfterPayloadUrl = "type.tide.dev/RetryAfterMs";

inline absl::Status WithRetryAfter(absl::Status status, int64_t milliseconds) {
  status.SetPayload(kRetryAfterPayloadUrl, absl::Cord(std::to_string(milliseconds)));
  return status;
}

// The API key's name (never the key) a refusal belongs to (a key over its quota), carried on the
// status as a payload for the access log; the call that would know it was never admitted.
inline constexpr absl::string_view kKeyNamePayloadUrl = "type.tide.dev/KeyName";

inline absl::Status WithKeyName(absl::Status status, absl::string_view name) {
  status.SetPayload(kKeyNamePayloadUrl, absl::Cord(name));
  return status;
}

inline std::string KeyNameOf(const absl::Status& status) {
  auto payload = status.GetPayload(kKeyNamePayloadUrl);
  return payload.has_value() ? std::string(*payload) : std::string();
}

inline std::optional<int64_t> RetryAfterMs(const absl::Status& status) {
  auto payload = status.GetPayload(kRetryAfterPayloadUrl);
  if (!payload.has_value()) return std::nullopt;
  const std::string text(*payload);
  int64_t ms = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    ms = ms * 10 + (c - '0');
  }
  return ms;
}

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
inline absl::Status Internal(absl::string_view m) { return MakeError(ErrorKind::kInternal, m); }
}  // namespace errors

}  // namespace tide
