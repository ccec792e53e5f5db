// tide::tracing OtlpGrpcExporter: OTLP/gRPC — TraceService/Export
// (opentelemetry.proto.collector.trace.v1) over an insecure grpc++ channel.
//
// Contract:
//  - The channel to `authority` ("host:port") is made once; each Export is one call with a deadline
//    of `timeout` and the configured headers as metadata (keys lowercased, as gRPC requires).
//  - OK → ok. The OTLP spec's retryable codes (CANCELLED, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED,
//    ABORTED, OUT_OF_RANGE, UNAVAILABLE, DATA_LOSS) → retryable; any other → failed, naming the code.
//    A receiver that is down is UNAVAILABLE (the call does not wait for the channel to be ready).
//  - Not thread-safe (the BatchSpanProcessor calls it from one thread). Only built with gRPC C++.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tracing/otlp_encoding.h"
#include "tracing/span_exporter.h"

namespace tide::tracing {

class OtlpGrpcExporter final : public SpanExporter {
 public:
  OtlpGrpcExporter(std::string authority, std::vector<std::pair<std::string, std::string>> headers,
                   Resource resource);
  ~OtlpGrpcExporter() override;

  ExportResult Export(const std::vector<SpanData>& spans, std::chrono::milliseconds timeout) override;

 private:
  struct Stub;
  std::string authority_;
  std::vector<std::pair<std::string, std::string>> headers_;
  Resource resource_;
  std::unique_ptr<Stub> stub_;
};

}  // namespace tide::tracing
