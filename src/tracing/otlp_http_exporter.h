// tide::tracing OtlpHttpExporter: OTLP/HTTP with protobuf bodies — POST the encoded
// ExportTraceServiceRequest to the traces URL (Content-Type: application/x-protobuf).
//
// Contract:
//  - One attempt per Export on a new plain-TCP connection (http:// only; https is not done), all of
//    it (resolve, connect, write, read) bounded by `timeout`. The configured headers
//    (OTEL_EXPORTER_OTLP_HEADERS) are sent with each request.
//  - 2xx → ok. 429, 502, 503, 504 → retryable, with Retry-After (delay-seconds) when the answer has
//    one. Connection errors and timeouts → retryable. Any other status → failed, the message naming
//    the status. Never throws.
//  - Not thread-safe (the BatchSpanProcessor calls it from one thread).
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "tracing/endpoint.h"
#include "tracing/otlp_encoding.h"
#include "tracing/span_exporter.h"

namespace tide::tracing {

class OtlpHttpExporter final : public SpanExporter {
 public:
  // `endpoint.path` is the full traces path ("/v1/traces" for a base endpoint).
  OtlpHttpExporter(Endpoint endpoint, std::vector<std::pair<std::string, std::string>> headers, Resource resource);

  ExportResult Export(const std::vector<SpanData>& spans, std::chrono::milliseconds timeout) override;

 private:
  Endpoint endpoint_;
  std::vector<std::pair<std::string, std::string>> headers_;
  Resource resource_;
};

}  // namespace tide::tracing
