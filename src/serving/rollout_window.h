// tide::serving rollout windows — the rolling statistics a rollout's guard reads on every answer:
// OutcomeWindow (one version's last `capacity` answers: count, errors, P50/P99 latency) and
// AgreementWindow (the last `capacity` ranking comparisons: mean Spearman, top-1, NDCG@10).
//
// Contract:
//  - Each update is O(log capacity) (OutcomeWindow) or O(1) (AgreementWindow) and each read
//    O(log capacity) / O(1): nothing copies or sorts a window, so the guard can run on every
//    answer under the rollouts' mutex at any window up to kMaxRolloutWindow.
//  - The statistics are exact, as a recomputation over the window's entries would give them:
//    Percentile(q) is the nearest-rank value sorted[min(n - 1, floor(q * n))] over the latencies of
//    the window's successful answers that have one (0 when none); an error or an answer without a
//    latency counts for requests/errors only. AgreementWindow's means are running sums, re-added
//    from the entries once per `capacity` evictions, so rounding never accumulates beyond one
//    window's worth.
//  - Memory: OutcomeWindow holds each answer once in a FIFO (24 bytes) and each latency once in an
//    order-statistic tree node (~70 bytes with the allocator's overhead): ~100 bytes per answer,
//    ~20 MB for both versions of a rollout at kMaxRolloutWindow; AgreementWindow 24 bytes per
//    comparison.
//  - Not thread-safe: the owner (Rollouts) serialises calls under its mutex. Capacity >= 1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <utility>

#include <ext/pb_ds/assoc_container.hpp>
#include <ext/pb_ds/tree_policy.hpp>

#include "serving/ranking_agreement.h"

namespace tide::serving {

// The largest `window` a rollout may have (answers per version and comparisons kept).
inline constexpr size_t kMaxRolloutWindow = 100000;

class OutcomeWindow {
 public:
  explicit OutcomeWindow(size_t capacity = 1000) : capacity_(capacity < 1 ? 1 : capacity) {}

  // Forgets every answer and takes a new capacity.
  void Reset(size_t capacity);
  // `latency_ms` absent (or negative): the answer counts for requests/errors only.
  void Add(bool ok, std::optional<double> latency_ms);

  size_t requests() const { return samples_.size(); }
  int64_t errors() const { return errors_; }
  // Latencies in the window (successful answers that have one).
  size_t latencies() const { return latencies_.size(); }
  double Percentile(double q) const;

 private:
  // Implementation details follow.
  struct Sample {
    bool ok;
    double ms;     // < 0: no latency
    uint64_t seq;  // the latency's key in latencies_ (ties between equal latencies broken by it)
  };
  // An order-statistic tree (libstdc++'s policy-based red-black tree with subtree sizes):
  // insert, erase and find_by_order in O(log n).
  using LatencyTree = __gnu_pbds::tree<std::pair<double, uint64_t>, __gnu_pbds::null_type, std::less<>,
                                       __gnu_pbds::rb_tree_tag, __gnu_pbds::tree_order_statistics_node_update>;
  size_t capacity_;
  std::deque<Sample> samples_;
  LatencyTree latencies_;
  uint64_t next_seq_ = 0;
  int64_t errors_ = 0;
};

class AgreementWindow {
 public:
  explicit AgreementWindow(size_t capacity = 1000) : capacity_(capacity < 1 ? 1 : capacity) {}

  void Reset(size_t capacity);
  void Add(const RankingAgreement& agreement);

  size_t pairs() const { return entries_.size(); }
  // The means over the window; all 0 when it is empty.
  RankingAgreement Means() const;

 private:
  // Implementation details follow.
  void Resum();
  size_t capacity_;
  std::deque<RankingAgreement> entries_;
  RankingAgreement sums_{0, 0, 0, 0};
  size_t evictions_since_resum_ = 0;
};

}  // namespace tide::serving
