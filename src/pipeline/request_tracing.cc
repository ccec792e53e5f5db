#include "pipeline/request_tracing.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <optional>
#include <utility>

#include "common/error.h"
#include "pipeline/completion_recorder.h"

namespace tide::pipeline {

namespace {

using Steady = std::chrono::steady_clock;

std::optional<std::string_view> Present(std::string_view header) {
  if (header.empty()) return std::nullopt;
  return header;
}

// "<a> <b>" in `buffer` (truncated to fit), without allocating: the name of a span that may not record.
std::string_view JoinInto(char* buffer, size_t size, std::string_view a, std::string_view b) {
  size_t n = std::min(a.size(), size);
  std::memcpy(buffer, a.data(), n);
  if (!b.empty() && n < size) {
    buffer[n++] = ' ';
    const size_t m = std::min(b.size(), size - n);
    std::memcpy(buffer + n, b.data(), m);
    n += m;
  }
  return std::string_view(buffer, n);
}

// admitted; shed (the server's or a key's concurrency, memory: overloaded without a key's quota);
// quota (a key's rate); else the refusal's error kind (unauthenticated, unavailable, not_found, ...).
std::string_view AdmissionOutcome(bool admitted, const absl::Status& status) {
  if (admitted) return "admitted";
  if (status.ok()) return "answered";
  if (KindOf(status) == ErrorKind::kOverloaded) {
    const std::string_view message(status.message().data(), status.message().size());
    return message.find("quota") != std::string_view::npos || message.find("per_second") != std::string_view::npos
               ? std::string_view("quota")
               : std::string_view("shed");
  }
  return Info(KindOf(status)).name;
}

}  // namespace

std::string RequestTrace::traceparent() const {
  if (!active()) return {};
  return tracing::FormatTraceparent(span_.context());
}

std::string RequestTrace::trace_id() const {
  if (!active()) return {};
  return tracing::ToHex(span_.context().trace_id);
}

std::string RequestTrace::span_id() const {
  if (!active()) return {};
  return tracing::ToHex(span_.context().span_id);
}

void RequestTrace::MarkAdmitted() {
  if (active()) admitted_at_ = Steady::now();
}

void RequestTrace::Annotate(serving::CallInfo* info) const {
  if (!active() || !span_.IsRecording()) return;
  batching::TraceLink link;
  link.trace_id = span_.context().trace_id;
  link.span_id = span_.context().span_id;
  link.flags = span_.context().trace_flags;
  info->trace = link;
}

int64_t RequestTrace::UnixNanos(Steady::time_point t) const {
  return received_unix_nanos_ + std::chrono::duration_cast<std::chrono::nanoseconds>(t - received_at_).count();
}

void RequestTrace::End(const Completion& c, int status) {
  if (!active()) return;
  if (!span_.IsRecording()) {
    span_.End();
    return;
  }
  const Outcome& o = *c.outcome;
  const tracing::Tracer& tracer = owner_->tracer();
  const Steady::time_point now = Steady::now();
  const int64_t end = UnixNanos(now);

  // The server span's own attributes.
  SetServerAttributes(c.endpoint);
  if (grpc_) {
    const int code = o.status.ok() ? 0 : Info(KindOf(o.status)).grpc_code;
    span_.SetAttribute("rpc.grpc.status_code", code);
  } else {
    span_.SetAttribute("http.response.status_code", status);
  }
  if (!o.model.empty()) span_.SetAttribute("tide.model", o.model);
  if (o.version.has_value()) span_.SetAttribute("tide.model.version", *o.version);
  if (c.call != nullptr) {
    if (c.call->tenant() != nullptr) span_.SetAttribute("tide.tenant", c.call->tenant()->name());
    span_.SetAttribute("tide.pairs", static_cast<int64_t>(c.call->pairs()));
    // Long documents: each window is a pair of its own.
    if (o.documents > 0 && static_cast<size_t>(c.call->pairs()) > o.documents) {
      span_.SetAttribute("tide.windows", static_cast<int64_t>(c.call->pairs()));
    }
    if (o.cache_on) span_.SetAttribute("tide.cache_hits", static_cast<int64_t>(c.call->cache_hits()));
    if (const char* arm = c.call->rollout_arm(); arm != nullptr) span_.SetAttribute("tide.rollout.arm", arm);
  } else if (!o.status.ok()) {
    if (std::string key = KeyNameOf(o.status); !key.empty()) span_.SetAttribute("tide.tenant", key);
  }
  if (o.documents > 0) span_.SetAttribute("tide.documents", static_cast<int64_t>(o.documents));
  if (o.tokens > 0) span_.SetAttribute("tide.tokens", static_cast<int64_t>(o.tokens));
  span_.SetAttribute("tide.degraded", o.degraded());
  if (!o.status.ok()) {
    // The error kind's name (common/error.h: more precise than the answer's error_type).
    const std::string_view kind = Info(KindOf(o.status)).name;
    span_.SetAttribute("tide.error.kind", kind);
    span_.SetAttribute("error.type", kind);
    // Semantic conventions: a server span is an error for a 5xx answer, not for the client's mistakes.
    if (status >= 500) span_.SetStatus(tracing::StatusCode::kError, std::string_view(o.status.message().data(), o.status.message().size()));
  }

  // Children, from what the request came to.
  auto child = [&](std::string_view name, Steady::time_point begin, Steady::time_point finish) {
    tracing::StartSpanOptions so;
    so.parent = span_.context();
    so.start_unix_nanos = UnixNanos(begin);
    tracing::Span s = tracer.StartSpan(name, std::move(so));
    return s;
  };
  const bool admitted = admitted_at_ != Steady::time_point{};
  {
    tracing::Span admission = child("tide.admission", received_at_, admitted ? admitted_at_ : now);
    admission.SetAttribute("tide.admission.outcome", AdmissionOutcome(admitted || c.call != nullptr, o.status));
    admission.End(admitted ? UnixNanos(admitted_at_) : end);
  }
  const serving::StageTimings* t = c.timings != nullptr ? c.timings : (o.timings ? &*o.timings : nullptr);
  if (t != nullptr && o.post != Steady::time_point{} && o.fallback == nullptr) {
    // The stages end where the next begins; the model's answer left at `post`.
    const Steady::time_point inference_begin = o.post - t->inference;
    const Steady::time_point queue_begin = inference_begin - t->queue;
    const Steady::time_point tokenize_begin = queue_begin - t->tokenize;
    if (t->tokenize.count() > 0) {
      tracing::Span s = child("tide.tokenize", tokenize_begin, queue_begin);
      if (o.tokens > 0) s.SetAttribute("tide.tokens", static_cast<int64_t>(o.tokens));
      s.End(UnixNanos(queue_begin));
    }
    {
      tracing::Span s = child("tide.queue", queue_begin, inference_begin);
      s.End(UnixNanos(inference_begin));
    }
    {
      tracing::Span s = child("tide.inference", inference_begin, o.post);
      for (const batching::TraceLink& b : t->batches) {
        tracing::SpanContext batch;
        batch.trace_id = b.trace_id;
        batch.span_id = b.span_id;
        batch.trace_flags = b.flags;
        s.AddLink(batch);
      }
      if (!t->batches.empty()) s.SetAttribute("tide.batches", static_cast<int64_t>(t->batches.size()));
      if (!o.model.empty()) s.SetAttribute("tide.model", o.model);
      if (o.version.has_value()) s.SetAttribute("tide.model.version", *o.version);
      s.End(UnixNanos(o.post));
    }
  }
  if (o.degraded()) {
    const Steady::time_point begin = admitted ? admitted_at_ : received_at_;
    tracing::Span s = child("tide.fallback", begin, now);
    s.SetAttribute("tide.degraded", true);
    if (o.fallback != nullptr) s.SetAttribute("tide.fallback", o.fallback);
    s.End(end);
  }
  span_.End(end);
}

void RequestTrace::SetServerAttributes(std::string_view endpoint) {
  const RequestTracingOptions& options = owner_->options();
  if (!endpoint.empty()) span_.SetAttribute("tide.endpoint", endpoint);
  if (message_) return;  // its stream's SERVER span names the server
  if (!options.server_address.empty()) span_.SetAttribute("server.address", options.server_address);
  const int port = grpc_ ? options.grpc_port : options.http_port;
  if (port != 0) span_.SetAttribute("server.port", port);
}

RequestTrace RequestTrace::StartMessage(Steady::time_point received_at, int64_t index) const {
  RequestTrace trace;
  if (!active()) return trace;
  trace.owner_ = owner_;
  trace.grpc_ = true;
  trace.message_ = true;
  trace.received_at_ = received_at;
  trace.received_unix_nanos_ = UnixNanos(received_at);
  tracing::StartSpanOptions so;
  so.parent = span_.context();
  so.start_unix_nanos = trace.received_unix_nanos_;
  trace.span_ = owner_->tracer().StartSpan("tide.stream.message", std::move(so));
  if (trace.span_.IsRecording()) trace.span_.SetAttribute("tide.stream.message.index", index);
  return trace;
}

void RequestTrace::EndRpc(int grpc_code, std::string_view message, int64_t messages) {
  if (!active()) return;
  if (span_.IsRecording()) {
    SetServerAttributes("");
    span_.SetAttribute("rpc.grpc.status_code", grpc_code);
    span_.SetAttribute("tide.stream.messages", messages);
    // Semantic conventions: the server's own failures (UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED,
    // INTERNAL, UNAVAILABLE, DATA_LOSS) make a gRPC server span an error, not the client's.
    constexpr int kServerCodes[] = {2, 4, 12, 13, 14, 15};
    if (std::find(std::begin(kServerCodes), std::end(kServerCodes), grpc_code) != std::end(kServerCodes)) {
      span_.SetStatus(tracing::StatusCode::kError, message);
    }
  }
  span_.End(UnixNanos(Steady::now()));
}

void RequestTrace::EndHttp(std::string_view endpoint, int status) {
  if (!active()) return;
  if (span_.IsRecording()) {
    SetServerAttributes(endpoint);
    span_.SetAttribute("http.response.status_code", status);
    if (status >= 500) span_.SetStatus(tracing::StatusCode::kError, {});
  }
  span_.End(UnixNanos(Steady::now()));
}

RequestTrace RequestTracing::StartServerSpan(std::string_view name, bool grpc, Steady::time_point received_at,
                                             std::string_view traceparent, std::string_view tracestate) const {
  RequestTrace trace;
  trace.owner_ = this;
  trace.grpc_ = grpc;
  trace.received_at_ = received_at;
  trace.received_unix_nanos_ =
      tracer_->clock().NowUnixNanos() -
      std::chrono::duration_cast<std::chrono::nanoseconds>(Steady::now() - received_at).count();
  tracing::StartSpanOptions so;
  so.kind = tracing::SpanKind::kServer;
  so.parent = tracing::Extract(Present(traceparent), Present(tracestate), counters_);
  so.start_unix_nanos = trace.received_unix_nanos_;
  trace.span_ = tracer_->StartSpan(name, std::move(so));
  return trace;
}

RequestTrace RequestTracing::StartHttp(std::string_view method, std::string_view route, Steady::time_point received_at,
                                       std::string_view traceparent, std::string_view tracestate) const {
  char buffer[160];
  RequestTrace trace = StartServerSpan(JoinInto(buffer, sizeof(buffer), method, route), /*grpc=*/false, received_at,
                                       traceparent, tracestate);
  if (trace.span_.IsRecording()) {
    trace.span_.SetAttribute("http.request.method", method);
    if (!route.empty()) trace.span_.SetAttribute("http.route", route);
  }
  return trace;
}

RequestTrace RequestTracing::StartGrpc(std::string_view rpc, Steady::time_point received_at,
                                       std::string_view traceparent, std::string_view tracestate) const {
  RequestTrace trace = StartServerSpan(rpc, /*grpc=*/true, received_at, traceparent, tracestate);
  if (trace.span_.IsRecording()) {
    trace.span_.SetAttribute("rpc.system", "grpc");
    const size_t slash = rpc.find('/');
    trace.span_.SetAttribute("rpc.service", rpc.substr(0, slash));
    if (slash != std::string_view::npos) trace.span_.SetAttribute("rpc.method", rpc.substr(slash + 1));
  }
  return trace;
}

}  // namespace tide::pipeline
