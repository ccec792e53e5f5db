// tide::tracing Span: the handle of one operation in flight (Tracer::StartSpan makes it).
//
// Contract:
//  - context() is valid for every span the Tracer starts, sampled or not, so that it can be
//    propagated (traceparent) and logged (trace and span ids). A default-constructed Span is a no-op
//    with an invalid context.
//  - A span that is not recording (unsampled, or no processor) holds no recording at all: every
//    setter returns at once without allocating; IsRecording() says which.
//  - SetAttribute overwrites a key already set; past kMaxAttributes new keys are dropped and counted.
//    Note the const char* overload: a string literal is a string attribute, not a bool.
//  - SetStatus follows the spec: kUnset is ignored, kOk is final, the message is kept only with
//    kError.
//  - Thread-safe: setters and End may be called from several threads at once on the same Span (a
//    batch ended by an instance thread while a request thread annotates); only moving or destroying
//    the Span must not race with them. End() is idempotent: the first call records the end time (an
//    explicit one, or the tracer's WallClock) and hands the data to the processor, outside any lock;
//    later calls and setters after End do nothing. The destructor ends a span not yet ended.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "tracing/span_context.h"
#include "tracing/span_data.h"
#include "tracing/span_processor.h"
#include "tracing/wall_clock.h"

namespace tide::tracing {

class Span {
 public:
  Span() = default;
  Span(Span&& other) noexcept = default;
  Span& operator=(Span&& other) noexcept;
  ~Span() { End(); }

  const SpanContext& context() const { return context_; }
  bool IsRecording() const { return recording_ != nullptr; }

  void SetAttribute(std::string_view key, std::string_view value);
  void SetAttribute(std::string_view key, const char* value) { SetAttribute(key, std::string_view(value)); }
  void SetAttribute(std::string_view key, int64_t value);
  void SetAttribute(std::string_view key, int value) { SetAttribute(key, static_cast<int64_t>(value)); }
  void SetAttribute(std::string_view key, double value);
  void SetAttribute(std::string_view key, bool value);
  void AddEvent(std::string_view name, std::vector<Attribute> attributes = {});
  void AddEvent(std::string_view name, int64_t time_unix_nanos, std::vector<Attribute> attributes);
  void AddLink(const SpanContext& context, std::vector<Attribute> attributes = {});
  void SetStatus(StatusCode code, std::string_view message = {});
  void End();
  void End(int64_t end_unix_nanos);

 private:
  friend class Tracer;
  struct Recording {
    absl::Mutex mu;
    SpanData data ABSL_GUARDED_BY(mu);
    bool ended ABSL_GUARDED_BY(mu) = false;
    SpanProcessor* processor = nullptr;
    const WallClock* clock = nullptr;
  };
  Span(SpanContext context, std::unique_ptr<Recording> recording)
      : context_(std::move(context)), recording_(std::move(recording)) {}
  void Set(std::string_view key, AttributeValue value);
  void Finish(std::optional<int64_t> end_unix_nanos);

  SpanContext context_;
  std::unique_ptr<Recording> recording_;
};

}  // namespace tide::tracing
