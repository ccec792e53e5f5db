// tide::tracing SpanData: what one ended span recorded, handed from the Span to a SpanProcessor and
// on to an exporter; plain values, no behaviour.
//
// Contract:
//  - Attribute values are string, int64, double or bool (OTLP AnyValue's primitives).
//  - Limits (the OpenTelemetry SDK defaults): at most kMaxAttributes attributes per span, event and
//    link, kMaxEvents events and kMaxLinks links per span; what does not fit is dropped and counted
//    in the dropped_* fields, which the OTLP encoding carries.
//  - parent_span_id is all zero for a root span; parent_remote says the parent came from a request.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "tracing/span_context.h"

namespace tide::tracing {

inline constexpr size_t kMaxAttributes = 128;
inline constexpr size_t kMaxEvents = 128;
inline constexpr size_t kMaxLinks = 128;

using AttributeValue = std::variant<std::string, int64_t, double, bool>;

struct Attribute {
  std::string key;
  AttributeValue value;
  friend bool operator==(const Attribute&, const Attribute&) = default;
};

struct SpanEvent {
  std::string name;
  int64_t time_unix_nanos = 0;
  std::vector<Attribute> attributes;
  uint32_t dropped_attributes = 0;
};

struct SpanLink {
  SpanContext context;
  std::vector<Attribute> attributes;
  uint32_t dropped_attributes = 0;
};

enum class SpanKind { kInternal, kServer, kClient };
enum class StatusCode { kUnset, kOk, kError };

struct SpanData {
  SpanContext context;
  SpanId parent_span_id{};
  bool parent_remote = false;
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  int64_t start_unix_nanos = 0;
  int64_t end_unix_nanos = 0;
  std::vector<Attribute> attributes;
  uint32_t dropped_attributes = 0;
  std::vector<SpanEvent> events;
  uint32_t dropped_events = 0;
  std::vector<SpanLink> links;
  uint32_t dropped_links = 0;
  StatusCode status = StatusCode::kUnset;
  std::string status_message;  // only with kError
};

}  // namespace tide::tracing
