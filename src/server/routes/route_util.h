// Helpers shared by tide's routes: error responses, per-request admission (deadline, priority,
// cancellation), stage-timing headers, and the request metrics recorded when a response is sent.
//
// Contract: stateless helpers; thread-safe. ResponseSender is move-only and sends at most once.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/http/http_server.h"
#include "serving/call.h"
#include "serving/service_core.h"
#include "serving/inference_request.h"
#include "serving/serving_metrics.h"

namespace tide::server {

// The one HTTP rendering of an error (http::ErrorResponse, server/http/error_response.h): the
// kind's status and {"error": ..., "error_type": ...}; Retry-After from the status's RetryAfterMs
// (a quota's bucket) else the kind's hint (1 s on 429 and 503); WWW-Authenticate: Bearer on 401;
// `x-tide-degraded` from the Degraded payload.
http::Response ErrorResponse(const absl::Status& status);

// A JSON answer (the server's default content type) with `status`.
http::Response JsonResponse(std::string body, int status = 200);

// What the service core needs of a request before its body is read (serving/call.h): the
// Authorization header, the body size, the receive time, the client_gone flag, and the call's own
// timeout and priority from `x-timeout-ms` (milliseconds) and `x-priority` (1 = highest), and
// `Cache-Control: no-cache` / `no-store` (the score cache is not read), and a lookup of any header
// (a rollout's sticky_header), valid while `request` lives.
// MALFORMED_REQUEST (400) for a header value that is not an integer; the range checks (a timeout
// <= 0, a negative priority: 422) are the core's, the same for every edge.
absl::StatusOr<serving::CallInfo> CallInfoFor(const http::Request& request);

// The core's text inputs of parsed TEI inputs (api::TokenizeInput, api::PredictInput: a text and an
// optional text_pair); views into `inputs`.
template <typename Input>
std::vector<serving::TextInput> TextInputsOf(const std::vector<Input>& inputs) {
  std::vector<serving::TextInput> out;
  out.reserve(inputs.size());
  for (const Input& in : inputs) {
    serving::TextInput t{in.text, std::nullopt};
    if (in.text_pair.has_value()) t.text_pair = *in.text_pair;
    out.push_back(t);
  }
  return out;
}

// TEI's x-tokenization-time, x-queue-time, x-inference-time, x-total-time (whole milliseconds, as TEI
// sends them) plus a W3C Server-Timing header with fractional milliseconds.
void AddTimingHeaders(const serving::StageTimings& timings, http::Response* response);

// Sends a response once and records tide_requests_total / tide_request_duration_seconds (and the
// stage histograms when timings are given) for (model, version, endpoint). Once a model version is
// chosen (set_model), the response names it in `x-tide-model-version`. With an access log
// (set_access_log), it also hands the log one record (serving/access_log.h: never blocks) and
// answers `x-request-id`: the request's own, else the one tide made.
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
  // Holds the admitted call (its concurrency permit and memory lease) until the response is sent:
  // the permit is released just before the response is handed to the connection.
  void hold(serving::CallPtr call) { call_ = std::move(call); }
  // `log` may be null (no access log); `request_id` names the request in the log and the answer.
  void set_access_log(serving::AccessLog* log, std::string request_id) {
    access_log_ = log;
    request_id_ = std::move(request_id);
  }
  const std::chrono::steady_clock::time_point& received_at() const { return received_at_; }
  void Send(http::Response response, const serving::StageTimings* timings = nullptr);
  // A model's answer: a fallback's (`fallback` set) marked `x-tide-degraded: <fallback>` without
  // timing headers; the model's with the timing headers of `timings`, whose postprocess runs from
  // `post` and total from the request's arrival.
  void SendAnswer(http::Response response, serving::StageTimings timings, std::chrono::steady_clock::time_point post,
                  const char* fallback);
  void SendError(const absl::Status& status);

 private:
  void Log(const http::Response& response, double seconds, const serving::StageTimings* timings);

  http::Responder respond_;
  serving::ServingMetrics* metrics_;
  std::string endpoint_;
  std::string model_;
  std::string version_;
  std::chrono::steady_clock::time_point received_at_;
  serving::CallPtr call_;
  serving::AccessLog* access_log_ = nullptr;
  std::string request_id_;
  std::string refused_key_;  // the key a refusal names (errors::KeyNameOf), when no call holds it
};

// The request id of the access log: the request's `x-request-id` (its first 128 bytes), else a
// new one ("<8 hex digits of this process>-<counter>").
std::string RequestIdFor(std::string_view header_value);

}  // namespace tide::server
