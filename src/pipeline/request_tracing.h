// tide::pipeline::RequestTracing and RequestTrace — the OpenTelemetry spans of one request, for both
// edges (src/tracing is the tracer; this is where the request path uses it).
//
//   SERVER  "POST /rerank" | "tei.v1.Rerank/Rerank"   the request, from its arrival to its answer
//     |- tide.admission     arrival -> the admission's decision (tide.admission.outcome)
//     |- tide.tokenize      a model's answer, laid out from the answer's stage timings
//     |- tide.queue         (serving::StageTimings, the slowest row's), ending when it left the
//     |- tide.inference     model; tide.inference links to the span of every batch its rows rode in
//     |- tide.fallback      a degraded answer (the breaker's fallback), tide.degraded = true
//     '- tide.batch         (in the first sampled request's trace) one span per executed batch:
//                           rows, tokens, padded tokens, buckets, instance, model, version,
//                           precision; linked to the server span of every sampled request in it
//
//   SERVER  "tei.v1.Predict/PredictStream" | "inference.GRPCInferenceService/ModelStreamInfer"
//     '- tide.stream.message   one per message of a bidirectional stream (tide.stream.message.index),
//          |- tide.admission   each a request of its own: the children and attributes above
//          '- ...
//
// Contract:
//  - RequestTracing::StartHttp / StartGrpc read the caller's W3C `traceparent` / `tracestate`
//    (tracing::Extract: a malformed header is ignored, counted in the counters, and the request
//    starts a new trace) and start the SERVER span as its child, timed from the request's arrival.
//  - A RequestTrace is move-only; default-constructed (tracing off) every call is a no-op and the
//    ids are "". An unsampled trace has ids (for the response header and the access log) and
//    records nothing: End sets no attribute and allocates nothing.
//  - MarkAdmitted is called once the admission decided (work starts); End once, by the
//    CompletionRecorder, with the request's completion and the status it is recorded with: the
//    server span's attributes (semantic conventions http.* / rpc.* / server.*, tide's own under
//    tide.*: endpoint, model, version, tenant name (never the key), pairs, cache hits, degraded,
//    error kind, the rollout arm), its children, its status (ERROR for a 5xx answer), then it is
//    ended.
//  - A stream: the RPC's SERVER span (StartGrpc) starts each message's trace (StartMessage: an
//    INTERNAL span `tide.stream.message`, its child, used as a request's server span: End as
//    above) and is ended by EndRpc with the stream's gRPC status and its message count. A route
//    without a request outcome (the admin API) is ended by EndHttp with its status.
//  - Thread-compatible (one request's edge owns it); RequestTracing is thread-safe and must
//    outlive every RequestTrace it starts (the tracer too).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "serving/call.h"
#include "tracing/span.h"
#include "tracing/span_context.h"
#include "tracing/trace_context.h"
#include "tracing/tracer.h"

namespace tide::pipeline {

struct Completion;  // completion_recorder.h

struct RequestTracingOptions {
  std::string server_address;  // server.address (the bind address)
  int http_port = 0;           // server.port of HTTP requests
  int grpc_port = 0;           // server.port of gRPC calls
  // Brings the tracing metrics (exporter and trace-context counters) up to date before /metrics
  // renders them; may be empty.
  std::function<void()> refresh_metrics;
};

class RequestTracing;

class RequestTrace {
 public:
  RequestTrace() = default;
  RequestTrace(RequestTrace&&) noexcept = default;
  RequestTrace& operator=(RequestTrace&&) noexcept = default;

  bool active() const { return owner_ != nullptr; }
  bool recording() const { return span_.IsRecording(); }
  const tracing::SpanContext& context() const { return span_.context(); }
  // The server span as a W3C traceparent ("" without tracing), its trace id and span id in hex.
  std::string traceparent() const;
  std::string trace_id() const;
  std::string span_id() const;

  void MarkAdmitted();
  // A sampled trace hands its server span to the call (CallInfo::trace), so that the call's rows
  // name it to their batches' spans; otherwise leaves `info` alone.
  void Annotate(serving::CallInfo* info) const;
  // Ends the server span (see the contract); `status` is the completion's HTTP status.
  void End(const Completion& completion, int status);

  // A message of this stream (0-based `index`), received at `received_at`: its own trace under
  // this span (inactive when this one is).
  RequestTrace StartMessage(std::chrono::steady_clock::time_point received_at, int64_t index) const;
  // Ends a stream's SERVER span: its gRPC status code (and message), how many messages it carried.
  void EndRpc(int grpc_code, std::string_view message, int64_t messages);
  // Ends an HTTP route's SERVER span that has no request outcome (`endpoint`: tide.endpoint).
  void EndHttp(std::string_view endpoint, int status);

 private:
  friend class RequestTracing;
  using Steady = std::chrono::steady_clock;
  int64_t UnixNanos(Steady::time_point t) const;
  // server.address / server.port and tide.endpoint (a stream's message has its stream's).
  void SetServerAttributes(std::string_view endpoint);

  const RequestTracing* owner_ = nullptr;
  tracing::Span span_;
  bool grpc_ = false;
  bool message_ = false;  // a stream's message (tide.stream.message), not a SERVER span
  Steady::time_point received_at_{};
  Steady::time_point admitted_at_{};
  // The wall clock at received_at_ (span timestamps are Unix nanoseconds; steady points map onto it).
  int64_t received_unix_nanos_ = 0;
};

class RequestTracing {
 public:
  // `tracer` must outlive this; `counters` (malformed headers) may be null.
  RequestTracing(const tracing::Tracer* tracer, tracing::TraceContextCounters* counters,
                 RequestTracingOptions options)
      : tracer_(tracer), counters_(counters), options_(std::move(options)) {}

  // `route`: the matched route pattern (http.route); empty header values count as absent.
  RequestTrace StartHttp(std::string_view method, std::string_view route, std::chrono::steady_clock::time_point received_at,
                         std::string_view traceparent, std::string_view tracestate) const;
  // `rpc`: "package.Service/Method".
  RequestTrace StartGrpc(std::string_view rpc, std::chrono::steady_clock::time_point received_at,
                         std::string_view traceparent, std::string_view tracestate) const;

  const tracing::Tracer& tracer() const { return *tracer_; }
  void RefreshMetrics() const {
    if (options_.refresh_metrics) options_.refresh_metrics();
  }
  const RequestTracingOptions& options() const { return options_; }

 private:
  // The SERVER span both edges open: parent from the caller's headers, start at `received_at`.
  RequestTrace StartServerSpan(std::string_view name, bool grpc, std::chrono::steady_clock::time_point received_at,
                               std::string_view traceparent, std::string_view tracestate) const;

  const tracing::Tracer* const tracer_;
  tracing::TraceContextCounters* const counters_;
  const RequestTracingOptions options_;
};

}  // namespace tide::pipeline
