// tide::tracing OTLP encoding: ended spans → the OTLP ExportTraceServiceRequest both exporters send,
// and the resource that describes this process.
//
// Contract:
//  - MakeResource: telemetry.sdk.name "tide", telemetry.sdk.language "cpp", telemetry.sdk.version
//    (tide's version), then the attributes of OTEL_RESOURCE_ATTRIBUTES (key_value_list.h), which
//    override those, then service.name: the given service name when not empty (OTEL_SERVICE_NAME
//    wins), else service.name from the attributes, else "tide". Each key once.
//  - EncodeExportRequest: one ResourceSpans with the resource, one ScopeSpans with scope "tide" and
//    tide's version, and one Span per SpanData in order, every field carried: ids as raw bytes
//    (parent empty for a root), tracestate, flags (W3C trace flags in bits 0-7; for a span with a
//    parent and for each link, bit 8 set and bit 9 = the context is remote), kind, times, attributes,
//    events, links and status with their dropped counts.
#pragma once

#include <string_view>
#include <vector>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"
#include "tracing/span_data.h"

namespace tide::tracing {

struct Resource {
  std::vector<Attribute> attributes;
};

Resource MakeResource(std::string_view service_name, const std::vector<Attribute>& attributes);

void EncodeExportRequest(const std::vector<SpanData>& spans, const Resource& resource,
                         opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest* request);

}  // namespace tide::tracing
