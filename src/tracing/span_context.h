// tide::tracing ids and SpanContext: what identifies a span across processes (W3C Trace Context's
// trace-id, parent-id, trace-flags and tracestate), and the generator of new ids.
//
// Contract:
//  - TraceId is 16 bytes, SpanId 8 bytes; an id of all zero bytes is invalid (never generated).
//  - SpanContext::IsValid(): both ids valid. `remote` is true for a context read from a request
//    (traceparent), false for one this process created.
//  - ToHex() writes lowercase hex (32 / 16 characters); IdFromHex accepts lowercase hex of the exact
//    length only (W3C: uppercase is invalid) and returns nullopt otherwise.
//  - IdGenerator: NewTraceId()/NewSpanId() are thread-safe and cheap: each thread draws from its own
//    xoshiro256** state, seeded once per thread from std::random_device mixed with the thread and
//    the time (not a random_device read per id). Ids are random in all bytes (W3C's "random" flag
//    is not set by tide, so nothing relies on it) and never all zero.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tide::tracing {

using TraceId = std::array<uint8_t, 16>;
using SpanId = std::array<uint8_t, 8>;

inline constexpr uint8_t kTraceFlagSampled = 0x01;

bool IsValid(const TraceId& id);
bool IsValid(const SpanId& id);
std::string ToHex(const TraceId& id);
std::string ToHex(const SpanId& id);
std::optional<TraceId> TraceIdFromHex(std::string_view hex);
std::optional<SpanId> SpanIdFromHex(std::string_view hex);

struct SpanContext {
  TraceId trace_id{};
  SpanId span_id{};
  uint8_t trace_flags = 0;
  std::string trace_state;  // the W3C tracestate header value, already validated ("" when none)
  bool remote = false;

  bool IsValid() const { return tracing::IsValid(trace_id) && tracing::IsValid(span_id); }
  bool sampled() const { return (trace_flags & kTraceFlagSampled) != 0; }
  friend bool operator==(const SpanContext&, const SpanContext&) = default;
};

class IdGenerator {
 public:
  static TraceId NewTraceId();
  static SpanId NewSpanId();
  // The next 64 random bits of this thread's generator (also used for backoff jitter).
  static uint64_t Next64();
};

}  // namespace tide::tracing
