// tide::tracing SpanExporter: sends one batch of ended spans somewhere (OTLP/HTTP, OTLP/gRPC, a fake
// in tests). The BatchSpanProcessor calls it from its one background thread and owns retrying.
//
// Contract:
//  - Export(spans, timeout) makes one attempt and returns within about `timeout` (it bounds the
//    connection, the write and the wait for the answer).
//  - The result says ok, a retryable failure (the OTLP spec's: HTTP 429/502/503/504, gRPC
//    UNAVAILABLE, RESOURCE_EXHAUSTED, ..., connection errors and timeouts), or a permanent one; a
//    receiver's retry delay (HTTP Retry-After in seconds) comes back in retry_after.
//  - Called from one thread at a time; need not be thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "tracing/span_data.h"

namespace tide::tracing {

struct ExportResult {
  enum class Code { kOk, kRetryable, kFailed };
  Code code = Code::kOk;
  std::string message;  // what failed (status, error), for a log line
  std::optional<std::chrono::milliseconds> retry_after;

  static ExportResult Ok() { return {}; }
  static ExportResult Retryable(std::string message, std::optional<std::chrono::milliseconds> after = {}) {
    return {Code::kRetryable, std::move(message), after};
  }
  static ExportResult Failed(std::string message) { return {Code::kFailed, std::move(message), {}}; }
  bool ok() const { return code == Code::kOk; }
};

class SpanExporter {
 public:
  virtual ~SpanExporter() = default;
  virtual ExportResult Export(const std::vector<SpanData>& spans, std::chrono::milliseconds timeout) = 0;
};

}  // namespace tide::tracing
