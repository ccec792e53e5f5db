// Helpers shared by tide's routes: error responses, per-request admission (deadline, priority,
// cancellation), stage-timing headers, and the request metrics recorded when a response is sent.
//
// Contract: stateless helpers; thread-safe. ResponseSender is move-only and sends at most once.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "guard/concurrency_limiter.h"
#include "server/http/http_server.h"
#include "serving/inference_request.h"
#include "serving/serving_metrics.h"

namespace tide::server {

// {"error": ..., "error_type": ...} with the status from api::HttpStatusFor; Retry-After: 1 on
// 429 and 503 (overload and drain are short-lived); `x-tide-degraded: unavailable` for
// serving::DegradedUnavailableError.
http::Response ErrorResponse(const absl::Status& status);

// Deadline, priority and cancellation of a request:
//  - timeout: header `x-timeout-ms` (milliseconds) or `timeout_us` (KServe's "timeout" parameter,
//    microseconds); it may only shorten `default_timeout` (zero = none): a longer one, however
//    large (up to INT64_MAX), gets the default. With no default, a timeout whose deadline the
//    steady clock cannot represent (beyond about 292 years) means no deadline. Arithmetic
//    saturates, so no value overflows into a deadline in the past;
//  - priority: header `x-priority` or KServe's "priority" parameter (1 = highest);
//  - the HTTP server's client_gone flag, so a task whose client left is dropped unrun.
// INVALID_ARGUMENT for a malformed or non-positive header (400); FAILED_PRECONDITION for a
// non-positive KServe timeout (422).
absl::StatusOr<serving::RowTask::Admission> MakeAdmission(const http::Request& request,
                                                          std::chrono::milliseconds default_timeout,
                                                          std::optional<int64_t> timeout_us = std::nullopt,
                                                          std::optional<int64_t> priority = std::nullopt);

// TEI's x-tokenization-time, x-queue-time, x-inference-time, x-total-time (whole milliseconds, as TEI
// sends them) plus a W3C Server-Timing header with fractional milliseconds.
void AddTimingHeaders(const serving::StageTimings& timings, http::Response* response);

// Sends a response once and records tide_requests_total / tide_request_duration_seconds (and the
// stage histograms when timings are given) for (model, endpoint).
class ResponseSender {
 public:
  ResponseSender(http::Responder respond, serving::ServingMetrics* metrics, std::string endpoint,
                 std::chrono::steady_clock::time_point received_at)
      : respond_(std::move(respond)), metrics_(metrics), endpoint_(std::move(endpoint)), received_at_(received_at) {}
  ResponseSender(ResponseSender&&) = default;
  ResponseSender& operator=(ResponseSender&&) = default;

  // The model version that answers (metrics are labelled by model and version; both stay "" for
  // requests answered before a model is chosen).
  void set_model(std::string model, int64_t version) {
    model_ = std::move(model);
    version_ = std::to_string(version);
  }
  // Holds a concurrency permit until the response is sent (released just before it is handed to the
  // connection) or the sender destroyed.
  void hold(guard::ConcurrencyLimiter::Permit permit) { permit_.emplace(std::move(permit)); }
  const std::chrono::steady_clock::time_point& received_at() const { return received_at_; }
  void Send(http::Response response, const serving::StageTimings* timings = nullptr);
  void SendError(const absl::Status& status) { Send(ErrorResponse(status)); }

 private:
  http::Responder respond_;
  serving::ServingMetrics* metrics_;
  std::string endpoint_;
  std::string model_;
  std::string version_;
  std::chrono::steady_clock::time_point received_at_;
  std::optional<guard::ConcurrencyLimiter::Permit> permit_;
};

// The API key check (--api-key): true when `api_key` is empty or the request's
// `Authorization: Bearer <key>` carries it; otherwise sends 401 {"error_type":"unauthorized"} with
// `WWW-Authenticate: Bearer` through `sender` and returns false.
bool CheckApiKey(const http::Request& request, std::string_view api_key, ResponseSender* sender);

}  // namespace tide::server
