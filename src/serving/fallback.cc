#include "serving/fallback.h"

#include <memory>

#include "guard/bm25.h"

namespace tide::serving {

absl::Status Bm25Scores(const tokenizer::Tokenizer& tokenizer, std::string_view query,
                        std::span<const std::string_view> documents, std::vector<float>* scores) {
  struct Scratch {
    std::unique_ptr<guard::Bm25Scorer> scorer = *guard::Bm25Scorer::Create();
    std::vector<int64_t> query_ids;
    std::vector<std::vector<int64_t>> doc_ids;
  };
  thread_local Scratch s;
  if (absl::Status st = tokenizer.Tokenize(query, &s.query_ids); !st.ok()) return st;
  if (s.doc_ids.size() < documents.size()) s.doc_ids.resize(documents.size());
  for (size_t i = 0; i < documents.size(); ++i) {
    if (absl::Status st = tokenizer.Tokenize(documents[i], &s.doc_ids[i]); !st.ok()) return st;
  }
  std::vector<std::span<const int64_t>> spans(s.doc_ids.begin(), s.doc_ids.begin() + documents.size());
  s.scorer->Score(s.query_ids, spans, scores);
  return absl::OkStatus();
}

InferenceResult DefaultResult(std::span<const float> logits_row, int64_t rows) {
  InferenceResult result;
  result.rows = rows;
  result.num_labels = static_cast<int64_t>(logits_row.size());
  result.logits.reserve(static_cast<size_t>(rows) * logits_row.size());
  for (int64_t r = 0; r < rows; ++r) result.logits.insert(result.logits.end(), logits_row.begin(), logits_row.end());
  return result;
}

}  // namespace tide::serving
