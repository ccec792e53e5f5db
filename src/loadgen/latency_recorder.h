// tide::loadgen::LatencyRecorder — exact latency samples and their percentiles.
//
// Contract:
//  - Keeps every sample (milliseconds, as double). At load-generator rates (at most tens of
//    thousands of requests per run) exact sorted samples cost less than a log-bucket histogram's
//    error analysis, and the percentiles are exact.
//  - Percentiles use the nearest-rank definition: P(q) is the smallest sample such that at least
//    q% of the samples are <= it, i.e. sorted[ceil(q/100 * n) - 1] (P(0) is the minimum). This is
//    what perf_analyzer and wrk report; no interpolation, so every reported value was observed.
//  - Not thread-safe: one recorder per event-loop thread; Merge() combines them.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace tide::loadgen {

struct LatencySummary {
  size_t count = 0;
  double mean_ms = 0;
  double min_ms = 0;
  double p50_ms = 0;
  double p90_ms = 0;
  double p95_ms = 0;
  double p99_ms = 0;
  double p999_ms = 0;
  double max_ms = 0;
};

// Nearest-rank percentile of an ascending, non-empty span; q in [0, 100]. 0 for an empty span.
double PercentileOfSorted(std::span<const double> sorted, double q);

struct HistogramBucket {
  double lower_ms = 0;  // inclusive
  double upper_ms = 0;  // exclusive (the last bucket includes its upper bound)
  size_t count = 0;
};

class LatencyRecorder {
 public:
  void Record(double latency_ms) { samples_.push_back(latency_ms); }
  void Merge(const LatencyRecorder& other);
  void Clear() { samples_.clear(); }
  size_t count() const { return samples_.size(); }
  const std::vector<double>& samples() const { return samples_; }

  double Percentile(double q) const;  // sorts a copy
  LatencySummary Summarize() const;
  // Log-spaced buckets (buckets_per_decade per factor of 10) covering [min, max]; empty when
  // there are no samples. Used for the HTML histogram.
  std::vector<HistogramBucket> LogHistogram(int buckets_per_decade = 10) const;

 private:
  std::vector<double> samples_;
};

}  // namespace tide::loadgen
