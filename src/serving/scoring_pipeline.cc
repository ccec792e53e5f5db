#include "serving/scoring_pipeline.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error.h"
#include "serving/fallback.h"
#include "serving/long_documents.h"

namespace tide::serving {

namespace {

// The tokenization options that change a pair's model input, as part of a score cache key.
std::string PairOptionsKey(const PairOptions& o) {
  std::string key;
  key.push_back(o.truncate ? 't' : 'f');
  key.push_back(!o.direction.has_value() ? 'u' : (*o.direction == tokenizer::TruncationDirection::kLeft ? 'l' : 'r'));
  // (Windows of long documents are keyed by their own text, so the chunking mode needs no place.)
  if (o.max_tokens_per_doc.has_value()) key.append(std::to_string(*o.max_tokens_per_doc));
  // A decoder reranker's instruction is part of its prompt (unset: the model's default, fixed per
  // generation); length-prefixed so that it cannot run into the next field.
  if (o.instruction.has_value()) key.append(absl::StrCat("i", o.instruction->size(), ":", *o.instruction));
  return key;
}

// What an embedding model reads of one row, as part of an embedding cache key: its token ids and
// type ids (the attention mask of an unpadded row is all ones), little-endian int64, the ids'
// count first.
std::string EmbedRowKey(const tokenizer::Encoding& row) {
  std::string key;
  key.reserve(8 * (row.ids.size() + row.type_ids.size() + 1));
  auto append = [&key](int64_t v) {
    for (int i = 0; i < 8; ++i) key.push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff));
  };
  append(static_cast<int64_t>(row.ids.size()));
  for (int64_t id : row.ids) append(id);
  for (int64_t t : row.type_ids) append(t);
  return key;
}

// The score cache partition of a call's pairs (score_cache.h): its tenant's name unless shared.
std::string_view CachePartition(ScoreCacheScope scope, const Call& call) {
  if (scope == ScoreCacheScope::kShared || call.tenant() == nullptr) return {};
  return call.tenant()->name();
}

}  // namespace

ScoringPipeline::ScoringPipeline(ServingMetrics* metrics, ChargePairsFn charge_pairs, RolloutHook* rollouts,
                                 const ScoringPipelineOptions& options)
    : metrics_(metrics), charge_pairs_(std::move(charge_pairs)), rollouts_(rollouts), options_(options) {
  if (options.score_cache_bytes > 0) cache_ = std::make_unique<ScoreCache>(options.score_cache_bytes);
  if (options.embed_cache_bytes > 0) embed_cache_ = std::make_unique<ScoreCache>(options.embed_cache_bytes);
}

// ---- A rerank answered whole from the cache, on the I/O thread.

std::optional<absl::StatusOr<RerankScores>> ScoringPipeline::RerankFromCache(
    const Call& call, const ServedModel& model, std::string_view query, std::span<const std::string_view> documents,
    const PairOptions& options, bool raw_scores) {
  if (cache_ == nullptr || call.no_cache() || options.long_documents != LongDocuments::kTruncate ||
      documents.empty() || (rollouts_ != nullptr && rollouts_->Tracks(model))) {
    return std::nullopt;
  }
  const std::string options_key = PairOptionsKey(options);
  const std::string_view partition = CachePartition(options_.score_cache_scope, call);
  const config::ScoreActivation activation = model.parameters().score_activation;
  RerankScores out;
  out.scores.reserve(documents.size());
  for (std::string_view document : documents) {
    std::optional<std::vector<float>> row =
        cache_->Lookup(ScoreCache::Key(model.generation(), partition, options_key, query, document));
    if (!row.has_value()) return std::nullopt;
    out.scores.push_back(RerankScore(*row, activation, raw_scores));
  }
  if (absl::Status s = charge_pairs_(call, documents.size()); !s.ok()) return absl::StatusOr<RerankScores>(s);
  out.cache_hits = documents.size();
  call.cache_hits_.fetch_add(static_cast<int64_t>(documents.size()), std::memory_order_relaxed);
  metrics_->score_cache_hits->WithLabels({model.name(), std::to_string(model.version())})
      ->Increment(static_cast<double>(documents.size()));
  return absl::StatusOr<RerankScores>(std::move(out));
}

// ---- A rerank on a worker: the rollout's watch, long documents and the quota, then the rows.

void ScoringPipeline::Rerank(const CallPtr& call, std::shared_ptr<ServedModel> model, std::string_view query,
                             std::span<const std::string_view> documents, const PairOptions& options, bool raw_scores,
                             RerankDone done) {
  std::shared_ptr<AnswerWatch> watch;
  if (rollouts_ != nullptr) {
    watch = rollouts_->Watch(*call, *model, MirrorRequest{.query = query, .documents = documents,
                                                          .options = options, .raw_scores = raw_scores});
  }
  if (watch == nullptr) {
    return RerankDocuments(call, std::move(model), query, documents, options, raw_scores, std::move(done));
  }
  RerankDocuments(call, std::move(model), query, documents, options, raw_scores,
                  [watch, done = std::move(done)](absl::StatusOr<RerankScores> scores) mutable {
                    const bool degraded = scores.ok() && scores->fallback != nullptr;
                    watch->Answered(scores.status(), degraded,
                                    scores.ok() ? std::span<const float>(scores->scores) : std::span<const float>());
                    std::move(done)(std::move(scores));
                  });
  watch->Submitted();
}

void ScoringPipeline::RerankDocuments(const CallPtr& call, std::shared_ptr<ServedModel> model, std::string_view query,
                                      std::span<const std::string_view> documents, const PairOptions& options,
                                      bool raw_scores, RerankDone done) {
  // Long documents scored whole: every window is a row; its scores fold back into the document's.
  // An instruction the model cannot take (or lacks) is refused before the quota and the cache.
  if (absl::Status s = ResolveInstruction(*model, options.instruction).status(); !s.ok()) return std::move(done)(s);
  DocumentWindows split;
  if (options.long_documents != LongDocuments::kTruncate) {
    if (absl::Status s = call->StillWanted("tokenizing"); !s.ok()) return std::move(done)(s);
    ChunkOptions chunk = ChunkOptionsFor(*model, options.long_documents);
    chunk.instruction = options.instruction;
    if (absl::Status s = SplitLongDocuments(*model, query, documents, chunk, &split); !s.ok()) {
      return std::move(done)(s);
    }
  }
  // Every row (a document, or a window) counts toward the key's pairs quota, once, before any is
  // queued (and, as rows, toward every queue bound).
  const size_t rows = options.long_documents == LongDocuments::kTruncate ? documents.size() : split.windows.size();
  if (absl::Status s = charge_pairs_(*call, rows); !s.ok()) return std::move(done)(s);
  if (!split.split) return ScoreRows(call, std::move(model), query, documents, options, raw_scores, std::move(done));
  ScoreRows(call, std::move(model), query, split.windows, options, raw_scores,
            [done = std::move(done), owner = std::move(split.owner), mode = options.long_documents,
             n = documents.size()](absl::StatusOr<RerankScores> rows) mutable {
              if (!rows.ok()) return std::move(done)(rows.status());
              rows->scores = FoldWindowScores(mode, owner, rows->scores, n);
              rows->logits.clear();  // per window; the document scores are folded
              std::move(done)(std::move(rows));
            });
}

// The rows' scores: the cache's, then the model's (or its fallback's) for the pairs it lacks, which
// the cache then keeps.
void ScoringPipeline::ScoreRows(const CallPtr& call, std::shared_ptr<ServedModel> model, std::string_view query,
                                std::span<const std::string_view> documents, const PairOptions& options,
                                bool raw_scores, RerankDone done) {
  auto between_chunks = [&call] { return call->StillWanted("tokenizing"); };
  if (cache_ == nullptr) {
    return ScoreOrFallback(std::move(model), call->admission(), query, documents, options, raw_scores, metrics_,
                           between_chunks, [call, done = std::move(done)](absl::StatusOr<RerankScores> s) mutable {
                             std::move(done)(std::move(s));
                           });
  }
  // Split the pairs into those the cache has and those the model must score.
  const size_t n = documents.size();
  const std::string options_key = PairOptionsKey(options);
  std::vector<std::string> keys(n);
  std::vector<std::optional<std::vector<float>>> cached(n);
  std::vector<size_t> missing;
  std::vector<std::string_view> missing_docs;
  for (size_t i = 0; i < n; ++i) {
    keys[i] = ScoreCache::Key(model->generation(), CachePartition(options_.score_cache_scope, *call), options_key,
                              query, documents[i]);
    if (!call->no_cache()) cached[i] = cache_->Lookup(keys[i]);
    if (!cached[i].has_value()) {
      missing.push_back(i);
      missing_docs.push_back(documents[i]);
    }
  }
  const size_t hits = n - missing.size();
  call->cache_hits_.fetch_add(static_cast<int64_t>(hits), std::memory_order_relaxed);
  if (!call->no_cache()) {
    const std::string version = std::to_string(model->version());
    metrics_->score_cache_hits->WithLabels({model->name(), version})->Increment(static_cast<double>(hits));
    metrics_->score_cache_misses->WithLabels({model->name(), version})->Increment(static_cast<double>(missing.size()));
  }
  const config::ScoreActivation activation = model->parameters().score_activation;
  // Fills `out` with the cached rows (and the model's, already in out) for every document.
  auto merge = [hits, activation, raw_scores](std::vector<std::optional<std::vector<float>>>& rows,
                                               RerankScores& out) {
    out.scores.resize(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      if (!rows[i].has_value()) continue;
      out.scores[i] = RerankScore(*rows[i], activation, raw_scores);
    }
    out.cache_hits = hits;
  };
  if (missing.empty()) {
    RerankScores out;
    merge(cached, out);
    return std::move(done)(std::move(out));
  }
  // The fallback answers synchronously, while `query` and `documents` are still valid.
  auto in_call = std::make_shared<std::atomic<bool>>(true);
  ScoreOrFallback(
      model, call->admission(), query, missing_docs, options, raw_scores, metrics_, between_chunks,
      [call, done = std::move(done), cache = cache_.get(), model, keys = std::move(keys), cached = std::move(cached),
       missing = std::move(missing), merge, in_call, query, documents,
       raw_scores](absl::StatusOr<RerankScores> sub) mutable {
        if (!sub.ok()) return std::move(done)(sub.status());
        if (sub->fallback != nullptr) {
          if (missing.size() == cached.size()) return std::move(done)(std::move(sub));
          // Degraded answers are degraded for every document: never cached model scores beside BM25.
          if (!in_call->load()) return std::move(done)(errors::Internal("fallback answered after the call"));
          auto all = FallbackScores(*model, query, documents, raw_scores);
          if (!all.ok()) return std::move(done)(all.status());
          all->timings = sub->timings;
          return std::move(done)(*std::move(all));
        }
        const size_t labels = static_cast<size_t>(sub->num_labels);
        for (size_t j = 0; j < missing.size(); ++j) {
          std::vector<float> row(sub->logits.begin() + j * labels, sub->logits.begin() + (j + 1) * labels);
          cache->Insert(std::move(keys[missing[j]]), row);
          cached[missing[j]] = std::move(row);
        }
        RerankScores out;
        out.real_tokens = sub->real_tokens;
        out.timings = sub->timings;
        out.num_labels = sub->num_labels;
        merge(cached, out);
        std::move(done)(std::move(out));
      });
  in_call->store(false);
}

// ---- Token rows (KServe tensors): the quota, the breaker, the rollout's watch, the batcher.

void ScoringPipeline::Infer(const CallPtr& call, std::shared_ptr<ServedModel> model,
                            std::vector<tokenizer::Encoding> rows, InferDone done, TensorWindows windows) {
  if (absl::Status s = call->StillWanted("parsing"); !s.ok()) return std::move(done)(s);
  if (absl::Status s = charge_pairs_(*call, rows.size()); !s.ok()) return std::move(done)(s);
  SubmitRows(call, std::move(model), std::move(rows), std::move(done), std::move(windows));
}

void ScoringPipeline::EmbedAll(const CallPtr& call, std::shared_ptr<ServedModel> model,
                               std::vector<tokenizer::Encoding> rows, InferDone done) {
  if (absl::Status s = call->StillWanted("parsing"); !s.ok()) return std::move(done)(s);
  if (absl::Status s = charge_pairs_(*call, rows.size()); !s.ok()) return std::move(done)(s);
  SubmitRows(call, std::move(model), std::move(rows), std::move(done), {}, /*token_states=*/true);
}

void ScoringPipeline::SubmitRows(const CallPtr& call, std::shared_ptr<ServedModel> model,
                                 std::vector<tokenizer::Encoding> rows, InferDone done, TensorWindows windows,
                                 bool token_states) {
  if (!model->AdmitToModel()) {
    // Breaker open. A classifier with a breaker_default_result answers it for every row, marked
    // degraded; every other model answers 503 (tensors have no lightweight fallback), and so do
    // token states (a default row has none).
    const std::vector<float>& row = model->parameters().breaker_default_result;
    if (row.empty() || token_states) return std::move(done)(DegradedUnavailableError(model->name()));
    metrics_->degraded->WithLabels({model->name(), std::to_string(model->version()), kFallbackDefault})->Increment();
    return std::move(done)(InferOutcome{DefaultResult(row, static_cast<int64_t>(rows.size())), kFallbackDefault});
  }
  std::shared_ptr<AnswerWatch> watch;
  if (rollouts_ != nullptr) {
    watch = rollouts_->Watch(*call, *model, MirrorRequest{.rows = &rows, .windows = &windows});
  }
  ServedModel* m = model.get();
  RowTask::Admission admission = call->admission();
  admission.token_states = token_states;
  m->Submit(rows, admission,
            [call, model = std::move(model), done = std::move(done),
             watch](absl::StatusOr<InferenceResult> result) mutable {
              if (watch != nullptr) {
                watch->Answered(result.status(), /*degraded=*/false,
                                result.ok() ? std::span<const float>(result->logits) : std::span<const float>());
              }
              if (!result.ok()) return std::move(done)(result.status());
              std::move(done)(InferOutcome{*std::move(result), nullptr});
            });
  if (watch != nullptr) watch->Submitted();
}

// ---- An embedding model's rows: the embedding cache, then the rows not found as Infer's.

void ScoringPipeline::Embed(const CallPtr& call, std::shared_ptr<ServedModel> model,
                            std::vector<tokenizer::Encoding> rows, InferDone done) {
  if (embed_cache_ == nullptr || call->no_cache() || rows.empty() ||
      (rollouts_ != nullptr && rollouts_->Tracks(*model))) {
    return Infer(call, std::move(model), std::move(rows), std::move(done));
  }
  if (absl::Status s = call->StillWanted("parsing"); !s.ok()) return std::move(done)(s);
  if (absl::Status s = charge_pairs_(*call, rows.size()); !s.ok()) return std::move(done)(s);
  const size_t n = rows.size();
  const std::string_view partition = CachePartition(options_.score_cache_scope, *call);
  std::vector<std::string> keys(n);
  std::vector<std::optional<std::vector<float>>> cached(n);
  std::vector<size_t> missing;
  for (size_t i = 0; i < n; ++i) {
    keys[i] = ScoreCache::Key(model->generation(), partition, "embed", EmbedRowKey(rows[i]), "");
    cached[i] = embed_cache_->Lookup(keys[i]);
    if (!cached[i].has_value()) missing.push_back(i);
  }
  const size_t hits = n - missing.size();
  call->cache_hits_.fetch_add(static_cast<int64_t>(hits), std::memory_order_relaxed);
  const std::string version = std::to_string(model->version());
  metrics_->embed_cache_hits->WithLabels({model->name(), version})->Increment(static_cast<double>(hits));
  metrics_->embed_cache_misses->WithLabels({model->name(), version})->Increment(static_cast<double>(missing.size()));
  const int64_t dim = std::max<int64_t>(model->num_labels(), 1);
  // Every row's vector in order; kInternal when one has another width than the model's.
  auto merge = [dim](std::vector<std::optional<std::vector<float>>>& vectors) -> absl::StatusOr<InferenceResult> {
    InferenceResult out;
    out.rows = static_cast<int64_t>(vectors.size());
    out.num_labels = dim;
    out.logits.reserve(vectors.size() * static_cast<size_t>(dim));
    for (const auto& v : vectors) {
      if (!v.has_value() || v->size() != static_cast<size_t>(dim)) {
        return errors::Internal("embedding cache: a vector of the wrong width");
      }
      out.logits.insert(out.logits.end(), v->begin(), v->end());
    }
    return out;
  };
  if (missing.empty()) {
    auto all = merge(cached);
    if (!all.ok()) return std::move(done)(all.status());
    return std::move(done)(InferOutcome{*std::move(all), nullptr});
  }
  std::vector<tokenizer::Encoding> queued;
  queued.reserve(missing.size());
  for (size_t i : missing) queued.push_back(std::move(rows[i]));
  SubmitRows(call, std::move(model), std::move(queued),
             [done = std::move(done), cache = embed_cache_.get(), keys = std::move(keys), cached = std::move(cached),
              missing = std::move(missing), merge, dim](absl::StatusOr<InferOutcome> sub) mutable {
               // A fallback (a classifier's default) never reaches an embedding model; its answer is
               // passed on as it is, never stored.
               if (!sub.ok() || sub->fallback != nullptr) return std::move(done)(std::move(sub));
               const InferenceResult& r = sub->result;
               if (r.num_labels != dim || r.logits.size() != missing.size() * static_cast<size_t>(dim)) {
                 return std::move(done)(errors::Internal(absl::StrCat("the model answered ", r.logits.size(),
                                                                      " values for ", missing.size(),
                                                                      " rows of dimension ", dim)));
               }
               const size_t width = static_cast<size_t>(dim);
               for (size_t j = 0; j < missing.size(); ++j) {
                 std::vector<float> row(r.logits.begin() + j * width, r.logits.begin() + (j + 1) * width);
                 cache->Insert(std::move(keys[missing[j]]), row);
                 cached[missing[j]] = std::move(row);
               }
               auto all = merge(cached);
               if (!all.ok()) return std::move(done)(all.status());
               all->real_tokens = r.real_tokens;
               all->timings = r.timings;
               std::move(done)(InferOutcome{*std::move(all), nullptr});
             },
             TensorWindows{});
}

absl::Status ScoringPipeline::Tokenize(const Call& call, const ServedModel& model, std::span<const TextInput> inputs,
                                       bool add_special_tokens, std::vector<tokenizer::Encoding>* out,
                                       std::optional<tokenizer::TruncationDirection> direction) const {
  tokenizer::EncodeOptions opts;
  opts.max_length = model.max_sequence_length();
  opts.direction = direction;
  opts.add_special_tokens = add_special_tokens;
  out->assign(inputs.size(), tokenizer::Encoding{});
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i % kTokenizeChunkDocuments == 0) {
      if (absl::Status s = call.StillWanted("tokenizing"); !s.ok()) return s;
    }
    const TextInput& in = inputs[i];
    if (in.text_pair.has_value() && model.parameters().prompt_template.has_value()) {
      auto encoder = MakePromptEncoder(model, in.instruction, in.text);
      if (!encoder.ok()) return encoder.status();
      const std::string_view document = *in.text_pair;
      if (absl::Status s = encoder->Encode(document, direction.value_or(model.parameters().truncation_direction),
                                           &(*out)[i]);
          !s.ok()) {
        return s.code() == absl::StatusCode::kFailedPrecondition ? errors::InvalidInput(s.message()) : s;
      }
      continue;
    }
    if (in.instruction.has_value()) {
      if (absl::Status s = ResolveInstruction(model, in.instruction).status(); !s.ok()) return s;
    }
    if (absl::Status s = model.tokenizer().Encode(in.text, in.text_pair, opts, &(*out)[i]); !s.ok()) return s;
  }
  return absl::OkStatus();
}

void ScoringPipeline::RefreshMetrics() const {
  absl::MutexLock lock(&refresh_mu_);
  if (embed_cache_ != nullptr) {
    const uint64_t evictions = embed_cache_->evictions();
    metrics_->embed_cache_evictions->WithLabels({})->Increment(
        static_cast<double>(evictions - mirrored_embed_evictions_));
    mirrored_embed_evictions_ = evictions;
    metrics_->embed_cache_bytes->WithLabels({})->Set(static_cast<double>(embed_cache_->bytes()));
  }
  if (cache_ == nullptr) return;
  const uint64_t evictions = cache_->evictions();
  metrics_->score_cache_evictions->WithLabels({})->Increment(static_cast<double>(evictions - mirrored_evictions_));
  mirrored_evictions_ = evictions;
  metrics_->score_cache_bytes->WithLabels({})->Set(static_cast<double>(cache_->bytes()));
}

}  // namespace tide::serving
