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
#include "api/embed.h"
#include "server/http/http_server.h"
#include "pipeline/completion_recorder.h"
#include "pipeline/outcome.h"
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

// TEI's x-tokenization-time, x-queue-time, x-inference-time, x-total-time (whole milliseconds, as TEI
// sends them) plus a W3C Server-Timing header with fractional milliseconds.
void AddTimingHeaders(const serving::StageTimings& timings, http::Response* response);

// Sends a response once and hands its completion to the pipeline's recorder
// (pipeline/completion_recorder.h: tide_requests_total, tide_request_duration_seconds, the stage
// histograms of a model's answer, the access-log record), from the request's domain outcome: the
// error it was answered with, the model version that answered, the fallback of a degraded answer.
// Once a model version is chosen (set_model, or an answer's outcome), the response names it in
// `x-tide-model-version`. With an access log (set_request_id) it answers `x-request-id`: the
// request's own, else the one tide made.
class ResponseSender {
 public:
  // `recorder` may be null (nothing recorded).
  ResponseSender(http::Responder respond, const pipeline::CompletionRecorder* recorder, std::string endpoint,
                 std::chrono::steady_clock::time_point received_at)
      : respond_(std::move(respond)), recorder_(recorder), endpoint_(std::move(endpoint)), received_at_(received_at) {}
  ResponseSender(ResponseSender&&) = default;
  ResponseSender& operator=(ResponseSender&&) = default;

  // The model version that answers (metrics are labelled by model and version; both stay "" for
  // requests answered before a model is chosen).
  void set_model(std::string model, int64_t version) { outcome_.set_model(std::move(model), version); }
  // Holds the admitted call (its concurrency permit and memory lease) until the response is sent:
  // the permit is released just before the response is handed to the connection.
  void hold(serving::CallPtr call) { call_ = std::move(call); }
  // Names the request in the access log and the answer (RequestIdFor).
  void set_request_id(std::string request_id) { request_id_ = std::move(request_id); }
  // The request's trace (pipeline/request_tracing.h): the recorder ends its server span, and the
  // response names it in `traceparent` (the server span) and `x-trace-id`.
  void set_trace(pipeline::RequestTrace trace) { trace_ = std::move(trace); }
  pipeline::RequestTrace& trace() { return trace_; }
  const std::chrono::steady_clock::time_point& received_at() const { return received_at_; }
  // A success (its status as the response says: 200, or e.g. 503 {"ready": false}).
  void Send(http::Response response);
  // A model's answer rendered into `response`, with the pipeline's outcome: a fallback's marked
  // `x-tide-degraded: <fallback>` without timing headers; the model's with the timing headers
  // (postprocess from the outcome's `post`, total from the request's arrival). An error outcome
  // is answered as SendError.
  void SendAnswer(http::Response response, pipeline::Outcome outcome);
  // The error answer of `status` (ErrorResponse; with an error renderer, its status and body).
  void SendError(const absl::Status& status);
  // Errors in another API's shape (OpenAI's, Cohere's: api/embed.h): the renderer gives the HTTP
  // status and body; the headers (Retry-After, WWW-Authenticate, x-tide-degraded) stay tide's.
  // Null: tide's own (TEI's) shape.
  using ErrorRenderer = api::ApiError (*)(const absl::Status& status);
  void set_error_renderer(ErrorRenderer render) { error_renderer_ = render; }
  // An outcome whose status is an error (the model named, when one was chosen).
  void SendFailure(pipeline::Outcome outcome);

 private:
  void Deliver(http::Response response, const serving::StageTimings* timings);

  http::Responder respond_;
  const pipeline::CompletionRecorder* recorder_ = nullptr;
  std::string endpoint_;
  std::chrono::steady_clock::time_point received_at_;
  pipeline::Outcome outcome_;
  serving::CallPtr call_;
  std::string request_id_;  // empty: no access log
  ErrorRenderer error_renderer_ = nullptr;
  pipeline::RequestTrace trace_;
};

// The error renderer of an endpoint's metrics label: OpenAI's for "v1_embeddings", Cohere's for
// "v2_embed", else null (embed_routes.cc).
ResponseSender::ErrorRenderer EmbedErrorRenderer(std::string_view endpoint);

// The request id of the access log: the request's `x-request-id` (its first 128 bytes), else a
// new one ("<8 hex digits of this process>-<counter>").
std::string RequestIdFor(std::string_view header_value);

}  // namespace tide::server
