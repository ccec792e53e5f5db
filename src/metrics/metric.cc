#include "metrics/metric.h"

#include <algorithm>
#include <chrono>

namespace tide::metrics {
namespace {

// std::atomic<double>::fetch_add is C++20; a CAS loop keeps this portable to older libstdc++.
void AtomicAdd(std::atomic<double>& target, double amount) {
  double current = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(current, current + amount, std::memory_order_relaxed)) {
  }
}

}  // namespace

void Counter::Increment(double amount) {
  if (!(amount > 0.0)) return;  // also rejects NaN
  AtomicAdd(value_, amount);
}

void Gauge::Increment(double amount) { AtomicAdd(value_, amount); }

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)),
      bucket_counts_(new std::atomic<uint64_t>[upper_bounds_.size() + 1]) {
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) bucket_counts_[i].store(0);
}

void Histogram::Observe(double value) {
  // First bound >= value: Prometheus buckets are "less than or equal".
  const size_t index =
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin();
  bucket_counts_[index].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(sum_, value);
}

void Histogram::ObserveWithExemplar(double value, std::string_view trace_id, std::string_view span_id) {
  Observe(value);
  const size_t index =
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin();
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  absl::MutexLock lock(&exemplar_mu_);
  if (exemplars_.empty()) exemplars_.resize(upper_bounds_.size() + 1);
  exemplars_[index] = Exemplar{value, std::string(trace_id), std::string(span_id), now};
}

std::vector<std::optional<Histogram::Exemplar>> Histogram::Exemplars() const {
  absl::MutexLock lock(&exemplar_mu_);
  return exemplars_;
}

Histogram::Snapshot Histogram::TakeSnapshot() const {
  Snapshot snapshot;
  snapshot.upper_bounds = upper_bounds_;
  snapshot.cumulative_counts.resize(upper_bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
    running += bucket_counts_[i].load(std::memory_order_relaxed);
    snapshot.cumulative_counts[i] = running;
  }
  snapshot.count = running;
  snapshot.sum = sum_.load(std::memory_order_relaxed);
  return snapshot;
}

std::vector<double> DefaultLatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,   0.1,     0.25,   0.5,   1.0,    2.5,   5.0,   10.0};
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> bounds;
  if (start <= 0.0 || factor <= 1.0 || count <= 0) return bounds;
  bounds.reserve(count);
  double bound = start;
  for (int i = 0; i < count; ++i, bound *= factor) bounds.push_back(bound);
  return bounds;
}

}  // namespace tide::metrics
