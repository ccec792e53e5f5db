// tide::pipeline::Outcome — what a request came to, in domain terms, whatever edge carried it: the
// error (with its kind, common/error.h) or OK, the model version that answered, whether the answer
// is degraded, the score-cache hits and the stage timings. The edges render an answer from it and
// the completion recorder (completion_recorder.h) writes the metrics and the access-log record from
// it; neither looks at rendered bytes.
//
// Contract: a plain value; thread-compatible.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "serving/inference_request.h"
#include "serving/scoring.h"

namespace tide::pipeline {

using Steady = std::chrono::steady_clock;

struct Outcome {
  // OK, or the error the request is answered with (its kind decides every edge's status code).
  absl::Status status;
  // The model version that answered; empty until one was chosen (a refusal, a bad request).
  std::string model;
  std::optional<int64_t> version;
  // Set: the answer is a fallback's (the breaker was open); its name (serving::kFallbackBm25, ...).
  const char* fallback = nullptr;
  // Documents whose score came from the score cache (rerank); `cache_on`: the core has a cache.
  size_t cache_hits = 0;
  bool cache_on = false;
  // The request's documents (rerank) and the tokens the model ran (0: unknown), for its trace.
  size_t documents = 0;
  size_t tokens = 0;
  // A model's answer's stage timings (tokenize, queue, inference); unset for a fallback's answer
  // and for answers without model work. `post`: when the answer left the model (postprocess from
  // there).
  std::optional<serving::StageTimings> timings;
  Steady::time_point post{};
  bool completed = false;  // Complete ran

  void set_model(std::string name, int64_t v) {
    model = std::move(name);
    version = v;
  }
  std::string version_label() const { return version.has_value() ? std::to_string(*version) : std::string(); }
  // Degraded: a fallback answered, or the answer is the "no fallback while the breaker is open"
  // error (serving::DegradedUnavailableError). Both edges mark such answers x-tide-degraded.
  bool degraded() const { return fallback != nullptr || serving::IsDegradedUnavailable(status); }
  // The timings of a model's answer completed now: postprocess from `post`, total from
  // `received_at`. Null when there are none (an error, a fallback's answer). Completed once: a
  // second call (the edge that rendered them, then its recorder) returns the same timings.
  const serving::StageTimings* Complete(Steady::time_point received_at) {
    if (!status.ok() || fallback != nullptr || !timings.has_value()) return nullptr;
    if (completed) return &*timings;
    completed = true;
    const Steady::time_point now = Steady::now();
    timings->postprocess = now - post;
    timings->total = now - received_at;
    return &*timings;
  }
};

}  // namespace tide::pipeline
