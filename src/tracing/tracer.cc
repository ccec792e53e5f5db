#include "tracing/tracer.h"

#include <utility>

namespace tide::tracing {

Tracer::Tracer(std::shared_ptr<const Sampler> sampler, SpanProcessor* processor, const WallClock* clock)
    : sampler_(std::move(sampler)), processor_(processor), clock_(clock ? clock : SystemWallClock::Get()) {}

Span Tracer::StartSpan(std::string_view name, StartSpanOptions options) const {
  const SpanContext* parent = options.parent && options.parent->IsValid() ? &*options.parent : nullptr;
  SpanContext context;
  context.trace_id = parent ? parent->trace_id : IdGenerator::NewTraceId();
  context.span_id = IdGenerator::NewSpanId();
  if (parent) context.trace_state = parent->trace_state;
  const bool sampled = options.sampled.has_value()
                           ? *options.sampled
                           : sampler_->ShouldSample(parent, context.trace_id) == SamplingDecision::kRecordAndSample;
  const uint8_t inherited = parent ? static_cast<uint8_t>(parent->trace_flags & ~kTraceFlagSampled) : 0;
  context.trace_flags = static_cast<uint8_t>(inherited | (sampled ? kTraceFlagSampled : 0));
  if (!sampled || processor_ == nullptr) return Span(std::move(context), nullptr);

  auto recording = std::make_unique<Span::Recording>();
  recording->processor = processor_;
  recording->clock = clock_;
  {
    absl::MutexLock lock(&recording->mu);
    SpanData& data = recording->data;
    data.context = context;
    if (parent) {
      data.parent_span_id = parent->span_id;
      data.parent_remote = parent->remote;
    }
    data.name = std::string(name);
    data.kind = options.kind;
    data.start_unix_nanos = options.start_unix_nanos ? *options.start_unix_nanos : clock_->NowUnixNanos();
  }
  Span span(std::move(context), std::move(recording));
  for (Attribute& attribute : options.attributes) span.Set(attribute.key, std::move(attribute.value));
  for (SpanLink& link : options.links) span.AddLink(link.context, std::move(link.attributes));
  return span;
}

}  // namespace tide::tracing
