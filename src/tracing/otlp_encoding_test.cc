#include "tracing/otlp_encoding.h"

#include <string>

#include "common/version.h"
#include "gtest/gtest.h"

namespace tide::tracing {
namespace {

namespace collector = opentelemetry::proto::collector::trace::v1;
namespace trace_pb = opentelemetry::proto::trace::v1;
namespace common_pb = opentelemetry::proto::common::v1;

template <size_t N>
std::string Bytes(const std::array<uint8_t, N>& id) {
  return std::string(reinterpret_cast<const char*>(id.data()), N);
}

std::string StringAttribute(const google::protobuf::RepeatedPtrField<common_pb::KeyValue>& kvs,
                            const std::string& key) {
  for (const common_pb::KeyValue& kv : kvs) {
    if (kv.key() == key) return kv.value().string_value();
  }
  return "<missing>";
}

SpanContext Context(uint8_t seed, bool remote) {
  SpanContext c;
  for (size_t i = 0; i < c.trace_id.size(); ++i) c.trace_id[i] = static_cast<uint8_t>(seed + i);
  for (size_t i = 0; i < c.span_id.size(); ++i) c.span_id[i] = static_cast<uint8_t>(seed * 3 + i);
  c.trace_flags = kTraceFlagSampled;
  c.remote = remote;
  return c;
}

// Encode, serialize to bytes, and parse back: what a receiver sees.
collector::ExportTraceServiceRequest RoundTrip(const std::vector<SpanData>& spans, const Resource& resource) {
  collector::ExportTraceServiceRequest request;
  EncodeExportRequest(spans, resource, &request);
  std::string bytes;
  EXPECT_TRUE(request.SerializeToString(&bytes));
  collector::ExportTraceServiceRequest decoded;
  EXPECT_TRUE(decoded.ParseFromString(bytes));
  return decoded;
}

TEST(OtlpEncodingTest, EveryFieldOfASpanArrives) {
  SpanData server;
  server.context = Context(1, false);
  server.context.trace_state = "rojo=1";
  server.parent_span_id = Context(9, true).span_id;
  server.parent_remote = true;
  server.name = "POST /rerank";
  server.kind = SpanKind::kServer;
  server.start_unix_nanos = 1'700'000'000'000'000'001;
  server.end_unix_nanos = 1'700'000'000'000'500'002;
  server.attributes = {{"http.request.method", std::string("POST")},
                       {"http.response.status_code", int64_t{200}},
                       {"tide.batch.fill", 0.5},
                       {"tide.degraded", true}};
  server.dropped_attributes = 3;
  server.events = {SpanEvent{"queued", 1'700'000'000'000'000'100, {{"depth", int64_t{4}}}, 1}};
  server.dropped_events = 2;
  SpanContext linked = Context(5, false);
  linked.trace_state = "congo=2";
  server.links = {SpanLink{linked, {{"tide.rows", int64_t{7}}}, 4}};
  server.dropped_links = 5;
  server.status = StatusCode::kError;
  server.status_message = "model failed";

  SpanData root;
  root.context = Context(20, false);
  root.context.trace_flags = 0;
  root.name = "batch";
  root.kind = SpanKind::kInternal;
  root.start_unix_nanos = 10;
  root.end_unix_nanos = 20;

  const Resource resource = MakeResource("svc", {});
  const collector::ExportTraceServiceRequest decoded = RoundTrip({server, root}, resource);

  ASSERT_EQ(decoded.resource_spans_size(), 1);
  const trace_pb::ResourceSpans& rs = decoded.resource_spans(0);
  EXPECT_EQ(StringAttribute(rs.resource().attributes(), "service.name"), "svc");
  ASSERT_EQ(rs.scope_spans_size(), 1);
  EXPECT_EQ(rs.scope_spans(0).scope().name(), "tide");
  EXPECT_EQ(rs.scope_spans(0).scope().version(), std::string(tide::Version()));
  ASSERT_EQ(rs.scope_spans(0).spans_size(), 2);

  const trace_pb::Span& s = rs.scope_spans(0).spans(0);
  EXPECT_EQ(s.trace_id(), Bytes(server.context.trace_id));
  EXPECT_EQ(s.span_id(), Bytes(server.context.span_id));
  EXPECT_EQ(s.trace_state(), "rojo=1");
  EXPECT_EQ(s.parent_span_id(), Bytes(server.parent_span_id));
  EXPECT_EQ(s.flags(), 0x01u | 0x100u | 0x200u);
  EXPECT_EQ(s.name(), "POST /rerank");
  EXPECT_EQ(s.kind(), trace_pb::Span::SPAN_KIND_SERVER);
  EXPECT_EQ(s.start_time_unix_nano(), 1'700'000'000'000'000'001u);
  EXPECT_EQ(s.end_time_unix_nano(), 1'700'000'000'000'500'002u);
  ASSERT_EQ(s.attributes_size(), 4);
  EXPECT_EQ(s.attributes(0).key(), "http.request.method");
  EXPECT_EQ(s.attributes(0).value().string_value(), "POST");
  EXPECT_EQ(s.attributes(1).value().int_value(), 200);
  EXPECT_EQ(s.attributes(2).value().double_value(), 0.5);
  EXPECT_TRUE(s.attributes(3).value().bool_value());
  EXPECT_EQ(s.attributes(3).value().value_case(), common_pb::AnyValue::kBoolValue);
  EXPECT_EQ(s.dropped_attributes_count(), 3u);
  ASSERT_EQ(s.events_size(), 1);
  EXPECT_EQ(s.events(0).name(), "queued");
  EXPECT_EQ(s.events(0).time_unix_nano(), 1'700'000'000'000'000'100u);
  EXPECT_EQ(s.events(0).attributes(0).key(), "depth");
  EXPECT_EQ(s.events(0).attributes(0).value().int_value(), 4);
  EXPECT_EQ(s.events(0).dropped_attributes_count(), 1u);
  EXPECT_EQ(s.dropped_events_count(), 2u);
  ASSERT_EQ(s.links_size(), 1);
  EXPECT_EQ(s.links(0).trace_id(), Bytes(linked.trace_id));
  EXPECT_EQ(s.links(0).span_id(), Bytes(linked.span_id));
  EXPECT_EQ(s.links(0).trace_state(), "congo=2");
  EXPECT_EQ(s.links(0).attributes(0).key(), "tide.rows");
  EXPECT_EQ(s.links(0).attributes(0).value().int_value(), 7);
  EXPECT_EQ(s.links(0).dropped_attributes_count(), 4u);
  EXPECT_EQ(s.links(0).flags(), 0x01u | 0x100u);  // local context: has-is-remote, not remote
  EXPECT_EQ(s.dropped_links_count(), 5u);
  EXPECT_EQ(s.status().code(), trace_pb::Status::STATUS_CODE_ERROR);
  EXPECT_EQ(s.status().message(), "model failed");

  const trace_pb::Span& r = rs.scope_spans(0).spans(1);
  EXPECT_EQ(r.parent_span_id(), "");  // a root
  EXPECT_EQ(r.flags(), 0u);           // not sampled, no parent
  EXPECT_EQ(r.kind(), trace_pb::Span::SPAN_KIND_INTERNAL);
  EXPECT_FALSE(r.has_status());
  EXPECT_EQ(r.attributes_size(), 0);
}

TEST(OtlpEncodingTest, ResourceDefaultsAndPrecedence) {
  Resource resource = MakeResource("", {});
  EXPECT_EQ(resource.attributes,
            (std::vector<Attribute>{{"telemetry.sdk.name", std::string("tide")},
                                    {"telemetry.sdk.language", std::string("cpp")},
                                    {"telemetry.sdk.version", std::string(tide::Version())},
                                    {"service.name", std::string("tide")}}));
  const std::vector<Attribute> env = {{"service.name", std::string("from-attributes")},
                                      {"deployment.environment", std::string("prod")}};
  resource = MakeResource("", env);
  const collector::ExportTraceServiceRequest a = RoundTrip({}, resource);
  EXPECT_EQ(StringAttribute(a.resource_spans(0).resource().attributes(), "service.name"), "from-attributes");
  EXPECT_EQ(StringAttribute(a.resource_spans(0).resource().attributes(), "deployment.environment"), "prod");
  resource = MakeResource("from-service-name", env);
  const collector::ExportTraceServiceRequest b = RoundTrip({}, resource);
  EXPECT_EQ(StringAttribute(b.resource_spans(0).resource().attributes(), "service.name"), "from-service-name");
  EXPECT_EQ(b.resource_spans(0).resource().attributes_size(), 5);  // each key once
}

}  // namespace
}  // namespace tide::tracing
