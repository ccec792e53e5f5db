// tide::metrics — the three Prometheus metric kinds: Counter, Gauge, Histogram.
//
// Contract:
//  - Objects of these classes are owned by a Family (see registry.h) and live as long as the
//    Registry that created them; callers hold plain pointers, which stay valid and never move.
//  - Thread safety: every method is safe to call concurrently from any thread. Updates are lock-free
//    atomics (no allocation, no mutex) so they can sit on the request hot path.
//  - A histogram may keep, per bucket, the latest observation given with a trace id (an OpenMetrics
//    exemplar, ObserveWithExemplar); only that call takes a lock.
//  - Reads (Value(), Snapshot()) are not a consistent cut across concurrent writers: a histogram
//    snapshot taken while another thread observes may see the bucket but not yet the sum. The
//    rendered _count is derived from the buckets so that _count always equals the +Inf bucket.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tide::metrics {

// A monotonically increasing value (requests served, tokens processed).
class Counter {
 public:
  // Adds `amount`; negative amounts are ignored (a counter never goes down).
  void Increment(double amount = 1.0);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A value that goes up and down (queue depth, in-flight requests, loaded models).
class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Increment(double amount = 1.0);
  void Decrement(double amount = 1.0) { Increment(-amount); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Counts observations into buckets with upper bounds `le` (value <= bound), plus an implicit +Inf
// bucket, and keeps their sum.
class Histogram {
 public:
  struct Snapshot {
    std::vector<double> upper_bounds;          // without +Inf
    std::vector<uint64_t> cumulative_counts;   // size upper_bounds.size() + 1; the last is +Inf
    double sum = 0.0;
    uint64_t count = 0;                        // == cumulative_counts.back()
  };

  // `upper_bounds` must be strictly increasing and finite (Registry validates this).
  explicit Histogram(std::vector<double> upper_bounds);

  // An OpenMetrics exemplar: one observation named by the trace it belongs to.
  struct Exemplar {
    double value = 0.0;
    std::string trace_id;  // hex
    std::string span_id;   // hex
    double unix_seconds = 0.0;
  };

  void Observe(double value);
  // Observe, and keep this observation as its bucket's exemplar (the most recent one wins). Takes
  // a mutex of this histogram (only traced observations come here; Observe stays lock-free).
  void ObserveWithExemplar(double value, std::string_view trace_id, std::string_view span_id);
  Snapshot TakeSnapshot() const;
  // Each bucket's latest exemplar (+Inf last); empty when there has been none.
  std::vector<std::optional<Exemplar>> Exemplars() const;
  const std::vector<double>& upper_bounds() const { return upper_bounds_; }

 private:
  std::vector<double> upper_bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> bucket_counts_;  // per bucket, not cumulative; +Inf last
  std::atomic<double> sum_{0.0};
  mutable absl::Mutex exemplar_mu_;
  std::vector<std::optional<Exemplar>> exemplars_ ABSL_GUARDED_BY(exemplar_mu_);  // sized at the first
};

// Latency buckets in seconds from 0.1 ms to 10 s (1-2.5-5 steps): suits both a tokenizer call and a
// large batch on a CPU.
std::vector<double> DefaultLatencyBuckets();

// `count` buckets starting at `start`, each `factor` times the previous (factor > 1, start > 0).
std::vector<double> ExponentialBuckets(double start, double factor, int count);

}  // namespace tide::metrics
