#include "pipeline/completion_recorder.h"

#include <chrono>
#include <utility>

#include "api/status_http.h"
#include "common/error.h"

namespace tide::pipeline {

int CompletionRecorder::StatusOf(const Completion& c) {
  if (!c.outcome->status.ok()) return api::HttpStatusFor(c.outcome->status);
  return c.ok_status != 0 ? c.ok_status : 200;
}

void CompletionRecorder::Record(const Completion& c) const {
  const Outcome& o = *c.outcome;
  const Steady::time_point now = Steady::now();
  const double seconds = std::chrono::duration<double>(now - c.received_at).count();
  const int status = StatusOf(c);
  const std::string version = o.version_label();
  const std::string endpoint(c.endpoint);
  if (metrics_ != nullptr) {
    metrics_->requests->WithLabels({o.model, version, endpoint, std::to_string(status), c.protocol})->Increment();
    metrics::Histogram* duration = metrics_->request_duration->WithLabels({o.model, version, endpoint, c.protocol});
    if (c.trace != nullptr && c.trace->recording()) {
      // A sampled request is the latency's exemplar (OpenMetrics): a spike in a dashboard leads to its trace.
      duration->ObserveWithExemplar(seconds, c.trace->trace_id(), c.trace->span_id());
    } else {
      duration->Observe(seconds);
    }
    if (c.timings != nullptr) {
      auto observe = [&](const char* stage, serving::Clock::duration d) {
        metrics_->stage_duration->WithLabels({o.model, version, stage})->Observe(std::chrono::duration<double>(d).count());
      };
      observe("tokenize", c.timings->tokenize);
      observe("queue", c.timings->queue);
      observe("inference", c.timings->inference);
      observe("postprocess", c.timings->postprocess);
    }
  }
  if (c.trace != nullptr) c.trace->End(c, status);
  if (access_log_ == nullptr) return;
  serving::AccessRecord r;
  r.time = std::chrono::system_clock::now();
  r.protocol = c.protocol;
  r.route = endpoint;
  r.model = o.model;
  r.version = version;
  r.status = status;
  if (!o.status.ok()) r.error_type = std::string(api::ErrorTypeFor(o.status));
  if (c.call != nullptr) {
    if (c.call->tenant() != nullptr) r.key = c.call->tenant()->name();
    r.pairs = c.call->pairs();
    r.cache_hits = c.call->cache_hits();
  } else if (!o.status.ok()) {
    r.key = KeyNameOf(o.status);
  }
  r.degraded = o.degraded();
  if (c.timings != nullptr) {
    r.queue_ms = std::chrono::duration<double, std::milli>(c.timings->queue).count();
    r.inference_ms = std::chrono::duration<double, std::milli>(c.timings->inference).count();
  }
  r.total_ms = seconds * 1000;
  r.request_id = std::string(c.request_id);
  if (c.trace != nullptr && c.trace->active()) {
    r.trace_id = c.trace->trace_id();
    r.span_id = c.trace->span_id();
  }
  access_log_->Log(std::move(r));
}

}  // namespace tide::pipeline
