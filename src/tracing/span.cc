#include "tracing/span.h"

#include <optional>
#include <utility>

namespace tide::tracing {
namespace {

void SetIn(std::vector<Attribute>& attributes, uint32_t& dropped, std::string_view key, AttributeValue value) {
  for (Attribute& attribute : attributes) {
    if (attribute.key == key) {
      attribute.value = std::move(value);
      return;
    }
  }
  if (attributes.size() >= kMaxAttributes) {
    ++dropped;
    return;
  }
  attributes.push_back(Attribute{std::string(key), std::move(value)});
}

uint32_t Trim(std::vector<Attribute>& attributes) {
  if (attributes.size() <= kMaxAttributes) return 0;
  const uint32_t dropped = static_cast<uint32_t>(attributes.size() - kMaxAttributes);
  attributes.resize(kMaxAttributes);
  return dropped;
}

}  // namespace

Span& Span::operator=(Span&& other) noexcept {
  if (this != &other) {
    End();
    context_ = std::move(other.context_);
    recording_ = std::move(other.recording_);
  }
  return *this;
}

void Span::Set(std::string_view key, AttributeValue value) {
  absl::MutexLock lock(&recording_->mu);
  if (recording_->ended) return;
  SetIn(recording_->data.attributes, recording_->data.dropped_attributes, key, std::move(value));
}

void Span::SetAttribute(std::string_view key, std::string_view value) {
  if (recording_) Set(key, std::string(value));
}
void Span::SetAttribute(std::string_view key, int64_t value) {
  if (recording_) Set(key, value);
}
void Span::SetAttribute(std::string_view key, double value) {
  if (recording_) Set(key, value);
}
void Span::SetAttribute(std::string_view key, bool value) {
  if (recording_) Set(key, value);
}

void Span::AddEvent(std::string_view name, std::vector<Attribute> attributes) {
  if (!recording_) return;
  AddEvent(name, recording_->clock->NowUnixNanos(), std::move(attributes));
}

void Span::AddEvent(std::string_view name, int64_t time_unix_nanos, std::vector<Attribute> attributes) {
  if (!recording_) return;
  SpanEvent event{std::string(name), time_unix_nanos, std::move(attributes), 0};
  event.dropped_attributes = Trim(event.attributes);
  absl::MutexLock lock(&recording_->mu);
  if (recording_->ended) return;
  if (recording_->data.events.size() >= kMaxEvents) {
    ++recording_->data.dropped_events;
    return;
  }
  recording_->data.events.push_back(std::move(event));
}

void Span::AddLink(const SpanContext& context, std::vector<Attribute> attributes) {
  if (!recording_ || !context.IsValid()) return;
  SpanLink link{context, std::move(attributes), 0};
  link.dropped_attributes = Trim(link.attributes);
  absl::MutexLock lock(&recording_->mu);
  if (recording_->ended) return;
  if (recording_->data.links.size() >= kMaxLinks) {
    ++recording_->data.dropped_links;
    return;
  }
  recording_->data.links.push_back(std::move(link));
}

void Span::SetStatus(StatusCode code, std::string_view message) {
  if (!recording_ || code == StatusCode::kUnset) return;
  absl::MutexLock lock(&recording_->mu);
  SpanData& data = recording_->data;
  if (recording_->ended || data.status == StatusCode::kOk) return;
  data.status = code;
  data.status_message = code == StatusCode::kError ? std::string(message) : std::string();
}

void Span::End() { Finish(std::nullopt); }
void Span::End(int64_t end_unix_nanos) { Finish(end_unix_nanos); }

void Span::Finish(std::optional<int64_t> end_unix_nanos) {
  if (!recording_) return;
  SpanData data;
  {
    absl::MutexLock lock(&recording_->mu);
    if (recording_->ended) return;
    recording_->ended = true;
    recording_->data.end_unix_nanos = end_unix_nanos ? *end_unix_nanos : recording_->clock->NowUnixNanos();
    data = std::move(recording_->data);
  }
  recording_->processor->OnEnd(std::move(data));
}

}  // namespace tide::tracing
