// tide::serving ranking agreement — how closely a candidate model ranks a request's documents like
// the stable model does: Spearman's rank correlation of the two score lists, top-1 agreement (the
// same best document), and NDCG@10 of the candidate's order taking the stable order as the truth.
//
// Contract:
//  - CompareRankings(stable, candidate): both spans score the same documents in the same order;
//    spans of different sizes or empty ones give kInvalidInput. Ties get average ranks (Spearman)
//    and are broken by document index (top-1, NDCG), the same for both lists. A list whose scores
//    are all equal has no order: Spearman is 1 when both lists are constant, 0 when only one is.
//    One document: every measure is 1.
//  - NDCG@10: a document the stable model puts at rank r (0-based, r < 10) has relevance 10 - r,
//    any other 0; DCG = sum of (2^relevance - 1) / log2(position + 2) over the candidate's first
//    10, divided by the stable order's own DCG.
//  - CompareEmbeddings(stable, candidate, dim): both spans are the same inputs' vectors [rows, dim]
//    (raw or normalized: the cosine does not see the scale); the mean over rows of the cosine
//    similarity of the two versions' vectors of one input goes to `cosine` (a zero vector against
//    a zero vector counts 1, against any other 0), the ranking measures are 1 (an embedding model's
//    rollout is judged by cosine alone, a reranker's never: its cosine stays 1). Sizes that differ,
//    are empty or are no multiple of dim (or dim 0) give kInvalidInput.
//  - Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <span>

#include "absl/status/statusor.h"

namespace tide::serving {

struct RankingAgreement {
  double spearman = 1.0;  // -1..1
  double top1 = 1.0;      // 0 or 1 for one request
  double ndcg10 = 1.0;    // 0..1
  double cosine = 1.0;    // -1..1: embedding models' mean cosine similarity per input
};

absl::StatusOr<RankingAgreement> CompareRankings(std::span<const float> stable, std::span<const float> candidate);
absl::StatusOr<RankingAgreement> CompareEmbeddings(std::span<const float> stable, std::span<const float> candidate,
                                                   size_t dim);

}  // namespace tide::serving
