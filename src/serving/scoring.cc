#include "serving/scoring.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace tide::serving {

absl::Status TokenizePairs(const ServedModel& model, std::string_view query,
                           std::span<const std::string_view> documents, const PairOptions& options,
                           std::vector<tokenizer::Encoding>* rows,
                           const std::function<absl::Status()>& between_chunks) {
  tokenizer::EncodeOptions enc;
  enc.max_length = model.max_sequence_length();
  enc.strategy = tokenizer::TruncationStrategy::kLongestFirst;
  enc.direction = options.direction.value_or(model.parameters().truncation_direction);
  enc.truncate = true;
  if (options.max_tokens_per_doc.has_value()) {
    // Cohere's max_tokens_per_doc cuts only the document, then the pair must still fit the model.
    std::vector<int64_t> query_ids;
    if (absl::Status s = model.tokenizer().Tokenize(query, &query_ids); !s.ok()) return s;
    const size_t wanted = query_ids.size() + *options.max_tokens_per_doc + model.tokenizer().num_special_tokens(true);
    if (wanted <= model.max_sequence_length()) {
      enc.max_length = wanted;
      enc.strategy = tokenizer::TruncationStrategy::kOnlySecond;
    }
  }
  if (!between_chunks || documents.size() <= kTokenizeChunkDocuments) {
    if (between_chunks) {
      if (absl::Status s = between_chunks(); !s.ok()) return s;
    }
    if (absl::Status s = model.tokenizer().EncodePairs(query, documents, enc, rows); !s.ok()) return s;
  } else {
    rows->clear();
    rows->reserve(documents.size());
    std::vector<tokenizer::Encoding> chunk;
    for (size_t begin = 0; begin < documents.size(); begin += kTokenizeChunkDocuments) {
      if (absl::Status s = between_chunks(); !s.ok()) return s;
      const size_t n = std::min(kTokenizeChunkDocuments, documents.size() - begin);
      if (absl::Status s = model.tokenizer().EncodePairs(query, documents.subspan(begin, n), enc, &chunk); !s.ok()) {
        return s;
      }
      for (tokenizer::Encoding& e : chunk) rows->push_back(std::move(e));
    }
  }
  if (!options.truncate) {
    for (size_t i = 0; i < rows->size(); ++i) {
      const tokenizer::Encoding& e = (*rows)[i];
      if (e.truncated()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "query + texts[", i, "] is ", e.untruncated_length, " tokens; the model's max_sequence_length is ",
            model.max_sequence_length(), " and truncate is false"));
      }
    }
  }
  return absl::OkStatus();
}

float RerankScore(const InferenceResult& result, int64_t row, config::ScoreActivation activation, bool raw) {
  const int64_t last = result.num_labels - 1;
  const float logit = result.at(row, last);
  if (raw) return logit;
  switch (activation) {
    case config::ScoreActivation::kNone:
      return logit;
    case config::ScoreActivation::kSigmoid:
      return 1.0f / (1.0f + std::exp(-logit));
    case config::ScoreActivation::kSoftmax: {
      float max_logit = result.at(row, 0);
      for (int64_t l = 1; l < result.num_labels; ++l) max_logit = std::max(max_logit, result.at(row, l));
      double sum = 0;
      for (int64_t l = 0; l < result.num_labels; ++l) sum += std::exp(result.at(row, l) - max_logit);
      return static_cast<float>(std::exp(logit - max_logit) / sum);
    }
  }
  return logit;
}

}  // namespace tide::serving
