// tide::metrics — the three Prometheus metric kinds: Counter, Gauge, Histogram.
//
// Contract:
//  - Objects of these classes are owned by a Family (see registry.h) and live as long as the
//    Registry that created them; callers hold plain pointers, which stay valid and never move.
//  - Thread safety: every method is safe to call concurrently from any thread. Updates are lock-free
//    atomics (no allocation, no mutex) so they can sit on the request hot path.
//  - Reads (Value(), Snapshot()) are not a consistent cut across concurrent writers: a histogram
//    snapshot taken while another thread observes may see the bucket but not yet the sum. The
//    rendered _count is derived from the buckets so that _count always equals the +Inf bucket.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

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

  void Observe(double value);
  Snapshot TakeSnapshot() const;
  const std::vector<double>& upper_bounds() const { return upper_bounds_; }

 private:
  std::vector<double> upper_bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> bucket_counts_;  // per bucket, not cumulative; +Inf last
  std::atomic<double> sum_{0.0};
};

// Latency buckets in seconds from 0.1 ms to 10 s (1-2.5-5 steps): suits both a tokenizer call and a
// large batch on a CPU.
std::vector<double> DefaultLatencyBuckets();

// `count` buckets starting at `start`, each `factor` times the previous (factor > 1, start > 0).
std::vector<double> ExponentialBuckets(double start, double factor, int count);

}  // namespace tide::metrics
