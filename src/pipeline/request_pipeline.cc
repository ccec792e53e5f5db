#include "pipeline/request_pipeline.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/kserve_classification.h"
#include "common/error.h"
#include "common/error_echo.h"
#include "config/model_config.h"
#include "serving/kserve_answers.h"
#include "serving/scoring.h"
#include "serving/tensor_rows.h"
#include "tokenizer/token_text.h"

namespace tide::pipeline {

namespace {

// KServe parameters arrive as bool/int/double/string; timeouts and priorities must be integers.
absl::StatusOr<std::optional<int64_t>> IntParameter(const api::Parameters& params, std::string_view name) {
  auto it = params.find(name);
  if (it == params.end()) return std::optional<int64_t>();
  if (const int64_t* v = std::get_if<int64_t>(&it->second)) return std::optional<int64_t>(*v);
  return errors::InvalidInput(absl::StrCat("parameters.", std::string(name), " must be an integer"));
}

// The core's text inputs of TEI inputs (a text and an optional text_pair); views into `inputs`.
// A decoder reranker's pairs are its prompts with `instruction` (serving/scoring_pipeline.h).
template <typename Input>
std::vector<serving::TextInput> TextInputsOf(const std::vector<Input>& inputs,
                                             const std::optional<std::string>& instruction) {
  std::vector<serving::TextInput> out;
  out.reserve(inputs.size());
  for (const Input& in : inputs) {
    serving::TextInput t{in.text, std::nullopt, instruction};
    if (in.text_pair.has_value()) t.text_pair = *in.text_pair;
    out.push_back(t);
  }
  return out;
}

// Token rows of `encoding` as TEI's tokens: the input's own substring and byte offsets where the
// vocabulary piece aligns with the text (tide's tokenizers do not track offsets), else the piece.
// A pair's second text starts at its first token of type 1 (BERT); without token types the
// alignment runs over the first text only and the rest keep their pieces.
std::vector<api::TokenInfo> TokensOf(const tokenizer::Tokenizer& tok, const tokenizer::Encoding& e,
                                     const api::TokenizeInput& input) {
  std::vector<std::string> pieces(e.ids.size());
  std::vector<bool> special(e.ids.size());
  for (size_t t = 0; t < e.ids.size(); ++t) {
    pieces[t] = tok.IdToToken(e.ids[t]).value_or("");
    special[t] = tok.IsSpecialToken(e.ids[t]);
  }
  size_t second = e.ids.size();
  if (input.text_pair.has_value()) {
    for (size_t t = 0; t < e.type_ids.size(); ++t) {
      if (e.type_ids[t] != 0) {
        second = t;
        break;
      }
    }
  }
  std::vector<tokenizer::TokenSpan> spans(e.ids.size());
  auto align = [&](std::string_view text, size_t begin, size_t end) {
    std::vector<std::string> p(pieces.begin() + begin, pieces.begin() + end);
    std::vector<bool> sp(special.begin() + begin, special.begin() + end);
    std::vector<tokenizer::TokenSpan> got = tokenizer::AlignTokens(text, p, sp);
    std::copy(got.begin(), got.end(), spans.begin() + begin);
  };
  align(input.text, 0, second);
  if (second < e.ids.size()) align(*input.text_pair, second, e.ids.size());
  std::vector<api::TokenInfo> out;
  out.reserve(e.ids.size());
  for (size_t t = 0; t < e.ids.size(); ++t) {
    api::TokenInfo info;
    info.id = e.ids[t];
    info.special = special[t];
    const std::string_view text = t < second ? std::string_view(input.text) : std::string_view(*input.text_pair);
    if (spans[t].has_value()) {
      info.start = spans[t]->first;
      info.stop = spans[t]->second;
      info.text = std::string(text.substr(spans[t]->first, spans[t]->second - spans[t]->first));
    } else {
      info.text = std::move(pieces[t]);
    }
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace

RequestPipeline::RequestPipeline(serving::ServiceCore* core, CompletionRecorder recorder, PipelineOptions options)
    : core_(core), options_(std::move(options)), recorder_(recorder) {}

// ---- rerank ------------------------------------------------------------------------------------

void RequestPipeline::Rerank(const serving::CallPtr& call, std::shared_ptr<const api::RerankRequest> request,
                             RerankDone done) const {
  auto model = CheckedModel(core_->FindModel(*call, DefaultModelFor(Task::kRerank)), Task::kRerank);
  if (!model.ok()) return std::move(done)(RerankAnswer{.outcome = {.status = model.status()}});
  serving::PairOptions pair_options{
      request->truncate, request->truncation_direction.value_or((*model)->parameters().truncation_direction),
      std::nullopt};
  pair_options.long_documents = request->long_documents.value_or((*model)->parameters().long_documents);
  pair_options.instruction = request->instruction;
  ScorePairs(call, *model, request->query, request->texts, pair_options, request->raw_scores, std::move(done));
}

std::optional<RerankAnswer> RequestPipeline::RerankFromCache(const serving::CallPtr& call,
                                                             const api::RerankRequest& request) const {
  auto model = CheckedModel(core_->FindModel(*call, DefaultModelFor(Task::kRerank)), Task::kRerank);
  if (!model.ok()) return std::nullopt;
  serving::PairOptions pair_options{
      request.truncate, request.truncation_direction.value_or((*model)->parameters().truncation_direction),
      std::nullopt};
  pair_options.long_documents = request.long_documents.value_or((*model)->parameters().long_documents);
  pair_options.instruction = request.instruction;
  const std::vector<std::string_view> docs(request.texts.begin(), request.texts.end());
  auto scores = core_->RerankFromCache(*call, **model, request.query, docs, pair_options, request.raw_scores);
  if (!scores.has_value()) return std::nullopt;
  RerankAnswer a;
  a.outcome.set_model((*model)->name(), (*model)->version());
  a.outcome.cache_on = true;
  if (!scores->ok()) {
    a.outcome.status = scores->status();
    return a;
  }
  a.outcome.cache_hits = (*scores)->cache_hits;
  a.outcome.documents = request.texts.size();
  a.outcome.tokens = (*scores)->real_tokens;
  a.outcome.timings = (*scores)->timings;
  a.outcome.post = Steady::now();
  a.scores = std::move((*scores)->scores);
  a.real_tokens = (*scores)->real_tokens;
  return a;
}

void RequestPipeline::CohereRerank(const serving::CallPtr& call,
                                   std::shared_ptr<const api::CohereRerankRequest> request, RerankDone done) const {
  auto model = CheckedModel(
      core_->FindModel(*call, request->model.has_value() ? *request->model : DefaultModelFor(Task::kRerank)),
      Task::kRerank);
  if (!model.ok()) return std::move(done)(RerankAnswer{.outcome = {.status = model.status()}});
  serving::PairOptions pair_options{true, (*model)->parameters().truncation_direction, request->max_tokens_per_doc};
  pair_options.long_documents = request->long_documents.value_or((*model)->parameters().long_documents);
  pair_options.instruction = request->instruction;
  ScorePairs(call, *model, request->query, request->documents, pair_options, /*raw_scores=*/false, std::move(done));
}

void RequestPipeline::ScorePairs(const serving::CallPtr& call, std::shared_ptr<serving::ServedModel> model,
                                 std::string_view query, const std::vector<std::string>& documents,
                                 const serving::PairOptions& pair_options, bool raw_scores, RerankDone done) const {
  Outcome base;
  base.set_model(model->name(), model->version());
  base.cache_on = core_->score_cache() != nullptr;
  base.documents = documents.size();
  const std::vector<std::string_view> docs(documents.begin(), documents.end());
  core_->Rerank(call, std::move(model), query, docs, pair_options, raw_scores,
                [done = std::move(done), base = std::move(base)](absl::StatusOr<serving::RerankScores> scores) mutable {
                  RerankAnswer a{.outcome = std::move(base)};
                  if (!scores.ok()) {
                    a.outcome.status = scores.status();
                    return std::move(done)(std::move(a));
                  }
                  a.outcome.post = Steady::now();
                  a.outcome.fallback = scores->fallback;
                  a.outcome.cache_hits = scores->cache_hits;
                  a.outcome.tokens = scores->real_tokens;
                  a.outcome.timings = scores->timings;
                  a.scores = std::move(scores->scores);
                  a.real_tokens = scores->real_tokens;
                  std::move(done)(std::move(a));
                });
}

// ---- predict -------------------------------------------------------------------------------------

void RequestPipeline::Predict(const serving::CallPtr& call, std::shared_ptr<const api::PredictRequest> request,
                              PredictDone done) const {
  auto model = CheckedModel(core_->FindModel(*call, DefaultModelFor(Task::kClassify)), Task::kClassify);
  if (!model.ok()) return std::move(done)(PredictAnswer{.outcome = {.status = model.status()}});
  PredictAnswer failed;
  failed.outcome.set_model((*model)->name(), (*model)->version());
  const std::vector<serving::TextInput> inputs = TextInputsOf(request->inputs, request->instruction);
  const Steady::time_point tokenize_start = Steady::now();
  std::vector<tokenizer::Encoding> rows;
  if (absl::Status s = core_->Tokenize(*call, **model, inputs, /*add_special_tokens=*/true, &rows,
                                       request->truncation_direction.value_or((*model)->parameters().truncation_direction));
      !s.ok()) {
    failed.outcome.status = s;
    return std::move(done)(std::move(failed));
  }
  if (!request->truncate.value_or(true)) {
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].truncated()) {
        failed.outcome.status = errors::InvalidInput(
            absl::StrCat("inputs[", i, "] has ", rows[i].untruncated_length, " tokens; the model's limit is ",
                         (*model)->max_sequence_length(), " (send \"truncate\": true to cut it)"));
        return std::move(done)(std::move(failed));
      }
    }
  }
  const Steady::duration tokenize = Steady::now() - tokenize_start;
  size_t tokens = 0;
  for (const tokenizer::Encoding& e : rows) tokens += e.ids.size();
  core_->Infer(call, *model, std::move(rows),
               [done = std::move(done), base = std::move(failed.outcome), tokenize, tokens,
                m = *model](absl::StatusOr<serving::InferOutcome> outcome) mutable {
                 PredictAnswer a{.outcome = std::move(base)};
                 if (!outcome.ok()) {
                   a.outcome.status = outcome.status();
                   return std::move(done)(std::move(a));
                 }
                 a.outcome.post = Steady::now();
                 a.outcome.fallback = outcome->fallback;
                 serving::StageTimings t = outcome->result.timings;
                 t.tokenize = tokenize;
                 a.outcome.timings = t;
                 a.num_labels = outcome->result.num_labels;
                 a.labels = m->LabelNames(outcome->result.num_labels);
                 a.logits = std::move(outcome->result.logits);
                 a.tokens = tokens;
                 a.outcome.tokens = tokens;
                 std::move(done)(std::move(a));
               });
}

// ---- KServe infer --------------------------------------------------------------------------------

void RequestPipeline::Infer(const serving::CallPtr& call, std::string_view model_name, std::string_view version,
                            InferDecoder decode, InferDone done) const {
  auto model = core_->FindModel(*call, model_name, version);
  if (!model.ok()) return std::move(done)(InferAnswer{.outcome = {.status = model.status()}});
  InferAnswer failed;
  failed.outcome.set_model((*model)->name(), (*model)->version());
  auto fail = [&](absl::Status s) {
    failed.outcome.status = std::move(s);
    std::move(done)(std::move(failed));
  };
  // Token tensors hold at most max_documents rows of max_sequence_length tokens.
  api::RequestLimits limits = options_.limits;
  const size_t seq = std::max<size_t>((*model)->max_sequence_length(), 1);
  if (limits.max_documents <= limits.max_batch_tensor_elements / seq) {
    limits.max_batch_tensor_elements = limits.max_documents * seq;
  }
  auto parsed = std::move(decode)(limits);
  if (!parsed.ok()) return fail(parsed.status());
  const ModelSignature& sig = (*model)->signature();
  std::optional<int64_t> classification;
  for (const api::InferRequestedOutput& out : parsed->outputs) {
    if (out.name != sig.logits_name) {
      return fail(errors::InvalidInput(absl::StrCat("unknown output '", EchoForError(out.name), "'; model ",
                                                    (*model)->name(), " has '", sig.logits_name, "'")));
    }
    auto k = api::ClassificationCount(out.parameters, out.name);
    if (!k.ok()) return fail(k.status());
    if (k->has_value()) classification = *k;
  }
  auto long_documents = serving::LongDocumentsParameter(parsed->parameters);
  if (!long_documents.ok()) return fail(long_documents.status());
  auto timeout = IntParameter(parsed->parameters, "timeout");
  if (!timeout.ok()) return fail(timeout.status());
  auto priority = IntParameter(parsed->parameters, "priority");
  if (!priority.ok()) return fail(priority.status());
  if (absl::Status s = call->Refine(*timeout, *priority); !s.ok()) return fail(s);
  if (absl::Status s = call->StillWanted("parsing"); !s.ok()) return fail(s);

  std::vector<tokenizer::Encoding> rows;
  serving::Clock::duration tokenize{};
  serving::TensorWindows windows;
  if (absl::Status s = serving::RowsFromTensors(**model, *parsed, *long_documents, &rows, &windows, &tokenize);
      !s.ok()) {
    return fail(s);
  }
  auto request = std::make_shared<const api::InferRequest>(*std::move(parsed));
  serving::TensorWindows compared = windows;  // a rollout compares per input (the lambda takes `windows`)
  core_->Infer(call, *model, std::move(rows),
               [done = std::move(done), base = std::move(failed.outcome), request, m = *model, tokenize,
                classification, windows = std::move(windows)](absl::StatusOr<serving::InferOutcome> outcome) mutable {
                 InferAnswer a{.outcome = std::move(base), .request = request};
                 if (!outcome.ok()) {
                   a.outcome.status = outcome.status();
                   return std::move(done)(std::move(a));
                 }
                 serving::FoldWindowRows(windows, &outcome->result);
                 a.outcome.post = Steady::now();
                 a.outcome.fallback = outcome->fallback;
                 serving::StageTimings t = outcome->result.timings;
                 t.tokenize = tokenize;
                 a.outcome.timings = t;
                 const int64_t rows = outcome->result.rows, labels = outcome->result.num_labels;
                 a.response = serving::InferResponseOf(*m, *request, std::move(outcome->result),
                                                       a.outcome.fallback != nullptr);
                 if (classification.has_value()) {
                   // Triton's classification extension: the top k as "value:index[:label]" strings.
                   api::Tensor& out = a.response.outputs.front();
                   auto top = api::ClassificationTensor(out.name, std::get<std::vector<float>>(out.data), rows,
                                                        labels, *classification, m->loaded()->labels);
                   if (!top.ok()) {
                     a.outcome.status = top.status();
                     return std::move(done)(std::move(a));
                   }
                   out = *std::move(top);
                 }
                 std::move(done)(std::move(a));
               },
               std::move(compared));
}

// ---- tokenize, decode ----------------------------------------------------------------------------

TokenizeAnswer RequestPipeline::Tokenize(const serving::Call& call, const api::TokenizeRequest& request) const {
  TokenizeAnswer a;
  auto model = core_->FindModel(call);
  if (!model.ok()) {
    a.outcome.status = model.status();
    return a;
  }
  a.outcome.set_model((*model)->name(), (*model)->version());
  const std::vector<serving::TextInput> inputs = TextInputsOf(request.inputs, request.instruction);
  std::vector<tokenizer::Encoding> encodings;
  if (absl::Status s = core_->Tokenize(call, **model, inputs, request.add_special_tokens, &encodings); !s.ok()) {
    a.outcome.status = s;
    return a;
  }
  a.tokens.reserve(encodings.size());
  const std::optional<PromptTemplate>& prompt = (*model)->parameters().prompt_template;
  for (size_t i = 0; i < encodings.size(); ++i) {
    const api::TokenizeInput& input = request.inputs[i];
    if (prompt.has_value() && input.text_pair.has_value()) {
      // A decoder reranker's pair is its prompt: offsets into the rendered prompt's text.
      auto instruction = serving::ResolveInstruction(**model, request.instruction);
      if (!instruction.ok()) {
        a.outcome.status = instruction.status();
        return a;
      }
      const api::TokenizeInput rendered{prompt->Render(*instruction, input.text, *input.text_pair).text, std::nullopt};
      a.tokens.push_back(TokensOf((*model)->tokenizer(), encodings[i], rendered));
      continue;
    }
    a.tokens.push_back(TokensOf((*model)->tokenizer(), encodings[i], input));
  }
  return a;
}

DecodeAnswer RequestPipeline::Decode(const api::DecodeRequest& request) const {
  DecodeAnswer a;
  auto model = core_->FindModel();
  if (!model.ok()) {
    a.outcome.status = model.status();
    return a;
  }
  a.outcome.set_model((*model)->name(), (*model)->version());
  a.texts.reserve(request.ids.size());
  for (const std::vector<int64_t>& ids : request.ids) {
    a.texts.push_back(tokenizer::Decode((*model)->tokenizer(), ids, request.skip_special_tokens));
  }
  return a;
}

bool RequestPipeline::DefaultIsClassifier() const {
  auto model = core_->FindModel();
  return model.ok() && (*model)->parameters().task == config::Task::kClassify;
}

// ---- descriptions --------------------------------------------------------------------------------

InfoAnswer RequestPipeline::Info() const {
  InfoAnswer a;
  auto model = core_->FindModel();
  if (!model.ok()) {
    a.outcome.status = model.status();
    return a;
  }
  const serving::ServedModel& m = **model;
  a.outcome.set_model(m.name(), m.version());
  api::TeiInfo& info = a.info;
  info.model_id = m.name();
  info.classifier = m.parameters().task == config::Task::kClassify;
  if (m.parameters().task == config::Task::kEmbed) {
    info.embedding_pooling = std::string(config::PoolingName(m.parameters().pooling));
  }
  info.labels = m.LabelNames(std::max<int64_t>(m.num_labels(), 1));
  const serving::ServiceLimits limits = core_->Limits();
  info.max_concurrent_requests = limits.max_concurrent_requests;
  info.max_input_length = static_cast<int64_t>(m.max_sequence_length());
  info.max_batch_tokens = static_cast<int64_t>(m.max_batch_tokens());
  if (m.config().max_batch_size() > 0) info.max_batch_requests = m.config().max_batch_size();
  info.max_client_batch_size = static_cast<int64_t>(options_.limits.max_documents);
  info.auto_truncate = true;
  info.tokenization_workers = limits.tokenization_workers;
  info.version = options_.version;
  return a;
}

absl::StatusOr<std::shared_ptr<serving::ServedModel>> RequestPipeline::Model(std::string_view name,
                                                                            std::string_view version) const {
  return core_->NamedModel(name, version);
}

api::ModelMetadata RequestPipeline::Metadata(const serving::ServedModel& model) const {
  return core_->MetadataOf(model);
}

std::vector<std::shared_ptr<serving::ServedModel>> RequestPipeline::AllModels() const { return core_->AllModels(); }

std::string RequestPipeline::MetricsText(bool openmetrics) const {
  if (recorder_.tracing() != nullptr) recorder_.tracing()->RefreshMetrics();
  return core_->MetricsText(openmetrics);
}

std::optional<serving::RolloutStatus> RolloutStatusOf(const serving::ServiceCore& core, const std::string& model) {
  return core.RolloutStatusOf(model);
}

}  // namespace tide::pipeline
