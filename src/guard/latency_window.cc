#include "guard/latency_window.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace tide::guard {

LatencyWindow::LatencyWindow(duration window, int slices, duration slow_threshold, time_point origin)
    : slice_length_(std::max(duration(1), window / std::max(1, slices))),
      slow_threshold_(slow_threshold),
      origin_(origin),
      ring_(static_cast<size_t>(std::max(1, slices))) {}

int LatencyWindow::BucketIndex(duration latency) {
  const int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(latency).count();
  if (us < 4) return us < 0 ? 0 : static_cast<int>(us);
  const int exponent = std::bit_width(static_cast<uint64_t>(us)) - 1;  // >= 2
  if (exponent > kMaxExponent) return kBuckets - 1;
  const int sub = static_cast<int>((us >> (exponent - 2)) & 3);
  return std::min(kBuckets - 1, (exponent - 1) * 4 + sub);
}

int64_t LatencyWindow::BucketUpperBoundMicros(int index) {
  if (index < 4) return index + 1;
  const int exponent = index / 4 + 1;
  const int sub = index % 4;
  return static_cast<int64_t>(5 + sub) << (exponent - 2);
}

void LatencyWindow::Evict(Slice& slice) {
  if (slice.number < 0) return;
  totals_.requests -= slice.totals.requests;
  totals_.errors -= slice.totals.errors;
  totals_.slow -= slice.totals.slow;
  if (slice.totals.requests > 0) {
    for (int i = 0; i < kBuckets; ++i) {
      total_counts_[i] -= slice.counts[i];
      slice.counts[i] = 0;
    }
  }
  slice.totals = Totals{};
  slice.number = -1;
}

void LatencyWindow::Advance(time_point now) {
  const int64_t number = (now - origin_) / slice_length_;
  if (number <= current_) return;
  const int64_t slices = static_cast<int64_t>(ring_.size());
  if (number - current_ >= slices) {
    for (Slice& slice : ring_) Evict(slice);
  } else {
    for (int64_t n = current_ + 1; n <= number; ++n) Evict(ring_[n % slices]);
  }
  current_ = number;
}

void LatencyWindow::Add(time_point now, duration latency, bool ok) {
  Advance(now);
  Slice& slice = ring_[current_ % static_cast<int64_t>(ring_.size())];
  if (slice.number != current_) {
    Evict(slice);
    slice.number = current_;
  }
  const int bucket = BucketIndex(latency);
  const bool slow = slow_threshold_ > duration::zero() && latency > slow_threshold_;
  ++slice.counts[bucket];
  ++total_counts_[bucket];
  ++slice.totals.requests;
  ++totals_.requests;
  if (!ok) {
    ++slice.totals.errors;
    ++totals_.errors;
  }
  if (slow) {
    ++slice.totals.slow;
    ++totals_.slow;
  }
}

LatencyWindow::Totals LatencyWindow::GetTotals(time_point now) {
  Advance(now);
  return totals_;
}

namespace {
// Nearest rank of the q-quantile among n samples: ceil(q * n), at least 1.
int64_t NearestRank(double q, int64_t n) {
  const double rank = std::ceil(q * static_cast<double>(n) - 1e-9);
  return std::clamp<int64_t>(static_cast<int64_t>(rank), 1, n);
}
}  // namespace

LatencyWindow::duration LatencyWindow::Quantile(time_point now, double q) {
  Advance(now);
  const int64_t n = totals_.requests;
  if (n <= 0) return duration::zero();
  const int64_t rank = NearestRank(q, n);
  int64_t cumulative = 0;
  for (int i = 0; i < kBuckets; ++i) {
    cumulative += static_cast<int64_t>(total_counts_[i]);
    if (cumulative >= rank) {
      return std::chrono::duration_cast<duration>(std::chrono::microseconds(BucketUpperBoundMicros(i)));
    }
  }
  return std::chrono::duration_cast<duration>(
      std::chrono::microseconds(BucketUpperBoundMicros(kBuckets - 1)));
}

bool LatencyWindow::SlowExceedsQuantile(time_point now, double q) {
  if (slow_threshold_ <= duration::zero()) return false;
  Advance(now);
  const int64_t n = totals_.requests;
  if (n <= 0) return false;
  // The rank-th smallest sample is slow iff fewer than `rank` samples are not slow.
  return n - totals_.slow < NearestRank(q, n);
}

void LatencyWindow::Clear() {
  for (Slice& slice : ring_) Evict(slice);
}

}  // namespace tide::guard
