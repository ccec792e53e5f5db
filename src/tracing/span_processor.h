// tide::tracing SpanProcessor: where a recorded span goes when it ends (BatchSpanProcessor in
// production, a collecting fake in tests).
//
// Contract: OnEnd is called once per recorded span, from whichever thread ended it, concurrently;
// implementations are thread-safe and must not block the caller on I/O.
#pragma once

#include "tracing/span_data.h"

namespace tide::tracing {

class SpanProcessor {
 public:
  virtual ~SpanProcessor() = default;
  virtual void OnEnd(SpanData span) = 0;
};

}  // namespace tide::tracing
