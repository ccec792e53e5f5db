#include "tracing/otlp_encoding.h"

#include <string>

#include "common/version.h"

namespace tide::tracing {
namespace {

namespace common_pb = opentelemetry::proto::common::v1;
namespace trace_pb = opentelemetry::proto::trace::v1;

constexpr uint32_t kHasIsRemote = 0x100;
constexpr uint32_t kIsRemote = 0x200;

void Upsert(std::vector<Attribute>& attributes, std::string key, AttributeValue value) {
  for (Attribute& a : attributes) {
    if (a.key == key) {
      a.value = std::move(value);
      return;
    }
  }
  attributes.push_back(Attribute{std::move(key), std::move(value)});
}

void SetValue(const AttributeValue& value, common_pb::AnyValue* out) {
  if (const auto* s = std::get_if<std::string>(&value)) {
    out->set_string_value(*s);
  } else if (const auto* i = std::get_if<int64_t>(&value)) {
    out->set_int_value(*i);
  } else if (const auto* d = std::get_if<double>(&value)) {
    out->set_double_value(*d);
  } else {
    out->set_bool_value(std::get<bool>(value));
  }
}

template <typename RepeatedKeyValue>
void AddAttributes(const std::vector<Attribute>& attributes, RepeatedKeyValue* out) {
  out->Reserve(static_cast<int>(attributes.size()));
  for (const Attribute& a : attributes) {
    common_pb::KeyValue* kv = out->Add();
    kv->set_key(a.key);
    SetValue(a.value, kv->mutable_value());
  }
}

template <size_t N>
std::string Bytes(const std::array<uint8_t, N>& id) {
  return std::string(reinterpret_cast<const char*>(id.data()), N);
}

trace_pb::Span::SpanKind Kind(SpanKind kind) {
  switch (kind) {
    case SpanKind::kServer: return trace_pb::Span::SPAN_KIND_SERVER;
    case SpanKind::kClient: return trace_pb::Span::SPAN_KIND_CLIENT;
    case SpanKind::kInternal: break;
  }
  return trace_pb::Span::SPAN_KIND_INTERNAL;
}

trace_pb::Status::StatusCode Code(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return trace_pb::Status::STATUS_CODE_OK;
    case StatusCode::kError: return trace_pb::Status::STATUS_CODE_ERROR;
    case StatusCode::kUnset: break;
  }
  return trace_pb::Status::STATUS_CODE_UNSET;
}

void EncodeSpan(const SpanData& span, trace_pb::Span* out) {
  out->set_trace_id(Bytes(span.context.trace_id));
  out->set_span_id(Bytes(span.context.span_id));
  out->set_trace_state(span.context.trace_state);
  uint32_t flags = span.context.trace_flags;
  if (IsValid(span.parent_span_id)) {
    out->set_parent_span_id(Bytes(span.parent_span_id));
    flags |= kHasIsRemote | (span.parent_remote ? kIsRemote : 0);
  }
  out->set_flags(flags);
  out->set_name(span.name);
  out->set_kind(Kind(span.kind));
  out->set_start_time_unix_nano(static_cast<uint64_t>(span.start_unix_nanos));
  out->set_end_time_unix_nano(static_cast<uint64_t>(span.end_unix_nanos));
  AddAttributes(span.attributes, out->mutable_attributes());
  out->set_dropped_attributes_count(span.dropped_attributes);
  for (const SpanEvent& event : span.events) {
    trace_pb::Span::Event* e = out->add_events();
    e->set_time_unix_nano(static_cast<uint64_t>(event.time_unix_nanos));
    e->set_name(event.name);
    AddAttributes(event.attributes, e->mutable_attributes());
    e->set_dropped_attributes_count(event.dropped_attributes);
  }
  out->set_dropped_events_count(span.dropped_events);
  for (const SpanLink& link : span.links) {
    trace_pb::Span::Link* l = out->add_links();
    l->set_trace_id(Bytes(link.context.trace_id));
    l->set_span_id(Bytes(link.context.span_id));
    l->set_trace_state(link.context.trace_state);
    AddAttributes(link.attributes, l->mutable_attributes());
    l->set_dropped_attributes_count(link.dropped_attributes);
    l->set_flags(link.context.trace_flags | kHasIsRemote | (link.context.remote ? kIsRemote : 0));
  }
  out->set_dropped_links_count(span.dropped_links);
  if (span.status != StatusCode::kUnset) {
    out->mutable_status()->set_code(Code(span.status));
    out->mutable_status()->set_message(span.status_message);
  }
}

}  // namespace

Resource MakeResource(std::string_view service_name, const std::vector<Attribute>& attributes) {
  Resource resource;
  Upsert(resource.attributes, "telemetry.sdk.name", std::string("tide"));
  Upsert(resource.attributes, "telemetry.sdk.language", std::string("cpp"));
  Upsert(resource.attributes, "telemetry.sdk.version", std::string(tide::Version()));
  bool has_service_name = false;
  for (const Attribute& a : attributes) {
    Upsert(resource.attributes, a.key, a.value);
    has_service_name = has_service_name || a.key == "service.name";
  }
  if (!service_name.empty()) {
    Upsert(resource.attributes, "service.name", std::string(service_name));
  } else if (!has_service_name) {
    Upsert(resource.attributes, "service.name", std::string("tide"));
  }
  return resource;
}

void EncodeExportRequest(const std::vector<SpanData>& spans, const Resource& resource,
                         opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest* request) {
  request->Clear();
  trace_pb::ResourceSpans* resource_spans = request->add_resource_spans();
  AddAttributes(resource.attributes, resource_spans->mutable_resource()->mutable_attributes());
  trace_pb::ScopeSpans* scope_spans = resource_spans->add_scope_spans();
  scope_spans->mutable_scope()->set_name("tide");
  scope_spans->mutable_scope()->set_version(std::string(tide::Version()));
  scope_spans->mutable_spans()->Reserve(static_cast<int>(spans.size()));
  for (const SpanData& span : spans) EncodeSpan(span, scope_spans->add_spans());
}

}  // namespace tide::tracing
