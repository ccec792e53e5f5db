// tide::tracing Tracer: starts spans — picks the ids, asks the sampler, and gives a recording span
// its processor and clock.
//
// Contract:
//  - StartSpan(name, options): a child of options.parent when that is a valid context (same trace
//    id, its tracestate, parent span id = its span id), else a root with a new trace id; always a
//    new span id. The sampler decides the sampled flag; the span records only when sampled and the
//    tracer has a processor (a tracer without one propagates and names ids but records nothing, for
//    export off). A span that does not record allocates nothing beyond the Span handle.
//  - options.links (with attributes) are kept on a recording span (invalid contexts are skipped);
//    options.start_unix_nanos overrides the clock (a span started from a time taken earlier, e.g.
//    a request's arrival). options.attributes are set at start.
//  - options.sampled, when set, is the decision instead of the sampler's: a root span that follows
//    another span's decision (tide.shadow follows the live request it links to, which ran earlier).
//  - Thread-safe; the sampler, processor and clock must outlive the tracer and its spans.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "tracing/sampler.h"
#include "tracing/span.h"
#include "tracing/span_context.h"
#include "tracing/span_data.h"
#include "tracing/span_processor.h"
#include "tracing/wall_clock.h"

namespace tide::tracing {

struct StartSpanOptions {
  SpanKind kind = SpanKind::kInternal;
  std::optional<SpanContext> parent;
  std::vector<SpanLink> links;
  std::vector<Attribute> attributes;
  std::optional<int64_t> start_unix_nanos;
  std::optional<bool> sampled;  // set: recorded as this says, the sampler is not asked
};

class Tracer {
 public:
  // `processor` may be null (nothing is recorded); `clock` null means SystemWallClock.
  Tracer(std::shared_ptr<const Sampler> sampler, SpanProcessor* processor, const WallClock* clock = nullptr);

  Span StartSpan(std::string_view name, StartSpanOptions options = {}) const;

  const WallClock& clock() const { return *clock_; }

 private:
  std::shared_ptr<const Sampler> sampler_;
  SpanProcessor* processor_;
  const WallClock* clock_;
};

}  // namespace tide::tracing
