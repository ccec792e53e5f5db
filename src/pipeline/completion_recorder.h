// tide::pipeline::CompletionRecorder — the one place that records a finished request, for both
// edges: tide_requests_total and tide_request_duration_seconds (labels model, version, endpoint,
// status, protocol), the stage histograms for a model's answer, and the access-log record
// (serving/access_log.h). Everything comes from the domain outcome (outcome.h: the error's kind,
// the degraded flag, the version that answered) and the admitted call (key, pairs, cache hits),
// never from the rendered answer.
//
// Contract:
//  - Record never blocks (the access log queues) and is thread-safe; metrics and log may be null
//    (nothing recorded there).
//  - status: the HTTP status of the error's kind (api::HttpStatusFor; gRPC answers are labelled
//    with it too), 200 for OK unless the edge answered another success status (`ok_status`, e.g.
//    HTTP's 503 {"ready": false}); error_type: the kind's name (api::ErrorTypeFor).
//  - key: the admitted call's tenant; for a refusal before admission the key the error names
//    (errors::KeyNameOf). degraded: Outcome::degraded().
//  - A sampled request's latency is its histogram bucket's exemplar (trace and span id), shown in
//    the OpenMetrics /metrics.
//  - With a trace (Completion::trace), Record ends its server span (RequestTrace::End) and the
//    access-log record carries its trace_id and span_id.
#pragma once

#include <string>
#include <string_view>

#include "pipeline/outcome.h"
#include "pipeline/request_tracing.h"
#include "serving/access_log.h"
#include "serving/call.h"
#include "serving/serving_metrics.h"

namespace tide::pipeline {

// One finished request (or one answered message of a stream).
struct Completion {
  const char* protocol = "http";  // "http" | "grpc"
  std::string_view endpoint;      // the metrics' endpoint label, the log's route
  Steady::time_point received_at{};
  const Outcome* outcome = nullptr;
  // The admitted call (null: refused before admission).
  const serving::Call* call = nullptr;
  // The timings of a model's answer (Outcome::Complete), for the stage histograms and the log.
  const serving::StageTimings* timings = nullptr;
  // A success answered with another status than 200 (HTTP's not-ready 503 with a JSON body); 0: 200.
  int ok_status = 0;
  std::string_view request_id;  // names the record in the access log
  // The request's trace (null: none): Record ends its server span and logs its ids.
  RequestTrace* trace = nullptr;
};

class CompletionRecorder {
 public:
  // `tracing` null: requests are not traced.
  CompletionRecorder(serving::ServingMetrics* metrics, serving::AccessLog* access_log,
                     const RequestTracing* tracing = nullptr)
      : metrics_(metrics), access_log_(access_log), tracing_(tracing) {}

  // Whether records go to an access log (an edge then names the request with an id).
  bool logs() const { return access_log_ != nullptr; }
  // Where the edges start their requests' traces (null: tracing is off).
  const RequestTracing* tracing() const { return tracing_; }
  // The status a completion is recorded with (see the contract).
  static int StatusOf(const Completion& completion);

  void Record(const Completion& completion) const;

 private:
  serving::ServingMetrics* const metrics_;
  serving::AccessLog* const access_log_;
  const RequestTracing* const tracing_;
};

}  // namespace tide::pipeline
