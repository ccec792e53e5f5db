// tide::tracing W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` and
// `tracestate` request headers (gRPC: metadata of the same names), parsed and written.
//
// Contract:
//  - ParseTraceparent: version 00 is exactly "00-<32 hex>-<16 hex>-<2 hex>" in lowercase hex;
//    a higher version (not "ff") is parsed by the spec's forward-compatible rules: at least 55
//    characters, the version-00 fields at the same places, and after them either the end or '-'.
//    Invalid: version "ff", uppercase or non-hex digits, wrong length or separators, an all-zero
//    trace-id or parent-id. Surrounding spaces/tabs (HTTP OWS) are ignored. Only the flags tide
//    knows (sampled 0x01, random 0x02) are kept, as the spec requires for unknown flags. The result
//    is `remote`. Malformed → nullopt.
//  - ParseTracestate: a comma-separated list of key=value members (OWS around members and empty
//    members allowed and dropped); keys are simple-key or tenant@system per the spec's grammar,
//    values 1-256 printable characters without ',' or '=' and not ending in a space; at most 32
//    members; no key twice. Any violation discards the whole header (nullopt). The result is the
//    canonical form (members joined by ',' without spaces; "" for an empty list).
//  - FormatTraceparent writes version 00 with the context's flags.
//  - Extract: the one entry point for a request. No traceparent → nullopt, nothing counted; a
//    malformed traceparent → nullopt and `malformed_traceparent` counted (the request starts a new
//    trace); a good traceparent with a malformed tracestate → the context without tracestate and
//    `malformed_tracestate` counted. Never throws, never fails the request.
//  - TraceContextCounters: lock-free, thread-safe; the lead exposes them on /metrics.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tracing/span_context.h"

namespace tide::tracing {

inline constexpr size_t kMaxTracestateMembers = 32;

std::optional<SpanContext> ParseTraceparent(std::string_view header);
std::optional<std::string> ParseTracestate(std::string_view header);
std::string FormatTraceparent(const SpanContext& context);

struct TraceContextCounters {
  std::atomic<uint64_t> malformed_traceparent{0};
  std::atomic<uint64_t> malformed_tracestate{0};
};

// `counters` may be null (nothing counted).
std::optional<SpanContext> Extract(std::optional<std::string_view> traceparent,
                                   std::optional<std::string_view> tracestate,
                                   TraceContextCounters* counters);

}  // namespace tide::tracing
