#include "guard/bm25.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"

namespace tide::guard {

absl::StatusOr<std::unique_ptr<Bm25Scorer>> Bm25Scorer::Create(const Bm25Options& options) {
  if (!(options.k1 >= 0.0) || !std::isfinite(options.k1)) {
    return absl::InvalidArgumentError("bm25 k1 must be a finite number >= 0");
  }
  if (!(options.b >= 0.0 && options.b <= 1.0)) {
    return absl::InvalidArgumentError("bm25 b must be in [0, 1]");
  }
  return std::unique_ptr<Bm25Scorer>(new Bm25Scorer(options));
}

void Bm25Scorer::Score(std::span<const int64_t> query,
                       const std::vector<std::vector<int64_t>>& documents,
                       std::vector<float>* scores) {
  document_spans_.clear();
  for (const std::vector<int64_t>& document : documents) document_spans_.emplace_back(document);
  // Score() does not touch document_spans_, so passing it is safe.
  Score(query, std::span<const std::span<const int64_t>>(document_spans_), scores);
}

void Bm25Scorer::Score(std::span<const int64_t> query,
                       std::span<const std::span<const int64_t>> documents,
                       std::vector<float>* scores) {
  const size_t num_documents = documents.size();
  scores->assign(num_documents, 0.0f);
  if (num_documents == 0 || query.empty()) return;

  query_terms_.clear();
  for (int64_t token : query) query_terms_.try_emplace(token, static_cast<int>(query_terms_.size()));
  const size_t num_terms = query_terms_.size();

  term_frequencies_.assign(num_documents * num_terms, 0);
  document_frequencies_.assign(num_terms, 0);
  double total_length = 0.0;
  for (size_t d = 0; d < num_documents; ++d) {
    uint32_t* row = term_frequencies_.data() + d * num_terms;
    total_length += static_cast<double>(documents[d].size());
    for (int64_t token : documents[d]) {
      const auto it = query_terms_.find(token);
      if (it == query_terms_.end()) continue;
      if (row[it->second]++ == 0) ++document_frequencies_[it->second];
    }
  }
  if (total_length == 0.0) return;
  const double average_length = total_length / static_cast<double>(num_documents);
  const double n = static_cast<double>(num_documents);
  const double k1 = options_.k1;
  const double b = options_.b;

  for (size_t d = 0; d < num_documents; ++d) {
    const uint32_t* row = term_frequencies_.data() + d * num_terms;
    const double length_norm =
        k1 * (1.0 - b + b * static_cast<double>(documents[d].size()) / average_length);
    double score = 0.0;
    for (size_t t = 0; t < num_terms; ++t) {
      if (row[t] == 0) continue;
      const double df = static_cast<double>(document_frequencies_[t]);
      const double idf = std::log(1.0 + (n - df + 0.5) / (df + 0.5));
      const double tf = static_cast<double>(row[t]);
      score += idf * tf * (k1 + 1.0) / (tf + length_norm);
    }
    (*scores)[d] = static_cast<float>(score);
  }
}

}  // namespace tide::guard
