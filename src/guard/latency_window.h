// tide::guard::LatencyWindow — rolling request statistics over a time window: request, error and
// slow-request counts and a latency histogram from which quantiles (P99) are estimated.
//
// Contract:
//  - Not thread-safe: the owner (CircuitBreaker) serialises calls under its own mutex.
//  - Bounded memory, no allocation after construction, no per-request storage: the window is a
//    ring of `slices` fixed-size histograms, one per slice of window/slices; a running total over
//    the live slices is kept, so Totals() is O(1) and Quantile() is O(kBuckets).
//  - Time comes from the caller (`now`), which makes the window testable with a FakeClock. The
//    window covers the current slice and the slices-1 before it, i.e. between
//    (slices-1)/slices and 1 window of history. A `now` older than the newest slice seen is
//    counted into the newest slice (callers read the clock outside their lock, so threads may
//    arrive slightly out of order).
//  - Latency buckets are log-spaced: exact below 4 µs, then four linear sub-buckets per power of
//    two of microseconds (bucket width at most 25% of its lower bound), up to ~6 days; longer
//    latencies land in the last bucket. Quantile() answers the bucket's upper bound, so it
//    over-estimates by at most 25%.
//  - "Slow" is exact, not bucketed: a sample is slow when latency > slow_threshold (if > 0). This
//    lets a caller decide "P99 > threshold" exactly with SlowExceedsQuantile().
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <vector>

namespace tide::guard {

class LatencyWindow {
 public:
  using duration = std::chrono::steady_clock::duration;
  using time_point = std::chrono::steady_clock::time_point;

  static constexpr int kMaxExponent = 39;             // 2^39 µs ≈ 6.4 days
  static constexpr int kBuckets = kMaxExponent * 4;   // 156

  struct Totals {
    int64_t requests = 0;
    int64_t errors = 0;
    int64_t slow = 0;  // latency > slow_threshold
  };

  // `window` > 0, 1 <= `slices` and window/slices > 0 (the caller validates; CircuitBreaker::Create
  // does). `slow_threshold` <= 0 disables slow counting. `origin` anchors slice boundaries.
  LatencyWindow(duration window, int slices, duration slow_threshold, time_point origin);

  void Add(time_point now, duration latency, bool ok);

  // Statistics of the live slices at `now` (older slices are expired first).
  Totals GetTotals(time_point now);

  // Estimated q-quantile (0 < q <= 1, nearest rank) of the live latencies; zero when empty.
  duration Quantile(time_point now, double q);

  // True when more samples are slow than a q-quantile allows, i.e. the nearest-rank q-quantile
  // latency is > slow_threshold. Exact (no bucketing). False when slow counting is off or empty.
  bool SlowExceedsQuantile(time_point now, double q);

  // Forgets every sample (the breaker calls this when it closes, so that stale latencies from
  // before an outage cannot re-open it).
  void Clear();

  // Bucket of a latency and the exclusive upper bound of a bucket, in microseconds.
  static int BucketIndex(duration latency);
  static int64_t BucketUpperBoundMicros(int index);

 private:
  // Implementation details follow.
  struct Slice {
    int64_t number = -1;  // absolute slice number since origin; -1 = empty
    Totals totals;
    std::array<uint32_t, kBuckets> counts{};
  };

  // Moves the ring forward to the slice containing `now`, evicting slices that left the window.
  void Advance(time_point now);
  void Evict(Slice& slice);

  const duration slice_length_;
  const duration slow_threshold_;
  const time_point origin_;
  std::vector<Slice> ring_;
  int64_t current_ = 0;  // newest slice number seen
  Totals totals_;
  std::array<uint64_t, kBuckets> total_counts_{};
};

}  // namespace tide::guard
