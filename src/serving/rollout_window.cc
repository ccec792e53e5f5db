#include "serving/rollout_window.h"

#include <algorithm>
#include <utility>

namespace tide::serving {

void OutcomeWindow::Reset(size_t capacity) {
  capacity_ = capacity < 1 ? 1 : capacity;
  samples_.clear();
  latencies_.clear();
  errors_ = 0;
}

void OutcomeWindow::Add(bool ok, std::optional<double> latency_ms) {
  const double ms = latency_ms.has_value() && *latency_ms >= 0 ? *latency_ms : -1.0;
  const uint64_t seq = next_seq_++;
  samples_.push_back({ok, ms, seq});
  if (!ok) ++errors_;
  if (ok && ms >= 0) latencies_.insert(std::make_pair(ms, seq));
  while (samples_.size() > capacity_) {
    const Sample& old = samples_.front();
    if (!old.ok) --errors_;
    if (old.ok && old.ms >= 0) latencies_.erase(std::make_pair(old.ms, old.seq));
    samples_.pop_front();
  }
}

double OutcomeWindow::Percentile(double q) const {
  const size_t n = latencies_.size();
  if (n == 0) return 0;
  const size_t idx = std::min(n - 1, static_cast<size_t>(q * static_cast<double>(n)));
  return latencies_.find_by_order(idx)->first;
}

void AgreementWindow::Reset(size_t capacity) {
  capacity_ = capacity < 1 ? 1 : capacity;
  entries_.clear();
  sums_ = RankingAgreement{0, 0, 0, 0};
  evictions_since_resum_ = 0;
}

void AgreementWindow::Add(const RankingAgreement& a) {
  entries_.push_back(a);
  sums_.spearman += a.spearman;
  sums_.top1 += a.top1;
  sums_.ndcg10 += a.ndcg10;
  sums_.cosine += a.cosine;
  while (entries_.size() > capacity_) {
    const RankingAgreement& old = entries_.front();
    sums_.spearman -= old.spearman;
    sums_.top1 -= old.top1;
    sums_.ndcg10 -= old.ndcg10;
    sums_.cosine -= old.cosine;
    entries_.pop_front();
    ++evictions_since_resum_;
  }
  // Subtracting what was added leaves rounding behind; re-adding once per window bounds it at one
  // window's worth, at O(1) amortised per comparison.
  if (evictions_since_resum_ >= capacity_) Resum();
}

void AgreementWindow::Resum() {
  sums_ = RankingAgreement{0, 0, 0, 0};
  for (const RankingAgreement& a : entries_) {
    sums_.spearman += a.spearman;
    sums_.top1 += a.top1;
    sums_.ndcg10 += a.ndcg10;
    sums_.cosine += a.cosine;
  }
  evictions_since_resum_ = 0;
}

RankingAgreement AgreementWindow::Means() const {
  if (entries_.empty()) return RankingAgreement{0, 0, 0, 0};
  const double n = static_cast<double>(entries_.size());
  return {sums_.spearman / n, sums_.top1 / n, sums_.ndcg10 / n, sums_.cosine / n};
}

}  // namespace tide::serving
