#include "serving/scoring.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error.h"
#include "serving/fallback.h"

namespace tide::serving {

// A BERT pair's rows (the tokenizer's own pair encoding); defined below.
absl::Status TokenizeBertPairs(const ServedModel& model, std::string_view query,
                               std::span<const std::string_view> documents, const PairOptions& options,
                               std::vector<tokenizer::Encoding>* rows,
                               const std::function<absl::Status()>& between_chunks);

namespace {

// A prompt encoder's own statuses: no room for the document is the request's fault (422); the
// tokenizer's already carry their kinds (KindedTokenizer).
absl::Status PromptStatus(absl::Status s) {
  if (s.ok()) return s;
  const ErrorKind kind =
      s.code() == absl::StatusCode::kFailedPrecondition ? ErrorKind::kInvalidInput : ErrorKind::kMalformedRequest;
  return EnsureKind(std::move(s), kind);
}

absl::Status TokenizePrompts(const ServedModel& model, std::string_view query,
                             std::span<const std::string_view> documents, const PairOptions& options,
                             std::vector<tokenizer::Encoding>* rows,
                             const std::function<absl::Status()>& between_chunks) {
  auto encoder = MakePromptEncoder(model, options.instruction, query);
  if (!encoder.ok()) return encoder.status();
  if (options.max_tokens_per_doc.has_value() && encoder->room() > *options.max_tokens_per_doc) {
    // Cohere's max_tokens_per_doc: the document cut to it, inside the template.
    encoder = MakePromptEncoder(model, options.instruction, query, encoder->frame_tokens() + *options.max_tokens_per_doc);
    if (!encoder.ok()) return encoder.status();
  }
  const tokenizer::TruncationDirection direction = options.direction.value_or(model.parameters().truncation_direction);
  rows->resize(documents.size());
  for (size_t i = 0; i < documents.size(); ++i) {
    if (between_chunks && i % kTokenizeChunkDocuments == 0) {
      if (absl::Status s = between_chunks(); !s.ok()) return s;
    }
    if (absl::Status s = encoder->Encode(documents[i], direction, &(*rows)[i]); !s.ok()) return PromptStatus(s);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string_view> ResolveInstruction(const ServedModel& model,
                                                    const std::optional<std::string>& instruction) {
  const config::TideParameters& p = model.parameters();
  if (!p.prompt_template.has_value()) {
    if (!instruction.has_value()) return std::string_view();
    return errors::InvalidInput(absl::StrCat("field 'instruction': model ", model.name(),
                                             " takes no instruction (it has no prompt_template)"));
  }
  if (!p.prompt_template->has_instruction()) {
    if (!instruction.has_value()) return std::string_view();
    return errors::InvalidInput(absl::StrCat("field 'instruction': the prompt_template of model ", model.name(),
                                             " has no {instruction} slot"));
  }
  if (instruction.has_value()) return std::string_view(*instruction);
  if (p.default_instruction.has_value()) return std::string_view(*p.default_instruction);
  return errors::InvalidInput(absl::StrCat("field 'instruction' is required: the prompt_template of model ",
                                           model.name(), " has an {instruction} slot and no default_instruction"));
}

absl::StatusOr<tokenizer::PromptEncoder> MakePromptEncoder(const ServedModel& model,
                                                           const std::optional<std::string>& instruction,
                                                           std::string_view query, std::optional<size_t> max_length) {
  if (!model.parameters().prompt_template.has_value()) {
    return errors::Internal(absl::StrCat("model ", model.name(), " has no prompt_template"));
  }
  auto resolved = ResolveInstruction(model, instruction);
  if (!resolved.ok()) return resolved.status();
  auto encoder = tokenizer::PromptEncoder::Create(model.tokenizer(), *model.parameters().prompt_template, *resolved,
                                                  query, max_length.value_or(model.max_sequence_length()));
  if (!encoder.ok()) return PromptStatus(encoder.status());
  return encoder;
}

absl::Status TokenizePairs(const ServedModel& model, std::string_view query,
                           std::span<const std::string_view> documents, const PairOptions& options,
                           std::vector<tokenizer::Encoding>* rows,
                           const std::function<absl::Status()>& between_chunks) {
  if (model.parameters().prompt_template.has_value()) {
    if (absl::Status s = TokenizePrompts(model, query, documents, options, rows, between_chunks); !s.ok()) return s;
  } else if (options.instruction.has_value()) {
    return ResolveInstruction(model, options.instruction).status();
  } else if (absl::Status s = TokenizeBertPairs(model, query, documents, options, rows, between_chunks); !s.ok()) {
    return s;
  }
  if (!options.truncate) {
    for (size_t i = 0; i < rows->size(); ++i) {
      const tokenizer::Encoding& e = (*rows)[i];
      if (e.truncated()) {
        return errors::InvalidInput(absl::StrCat(
            "query + texts[", i, "] is ", e.untruncated_length, " tokens; the model's max_sequence_length is ",
            model.max_sequence_length(), " and truncate is false"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status TokenizeBertPairs(const ServedModel& model, std::string_view query,
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
  return absl::OkStatus();
}

float RerankScore(std::span<const float> row, config::ScoreActivation activation, bool raw) {
  const float logit = row.back();
  if (raw) return logit;
  switch (activation) {
    case config::ScoreActivation::kNone:
      return logit;
    case config::ScoreActivation::kSigmoid:
      return 1.0f / (1.0f + std::exp(-logit));
    case config::ScoreActivation::kSoftmax: {
      float max_logit = row[0];
      for (float l : row) max_logit = std::max(max_logit, l);
      double sum = 0;
      for (float l : row) sum += std::exp(l - max_logit);
      return static_cast<float>(std::exp(logit - max_logit) / sum);
    }
  }
  return logit;
}

float RerankScore(const InferenceResult& result, int64_t row, config::ScoreActivation activation, bool raw) {
  const std::span<const float> logits(result.logits.data() + row * result.num_labels,
                                      static_cast<size_t>(result.num_labels));
  return RerankScore(logits, activation, raw);
}

absl::Status DegradedUnavailableError(std::string_view model_name) {
  return WithDegraded(
      errors::Unavailable(absl::StrCat("model ", std::string(model_name), " is degraded (circuit breaker open); retry later")),
      "unavailable");
}

bool IsDegradedUnavailable(const absl::Status& status) { return DegradedOf(status) == "unavailable"; }

absl::StatusOr<RerankScores> FallbackScores(const ServedModel& model, std::string_view query,
                                            std::span<const std::string_view> documents, bool raw_scores) {
  // A reranker answers BM25 over the request's documents; a classifier its configured default
  // result for every pair, or UNAVAILABLE when it has none.
  RerankScores out;
  if (model.parameters().task == config::Task::kClassify) {
    const std::vector<float>& row = model.parameters().breaker_default_result;
    if (row.empty()) return DegradedUnavailableError(model.name());
    const config::ScoreActivation activation = model.parameters().score_activation;
    out.scores.assign(documents.size(), RerankScore(row, activation, raw_scores));
    out.fallback = kFallbackDefault;
    return out;
  }
  if (absl::Status s = Bm25Scores(model.tokenizer(), query, documents, &out.scores); !s.ok()) return s;
  out.fallback = kFallbackBm25;
  return out;
}

void ScoreOrFallback(std::shared_ptr<ServedModel> model, const RowTask::Admission& admission, std::string_view query,
                     std::span<const std::string_view> documents, const PairOptions& options, bool raw_scores,
                     ServingMetrics* metrics, const std::function<absl::Status()>& between_chunks, RerankDone done) {
  using Steady = std::chrono::steady_clock;
  const Steady::time_point start = Steady::now();
  std::vector<tokenizer::Encoding> rows;
  if (absl::Status s = TokenizePairs(*model, query, documents, options, &rows, between_chunks); !s.ok()) {
    return std::move(done)(s);
  }
  const Clock::duration tokenize = Steady::now() - start;
  const config::ScoreActivation activation = model->parameters().score_activation;

  if (!model->AdmitToModel()) {
    // Breaker open: the fallback's scores, marked.
    auto out = FallbackScores(*model, query, documents, raw_scores);
    if (!out.ok()) return std::move(done)(out.status());
    out->timings.tokenize = tokenize;
    if (metrics != nullptr) {
      metrics->degraded->WithLabels({model->name(), std::to_string(model->version()), out->fallback})->Increment();
    }
    return std::move(done)(*std::move(out));
  }
  ServedModel* m = model.get();
  m->Submit(rows, admission,
            [model = std::move(model), tokenize, activation, raw_scores,
             done = std::move(done)](absl::StatusOr<InferenceResult> result) mutable {
              if (!result.ok()) return std::move(done)(result.status());
              RerankScores out;
              out.scores.resize(static_cast<size_t>(result->rows));
              for (int64_t i = 0; i < result->rows; ++i) out.scores[i] = RerankScore(*result, i, activation, raw_scores);
              out.real_tokens = result->real_tokens;
              out.num_labels = result->num_labels;
              out.logits = std::move(result->logits);
              out.timings = result->timings;
              out.timings.tokenize = tokenize;
              std::move(done)(std::move(out));
            });
}

}  // namespace tide::serving
