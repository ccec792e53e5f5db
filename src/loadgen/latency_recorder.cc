#include "loadgen/latency_recorder.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tide::loadgen {

double PercentileOfSorted(std::span<const double> sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t n = sorted.size();
  if (q <= 0) return sorted.front();
  if (q >= 100) return sorted.back();
  // ceil(q/100 * n) computed on integers where possible to avoid 0.1-style rounding surprises:
  // q is given with at most 3 decimals (99.9), so scale by 1000.
  const long long scaled_q = std::llround(q * 1000.0);
  const long long numerator = scaled_q * static_cast<long long>(n);
  long long rank = numerator / 100000 + (numerator % 100000 != 0 ? 1 : 0);
  if (rank < 1) rank = 1;
  if (rank > static_cast<long long>(n)) rank = static_cast<long long>(n);
  return sorted[static_cast<size_t>(rank - 1)];
}

void LatencyRecorder::Merge(const LatencyRecorder& other) {
  samples_.insert(samples_.end(), other.samples_.begin(), other.samples_.end());
}

double LatencyRecorder::Percentile(double q) const {
  std::vector<double> sorted = samples_;
  std::sort(sorted.begin(), sorted.end());
  return PercentileOfSorted(sorted, q);
}

LatencySummary LatencyRecorder::Summarize() const {
  LatencySummary s;
  if (samples_.empty()) return s;
  std::vector<double> sorted = samples_;
  std::sort(sorted.begin(), sorted.end());
  s.count = sorted.size();
  s.mean_ms = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(s.count);
  s.min_ms = sorted.front();
  s.p50_ms = PercentileOfSorted(sorted, 50);
  s.p90_ms = PercentileOfSorted(sorted, 90);
  s.p95_ms = PercentileOfSorted(sorted, 95);
  s.p99_ms = PercentileOfSorted(sorted, 99);
  s.p999_ms = PercentileOfSorted(sorted, 99.9);
  s.max_ms = sorted.back();
  return s;
}

std::vector<HistogramBucket> LatencyRecorder::LogHistogram(int buckets_per_decade) const {
  std::vector<HistogramBucket> out;
  if (samples_.empty() || buckets_per_decade < 1) return out;
  const auto [min_it, max_it] = std::minmax_element(samples_.begin(), samples_.end());
  // Latencies below 1 µs are clamped into the first bucket (log of 0 is undefined).
  const double lo = std::max(*min_it, 1e-3);
  const double hi = std::max(*max_it, lo);
  const double step = 1.0 / buckets_per_decade;
  const double first = std::floor(std::log10(lo) / step) * step;
  const int n = std::max(1, static_cast<int>(std::floor((std::log10(hi) - first) / step)) + 1);
  out.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    out[i].lower_ms = std::pow(10.0, first + i * step);
    out[i].upper_ms = std::pow(10.0, first + (i + 1) * step);
  }
  for (double v : samples_) {
    double x = std::max(v, lo);
    int i = static_cast<int>(std::floor((std::log10(x) - first) / step));
    i = std::clamp(i, 0, n - 1);
    ++out[i].count;
  }
  return out;
}

}  // namespace tide::loadgen
