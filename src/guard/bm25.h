// tide::guard::Bm25Scorer — the lexical fallback scorer for rerank requests while a model's circuit
// breaker is open: Okapi BM25 of each document against the query, over token ids.
//
// Contract:
//  - Input is token ids from the model's own tokenizer without special tokens
//    (tokenizer::Tokenizer::Tokenize), so the fallback needs no extra vocabulary or stemmer.
//  - The corpus is the request's own documents (the only corpus there is): N = number of
//    documents, n(t) = documents containing token t, avgdl = mean document length in tokens.
//  - Formula, summed over the DISTINCT tokens t of the query (a repeated query token counts once):
//        idf(t)      = ln(1 + (N - n(t) + 0.5) / (n(t) + 0.5))        (Lucene's +1 keeps it > 0)
//        score(q, d) = sum_t idf(t) * f(t,d) * (k1 + 1) / (f(t,d) + k1 * (1 - b + b * |d| / avgdl))
//    where f(t,d) is the count of t in d and |d| the length of d. Scores are >= 0; a document
//    sharing no token with the query scores 0. With avgdl = 0 (all documents empty) every score is 0.
//  - Not thread-safe: a scorer keeps scratch buffers reused across calls (no allocation once they
//    have grown to the largest request). Use one per thread; construction is cheap.
//  - Score() never fails; Create() answers INVALID_ARGUMENT for k1 < 0 or b outside [0, 1].
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace tide::guard {

struct Bm25Options {
  double k1 = 1.2;   // term-frequency saturation; 0 = presence only
  double b = 0.75;   // length normalisation; 0 = none, 1 = full
};

class Bm25Scorer {
 public:
  static absl::StatusOr<std::unique_ptr<Bm25Scorer>> Create(const Bm25Options& options = {});

  // One score per document, in document order, written to *scores (resized).
  void Score(std::span<const int64_t> query, std::span<const std::span<const int64_t>> documents,
             std::vector<float>* scores);

  // Convenience for callers holding vectors.
  void Score(std::span<const int64_t> query, const std::vector<std::vector<int64_t>>& documents,
             std::vector<float>* scores);

  const Bm25Options& options() const { return options_; }

 private:
  // Implementation details follow.
  explicit Bm25Scorer(const Bm25Options& options) : options_(options) {}

  const Bm25Options options_;
  absl::flat_hash_map<int64_t, int> query_terms_;       // token id -> column
  std::vector<uint32_t> term_frequencies_;             // documents x query terms, row-major
  std::vector<uint32_t> document_frequencies_;         // per query term
  std::vector<std::span<const int64_t>> document_spans_;
};

}  // namespace tide::guard
