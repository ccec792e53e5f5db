// RequestTracing / RequestTrace: the SERVER span of a request continues the caller's context, gets
// its attributes and children from the completion the recorder hands it, and an unsampled request
// records nothing.
#include "pipeline/request_tracing.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/error.h"
#include "gtest/gtest.h"
#include "pipeline/completion_recorder.h"
#include "tracing/sampler.h"

namespace tide::pipeline {
namespace {

using Steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

class MemoryProcessor final : public tracing::SpanProcessor {
 public:
  void OnEnd(tracing::SpanData span) override {
    absl::MutexLock lock(&mu_);
    spans_.push_back(std::move(span));
  }
  std::vector<tracing::SpanData> spans() {
    absl::MutexLock lock(&mu_);
    return spans_;
  }

 private:
  absl::Mutex mu_;
  std::vector<tracing::SpanData> spans_;
};

const tracing::SpanData* Named(const std::vector<tracing::SpanData>& spans, std::string_view name) {
  for (const tracing::SpanData& s : spans) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const tracing::AttributeValue* Attr(const tracing::SpanData& span, std::string_view key) {
  for (const tracing::Attribute& a : span.attributes) {
    if (a.key == key) return &a.value;
  }
  return nullptr;
}

struct Fixture {
  explicit Fixture(std::unique_ptr<tracing::Sampler> s = tracing::MakeAlwaysOnSampler())
      : sampler(std::move(s)),
        tracer(sampler, &processor),
        tracing(&tracer, &counters, RequestTracingOptions{"127.0.0.1", 8080, 8001, {}}) {}
  MemoryProcessor processor;
  std::shared_ptr<const tracing::Sampler> sampler;
  tracing::Tracer tracer;
  tracing::TraceContextCounters counters;
  RequestTracing tracing;
};

constexpr char kParent[] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

TEST(RequestTracing, AModelsAnswerIsAServerSpanWithItsStagesAsChildren) {
  Fixture f;
  const Steady::time_point received = Steady::now() - 10ms;
  RequestTrace trace = f.tracing.StartHttp("POST", "/rerank", received, kParent, "k=v");
  ASSERT_TRUE(trace.active());
  EXPECT_EQ(trace.trace_id(), "0af7651916cd43dd8448eb211c80319c");
  EXPECT_EQ(trace.traceparent().substr(0, 36), "00-0af7651916cd43dd8448eb211c80319c-");
  trace.MarkAdmitted();

  Outcome o;
  o.set_model("m", 3);
  o.documents = 2;
  o.tokens = 17;
  o.timings = serving::StageTimings{.tokenize = 1ms, .queue = 2ms, .inference = 3ms};
  o.post = Steady::now();
  Completion c;
  c.endpoint = "rerank";
  c.received_at = received;
  c.outcome = &o;
  c.timings = o.Complete(received);
  c.trace = &trace;
  trace.End(c, 200);

  const std::vector<tracing::SpanData> spans = f.processor.spans();
  ASSERT_EQ(spans.size(), 5u);
  const tracing::SpanData* server = Named(spans, "POST /rerank");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->kind, tracing::SpanKind::kServer);
  EXPECT_EQ(tracing::ToHex(server->parent_span_id), "b7ad6b7169203331");
  EXPECT_TRUE(server->parent_remote);
  EXPECT_EQ(server->context.trace_state, "k=v");
  EXPECT_EQ(std::get<std::string>(*Attr(*server, "http.route")), "/rerank");
  EXPECT_EQ(std::get<int64_t>(*Attr(*server, "http.response.status_code")), 200);
  EXPECT_EQ(std::get<int64_t>(*Attr(*server, "server.port")), 8080);
  EXPECT_EQ(std::get<std::string>(*Attr(*server, "tide.model")), "m");
  EXPECT_EQ(std::get<int64_t>(*Attr(*server, "tide.model.version")), 3);
  EXPECT_EQ(std::get<int64_t>(*Attr(*server, "tide.tokens")), 17);
  EXPECT_EQ(std::get<bool>(*Attr(*server, "tide.degraded")), false);
  EXPECT_EQ(Attr(*server, "tide.error.kind"), nullptr);
  // The server span started at the arrival, 10 ms before it ended at least.
  EXPECT_GE(server->end_unix_nanos - server->start_unix_nanos, 10'000'000);
  const tracing::SpanData* tokenize = Named(spans, "tide.tokenize");
  const tracing::SpanData* queue = Named(spans, "tide.queue");
  const tracing::SpanData* inference = Named(spans, "tide.inference");
  ASSERT_TRUE(tokenize && queue && inference && Named(spans, "tide.admission"));
  for (const tracing::SpanData* s : {tokenize, queue, inference}) {
    EXPECT_EQ(s->parent_span_id, server->context.span_id);
    EXPECT_EQ(s->context.trace_id, server->context.trace_id);
    EXPECT_GE(s->start_unix_nanos, server->start_unix_nanos);
    EXPECT_LE(s->end_unix_nanos, server->end_unix_nanos);
  }
  EXPECT_EQ(tokenize->end_unix_nanos, queue->start_unix_nanos);
  EXPECT_EQ(queue->end_unix_nanos, inference->start_unix_nanos);
  EXPECT_EQ(inference->end_unix_nanos - inference->start_unix_nanos, 3'000'000);
  EXPECT_EQ(queue->end_unix_nanos - queue->start_unix_nanos, 2'000'000);
}

TEST(RequestTracing, ARefusalIsAnErrorKindAndAServerErrorOnlyFor5xx) {
  Fixture f;
  for (const auto& [status, http, error_status] :
       std::vector<std::tuple<absl::Status, int, tracing::StatusCode>>{
           {errors::Overloaded("too many requests in flight"), 429, tracing::StatusCode::kUnset},
           {errors::Unavailable("draining"), 503, tracing::StatusCode::kError}}) {
    RequestTrace trace = f.tracing.StartGrpc("tei.v1.Rerank/Rerank", Steady::now(), "", "");
    Outcome o;
    o.status = status;
    Completion c;
    c.protocol = "grpc";
    c.endpoint = "rerank";
    c.outcome = &o;
    trace.End(c, http);
  }
  const std::vector<tracing::SpanData> spans = f.processor.spans();
  std::vector<const tracing::SpanData*> servers, admissions;
  for (const tracing::SpanData& s : spans) {
    (s.kind == tracing::SpanKind::kServer ? servers : admissions).push_back(&s);
  }
  ASSERT_EQ(servers.size(), 2u);
  ASSERT_EQ(admissions.size(), 2u);
  EXPECT_EQ(servers[0]->name, "tei.v1.Rerank/Rerank");
  EXPECT_EQ(std::get<std::string>(*Attr(*servers[0], "rpc.service")), "tei.v1.Rerank");
  EXPECT_EQ(std::get<std::string>(*Attr(*servers[0], "rpc.method")), "Rerank");
  EXPECT_EQ(std::get<int64_t>(*Attr(*servers[0], "rpc.grpc.status_code")), 8);  // RESOURCE_EXHAUSTED
  EXPECT_EQ(std::get<std::string>(*Attr(*servers[0], "tide.error.kind")), "overloaded");
  EXPECT_EQ(servers[0]->status, tracing::StatusCode::kUnset);
  EXPECT_EQ(std::get<std::string>(*Attr(*admissions[0], "tide.admission.outcome")), "shed");
  EXPECT_EQ(servers[1]->status, tracing::StatusCode::kError);
  EXPECT_EQ(std::get<std::string>(*Attr(*admissions[1], "tide.admission.outcome")), "unavailable");
  EXPECT_TRUE(servers[0]->parent_span_id == tracing::SpanId{}) << "no traceparent: a root span";
}

TEST(RequestTracing, AnUnsampledRequestHasIdsButRecordsNothing) {
  Fixture f(tracing::MakeAlwaysOffSampler());
  RequestTrace trace = f.tracing.StartHttp("POST", "/rerank", Steady::now(), "", "");
  EXPECT_TRUE(trace.active());
  EXPECT_FALSE(trace.recording());
  EXPECT_EQ(trace.trace_id().size(), 32u);
  EXPECT_EQ(trace.traceparent().substr(53), "00");
  Outcome o;
  Completion c;
  c.outcome = &o;
  trace.End(c, 200);
  EXPECT_TRUE(f.processor.spans().empty());
}

TEST(RequestTracing, AMalformedTraceparentIsCountedAndStartsANewTrace) {
  Fixture f;
  RequestTrace trace = f.tracing.StartHttp("POST", "/rerank", Steady::now(), "00-not-a-traceparent", "");
  EXPECT_EQ(f.counters.malformed_traceparent.load(), 1u);
  EXPECT_NE(trace.trace_id(), "");
  EXPECT_FALSE(trace.context().remote);
}

TEST(RequestTracing, AStreamIsOneServerSpanWithAMessageSpanPerMessage) {
  Fixture f;
  RequestTrace stream = f.tracing.StartGrpc("tei.v1.Predict/PredictStream", Steady::now(), kParent, "");
  for (int64_t i = 0; i < 2; ++i) {
    RequestTrace message = stream.StartMessage(Steady::now(), i);
    ASSERT_TRUE(message.active());
    EXPECT_EQ(message.trace_id(), stream.trace_id());
    message.MarkAdmitted();
    Outcome o;
    o.set_model("m", 1);
    o.timings = serving::StageTimings{.tokenize = 1ms, .queue = 1ms, .inference = 1ms};
    o.post = Steady::now();
    Completion c;
    c.endpoint = "predict_stream";
    c.outcome = &o;
    c.timings = o.Complete(Steady::now());
    c.trace = &message;
    message.End(c, 200);
  }
  stream.EndRpc(0, "", 2);

  const std::vector<tracing::SpanData> spans = f.processor.spans();
  const tracing::SpanData* server = Named(spans, "tei.v1.Predict/PredictStream");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->kind, tracing::SpanKind::kServer);
  EXPECT_EQ(tracing::ToHex(server->parent_span_id), "b7ad6b7169203331");
  EXPECT_EQ(std::get<std::string>(*Attr(*server, "rpc.method")), "PredictStream");
  EXPECT_EQ(std::get<int64_t>(*Attr(*server, "rpc.grpc.status_code")), 0);
  EXPECT_EQ(std::get<int64_t>(*Attr(*server, "tide.stream.messages")), 2);
  EXPECT_EQ(std::get<int64_t>(*Attr(*server, "server.port")), 8001);
  std::vector<const tracing::SpanData*> messages;
  for (const tracing::SpanData& s : spans) {
    if (s.name == "tide.stream.message") messages.push_back(&s);
  }
  ASSERT_EQ(messages.size(), 2u);
  for (const tracing::SpanData* m : messages) {
    EXPECT_EQ(m->kind, tracing::SpanKind::kInternal);
    EXPECT_EQ(m->parent_span_id, server->context.span_id);
    EXPECT_EQ(std::get<std::string>(*Attr(*m, "tide.endpoint")), "predict_stream");
    EXPECT_EQ(std::get<std::string>(*Attr(*m, "tide.model")), "m");
    EXPECT_EQ(Attr(*m, "server.port"), nullptr) << "the stream's span names the server";
    // Each message has the usual children.
    for (const char* stage : {"tide.admission", "tide.tokenize", "tide.queue", "tide.inference"}) {
      int found = 0;
      for (const tracing::SpanData& s : spans) found += s.name == stage && s.parent_span_id == m->context.span_id;
      EXPECT_EQ(found, 1) << stage;
    }
  }
  EXPECT_EQ(std::get<int64_t>(*Attr(*messages[0], "tide.stream.message.index")) +
                std::get<int64_t>(*Attr(*messages[1], "tide.stream.message.index")),
            1);
}

TEST(RequestTracing, AStreamThatFailedOnTheServerIsAnError) {
  Fixture f;
  RequestTrace stream = f.tracing.StartGrpc("inference.GRPCInferenceService/ModelStreamInfer", Steady::now(), "", "");
  stream.EndRpc(13, "boom", 0);  // INTERNAL
  RequestTrace cancelled = f.tracing.StartGrpc("tei.v1.Embed/EmbedStream", Steady::now(), "", "");
  cancelled.EndRpc(1, "cancelled", 3);  // CANCELLED: the client's doing
  const std::vector<tracing::SpanData> spans = f.processor.spans();
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].status, tracing::StatusCode::kError);
  EXPECT_EQ(spans[0].status_message, "boom");
  EXPECT_NE(spans[1].status, tracing::StatusCode::kError);
  EXPECT_EQ(std::get<int64_t>(*Attr(spans[1], "tide.stream.messages")), 3);
}

TEST(RequestTracing, AnAdminRouteIsAServerSpanEndedWithItsStatus) {
  Fixture f;
  RequestTrace ok = f.tracing.StartHttp("PUT", "/v2/models/{model}/rollout", Steady::now(), kParent, "");
  ok.EndHttp("rollout_put", 200);
  RequestTrace failed = f.tracing.StartHttp("POST", "/v2/repository/models/{model}/load", Steady::now(), "", "");
  failed.EndHttp("repository_load", 500);
  const std::vector<tracing::SpanData> spans = f.processor.spans();
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].name, "PUT /v2/models/{model}/rollout");
  EXPECT_EQ(spans[0].kind, tracing::SpanKind::kServer);
  EXPECT_EQ(tracing::ToHex(spans[0].parent_span_id), "b7ad6b7169203331");
  EXPECT_EQ(std::get<std::string>(*Attr(spans[0], "tide.endpoint")), "rollout_put");
  EXPECT_EQ(std::get<int64_t>(*Attr(spans[0], "http.response.status_code")), 200);
  EXPECT_EQ(std::get<int64_t>(*Attr(spans[0], "server.port")), 8080);
  EXPECT_NE(spans[0].status, tracing::StatusCode::kError);
  EXPECT_EQ(spans[1].status, tracing::StatusCode::kError);
}

TEST(RequestTracing, WithoutTracingEveryCallIsANoOp) {
  RequestTrace trace;
  EXPECT_FALSE(trace.active());
  EXPECT_EQ(trace.traceparent(), "");
  EXPECT_EQ(trace.trace_id(), "");
  trace.MarkAdmitted();
  Outcome o;
  Completion c;
  c.outcome = &o;
  trace.End(c, 200);
  RequestTrace message = trace.StartMessage(Steady::now(), 0);
  EXPECT_FALSE(message.active());
  trace.EndRpc(0, "", 1);
  trace.EndHttp("rollout_get", 200);
}

}  // namespace
}  // namespace tide::pipeline
