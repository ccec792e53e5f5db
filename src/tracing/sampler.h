// tide::tracing samplers: whether a new span is recorded and exported (OTEL_TRACES_SAMPLER).
//
// Contract:
//  - ShouldSample(parent, trace_id) is a pure function of its inputs: thread-safe, no allocation.
//    `parent` is null (or invalid) for a root span.
//  - AlwaysOn / AlwaysOff: always / never.
//  - TraceIdRatio(ratio): the OpenTelemetry specification's consistent, trace-id-based decision
//    (probability sampling, W3C random trace ids): the randomness R is the trace id's least
//    significant 56 bits (its last 7 bytes, big-endian), the rejection threshold
//    T = round((1 - ratio) * 2^56), and the span is sampled iff R >= T. So ratio 1 samples every
//    trace, ratio 0 none, and a trace sampled at some ratio is sampled at every larger one. The
//    ratio is clamped into [0, 1]; the parent is ignored. (tide does not write the `ot=th:`
//    tracestate entry.)
//  - ParentBased(root): a valid parent decides by its sampled flag (remote or local alike, the
//    spec's defaults); without one `root` decides.
//  - MakeSampler(name, arg): the OTEL_TRACES_SAMPLER names always_on, always_off, traceidratio,
//    parentbased_always_on, parentbased_always_off, parentbased_traceidratio; `arg`
//    (OTEL_TRACES_SAMPLER_ARG) is the ratio of the two ratio samplers, a number in [0, 1], 1.0 when
//    absent; it is ignored for the other samplers, as the SDKs do.
//    kInvalidArgument with a message naming the bad name or argument and the allowed values.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "tracing/span_context.h"

namespace tide::tracing {

enum class SamplingDecision { kDrop, kRecordAndSample };

class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual SamplingDecision ShouldSample(const SpanContext* parent, const TraceId& trace_id) const = 0;
  // "AlwaysOnSampler", "TraceIdRatioBased{0.25}", "ParentBased{root=...}"
  virtual std::string Description() const = 0;
};

std::unique_ptr<Sampler> MakeAlwaysOnSampler();
std::unique_ptr<Sampler> MakeAlwaysOffSampler();
std::unique_ptr<Sampler> MakeTraceIdRatioSampler(double ratio);
std::unique_ptr<Sampler> MakeParentBasedSampler(std::unique_ptr<Sampler> root);

absl::StatusOr<std::unique_ptr<Sampler>> MakeSampler(std::string_view name,
                                                     std::optional<std::string_view> arg);

}  // namespace tide::tracing
