#include "serving/ranking_agreement.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "common/error.h"

namespace tide::serving {
namespace {

// Document indices, best score first; ties by index.
std::vector<size_t> Order(std::span<const float> scores) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  return order;
}

// Average (fractional) ranks, 1 = best.
std::vector<double> Ranks(std::span<const float> scores) {
  const std::vector<size_t> order = Order(scores);
  std::vector<double> ranks(scores.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && scores[order[j + 1]] == scores[order[i]]) ++j;
    const double avg = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = avg;
    i = j + 1;
  }
  return ranks;
}

double Spearman(std::span<const float> a, std::span<const float> b) {
  const std::vector<double> ra = Ranks(a), rb = Ranks(b);
  const double n = static_cast<double>(ra.size());
  const double mean = (n + 1.0) / 2.0;
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    cov += (ra[i] - mean) * (rb[i] - mean);
    va += (ra[i] - mean) * (ra[i] - mean);
    vb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (va == 0 && vb == 0) return 1.0;
  if (va == 0 || vb == 0) return 0.0;
  return cov / std::sqrt(va * vb);
}

}  // namespace

absl::StatusOr<RankingAgreement> CompareRankings(std::span<const float> stable, std::span<const float> candidate) {
  if (stable.empty() || stable.size() != candidate.size()) {
    return errors::InvalidInput("rankings to compare must score the same, non-empty, documents");
  }
  RankingAgreement out;
  if (stable.size() == 1) return out;
  out.spearman = Spearman(stable, candidate);
  const std::vector<size_t> so = Order(stable), co = Order(candidate);
  out.top1 = so[0] == co[0] ? 1.0 : 0.0;
  constexpr size_t kCut = 10;
  std::vector<double> relevance(stable.size(), 0.0);
  // Exponential gain (2^relevance - 1), as usual for NDCG: the top of the stable order weighs most.
  for (size_t r = 0; r < std::min(kCut, so.size()); ++r) relevance[so[r]] = std::exp2(static_cast<double>(kCut - r)) - 1;
  double dcg = 0, ideal = 0;
  for (size_t p = 0; p < std::min(kCut, so.size()); ++p) {
    const double discount = std::log2(static_cast<double>(p) + 2.0);
    dcg += relevance[co[p]] / discount;
    ideal += relevance[so[p]] / discount;
  }
  out.ndcg10 = ideal > 0 ? dcg / ideal : 1.0;
  return out;
}

absl::StatusOr<RankingAgreement> CompareEmbeddings(std::span<const float> stable, std::span<const float> candidate,
                                                   size_t dim) {
  if (dim == 0 || stable.empty() || stable.size() != candidate.size() || stable.size() % dim != 0) {
    return errors::InvalidInput("embedding comparison: vectors of different or empty shapes");
  }
  const size_t rows = stable.size() / dim;
  double sum = 0;
  for (size_t r = 0; r < rows; ++r) {
    double dot = 0, a2 = 0, b2 = 0;
    for (size_t i = r * dim; i < (r + 1) * dim; ++i) {
      dot += static_cast<double>(stable[i]) * candidate[i];
      a2 += static_cast<double>(stable[i]) * stable[i];
      b2 += static_cast<double>(candidate[i]) * candidate[i];
    }
    if (a2 == 0 || b2 == 0) {
      sum += a2 == b2 ? 1.0 : 0.0;
    } else {
      sum += std::clamp(dot / std::sqrt(a2 * b2), -1.0, 1.0);
    }
  }
  RankingAgreement out;
  out.cosine = sum / static_cast<double>(rows);
  return out;
}

}  // namespace tide::serving
