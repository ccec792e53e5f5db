// RequestPipeline's embedding path (request_pipeline.h: Embed, DefaultModelFor, CheckedModel).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/embedding_vectors.h"
#include "common/error.h"
#include "common/error_echo.h"
#include "config/tide_parameters.h"
#include "pipeline/request_pipeline.h"

namespace tide::pipeline {
namespace {

bool Fits(Task task, Task wanted) { return (task == Task::kEmbed) == (wanted == Task::kEmbed); }

// The prompt prefix of `request` for `model`, or kInvalidInput for a prompt_name it lacks.
absl::StatusOr<std::string> PromptOf(const serving::ServedModel& model, const api::EmbedRequest& request) {
  const config::TideParameters& p = model.parameters();
  if (request.prompt_name.has_value()) {
    const std::string* prefix = p.Prompt(*request.prompt_name);
    if (prefix == nullptr) {
      std::string names;
      for (const auto& [name, text] : p.prompts) absl::StrAppend(&names, names.empty() ? "" : ", ", name);
      return errors::InvalidInput(absl::StrCat("prompt_name '", EchoForError(*request.prompt_name), "' is not a prompt of model ",
                                               model.name(), names.empty() ? " (it has none)" : absl::StrCat(" (it has ", names, ")")));
    }
    return *prefix;
  }
  if (request.input_type.has_value()) {
    for (const std::string& name : api::PromptNamesFor(*request.input_type)) {
      if (const std::string* prefix = p.Prompt(name)) return *prefix;
    }
    return std::string();
  }
  if (p.default_prompt_name.has_value()) {
    if (const std::string* prefix = p.Prompt(*p.default_prompt_name)) return *prefix;
  }
  return std::string();
}

// The dimensions a request may cut to: 1..dim, and one of matryoshka_dimensions (or dim) when the
// model lists them.
absl::Status CheckDimensions(const serving::ServedModel& model, size_t dimensions, size_t dim) {
  if (dimensions > dim) {
    return errors::InvalidInput(absl::StrCat("dimensions ", dimensions, " is larger than the dimension ", dim,
                                             " of model ", model.name()));
  }
  const std::vector<int64_t>& allowed = model.parameters().matryoshka_dimensions;
  if (allowed.empty() || dimensions == dim) return absl::OkStatus();
  if (std::find(allowed.begin(), allowed.end(), static_cast<int64_t>(dimensions)) != allowed.end()) {
    return absl::OkStatus();
  }
  std::string list;
  for (int64_t d : allowed) absl::StrAppend(&list, list.empty() ? "" : ", ", d);
  return errors::InvalidInput(absl::StrCat("dimensions ", dimensions, " is not one of model ", model.name(),
                                           "'s matryoshka dimensions (", list, ", ", dim, ")"));
}

// The request's inputs as `m`'s rows: texts get `prompt` and the tokenizer (with special tokens,
// cut from the request's direction, else the model's); token-id inputs are rows as they are (ids
// outside the vocabulary refused). With truncate false an input over the model's limit is refused.
absl::StatusOr<std::vector<tokenizer::Encoding>> EncodeInputs(serving::ServiceCore& core, const serving::Call& call,
                                                              const serving::ServedModel& m,
                                                              const api::EmbedRequest& request,
                                                              const std::string& prompt) {
  // Texts get the prompt and the tokenizer; token-id inputs are rows as they are.
  std::vector<std::string> texts;
  std::vector<size_t> text_rows;
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    if (request.inputs[i].ids.has_value()) continue;
    texts.push_back(absl::StrCat(prompt, request.inputs[i].text));
    text_rows.push_back(i);
  }
  std::vector<serving::TextInput> inputs;
  inputs.reserve(texts.size());
  for (const std::string& t : texts) inputs.push_back(serving::TextInput{t, std::nullopt, std::nullopt});
  std::vector<tokenizer::Encoding> encoded;
  const auto direction = request.truncation_direction.value_or(m.parameters().truncation_direction);
  if (absl::Status s = core.Tokenize(call, m, inputs, /*add_special_tokens=*/true, &encoded, direction); !s.ok()) {
    return s;
  }
  std::vector<tokenizer::Encoding> rows(request.inputs.size());
  for (size_t k = 0; k < text_rows.size(); ++k) rows[text_rows[k]] = std::move(encoded[k]);
  const size_t max_length = m.max_sequence_length();
  const bool truncate = request.truncate.value_or(true);
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    const std::optional<std::vector<int64_t>>& ids = request.inputs[i].ids;
    if (!ids.has_value()) continue;
    for (size_t t = 0; t < ids->size(); ++t) {
      if (!m.tokenizer().IdToToken((*ids)[t]).has_value()) {
        return errors::InvalidInput(absl::StrCat("input[", i, "][", t, "]: token id ", (*ids)[t],
                                                 " is not in the vocabulary of model ", m.name()));
      }
    }
    tokenizer::Encoding& e = rows[i];
    e.untruncated_length = ids->size();
    const size_t keep = std::min(ids->size(), max_length);
    const size_t from = direction == tokenizer::TruncationDirection::kLeft ? ids->size() - keep : 0;
    e.ids.assign(ids->begin() + from, ids->begin() + from + keep);
    e.type_ids.assign(keep, 0);
    e.attention_mask.assign(keep, 1);
  }
  if (!truncate) {
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].truncated()) {
        return errors::InvalidInput(absl::StrCat("inputs[", i, "] has ", rows[i].untruncated_length,
                                                 " tokens; the model's limit is ", max_length,
                                                 " (send \"truncate\": true to cut it)"));
      }
    }
  }
  return rows;
}

}  // namespace

absl::StatusOr<std::shared_ptr<serving::ServedModel>> CheckedModel(
    absl::StatusOr<std::shared_ptr<serving::ServedModel>> model, Task wanted) {
  if (!model.ok()) return model;
  const Task task = (*model)->parameters().task;
  if (Fits(task, wanted)) return model;
  if (wanted == Task::kEmbed) {
    const std::string name(config::TaskName(task));
    return errors::InvalidInput(absl::StrCat("model ", (*model)->name(), " is not an embedding model (its task is \"",
                                             name, "\"; embeddings need task \"embed\")"));
  }
  return errors::InvalidInput(absl::StrCat("model ", (*model)->name(),
                                           " is an embedding model (task \"embed\"); it answers /embed, /embed_all, "
                                           "/v1/embeddings and /v2/embed, not scores"));
}

std::string RequestPipeline::DefaultModelFor(Task task) const {
  auto fallback = core_->FindModel();
  if (!fallback.ok() || Fits((*fallback)->parameters().task, task)) return "";
  std::vector<std::shared_ptr<serving::ServedModel>> all = core_->AllModels();
  std::string best;
  for (const auto& m : all) {
    if (Fits(m->parameters().task, task) && (best.empty() || m->name() < best)) best = m->name();
  }
  return best;
}

bool RequestPipeline::DefaultIsEmbedder() const {
  auto model = core_->FindModel();
  return model.ok() && (*model)->parameters().task == config::Task::kEmbed;
}

void RequestPipeline::Embed(const serving::CallPtr& call, std::shared_ptr<const api::EmbedRequest> request,
                            EmbedDone done) const {
  auto model = CheckedModel(
      core_->FindModel(*call, request->model.has_value() ? *request->model : DefaultModelFor(Task::kEmbed)),
      Task::kEmbed);
  if (!model.ok()) return std::move(done)(EmbedAnswer{.outcome = {.status = model.status()}});
  const serving::ServedModel& m = **model;
  EmbedAnswer failed;
  failed.outcome.set_model(m.name(), m.version());
  auto fail = [&](absl::Status s) {
    failed.outcome.status = std::move(s);
    std::move(done)(std::move(failed));
  };
  const size_t dim = static_cast<size_t>(std::max<int64_t>(m.num_labels(), 1));
  const size_t dimensions = request->dimensions.value_or(dim);
  if (absl::Status s = CheckDimensions(m, dimensions, dim); !s.ok()) return fail(s);
  auto prompt = PromptOf(m, *request);
  if (!prompt.ok()) return fail(prompt.status());

  const Steady::time_point tokenize_start = Steady::now();
  auto encoded = EncodeInputs(*core_, *call, m, *request, *prompt);
  if (!encoded.ok()) return fail(encoded.status());
  std::vector<tokenizer::Encoding> rows = *std::move(encoded);
  const Steady::duration tokenize = Steady::now() - tokenize_start;
  size_t tokens = 0;
  for (const tokenizer::Encoding& e : rows) tokens += e.ids.size();
  const bool normalize = request->normalize.value_or(m.parameters().normalize);
  core_->Embed(call, *model, std::move(rows),
               [done = std::move(done), base = std::move(failed.outcome), tokenize, tokens, dim, dimensions,
                normalize](absl::StatusOr<serving::InferOutcome> outcome) mutable {
                 EmbedAnswer a{.outcome = std::move(base)};
                 if (!outcome.ok()) {
                   a.outcome.status = outcome.status();
                   return std::move(done)(std::move(a));
                 }
                 const serving::InferenceResult& r = outcome->result;
                 if (static_cast<size_t>(r.num_labels) != dim ||
                     r.logits.size() != static_cast<size_t>(r.rows) * dim) {
                   a.outcome.status = errors::Internal(absl::StrCat("the model answered ", r.logits.size(),
                                                                    " values for ", r.rows, " rows of dimension ", dim));
                   return std::move(done)(std::move(a));
                 }
                 a.vectors = api::CutAndNormalize(r.logits, static_cast<size_t>(r.rows), dim, dimensions, normalize);
                 a.dim = dimensions;
                 a.tokens = tokens;
                 a.outcome.post = Steady::now();
                 a.outcome.fallback = outcome->fallback;
                 serving::StageTimings t = r.timings;
                 t.tokenize = tokenize;
                 a.outcome.timings = t;
                 std::move(done)(std::move(a));
               });
}

void RequestPipeline::EmbedAll(const serving::CallPtr& call, std::shared_ptr<const api::EmbedRequest> request,
                               EmbedAllDone done) const {
  auto model = CheckedModel(
      core_->FindModel(*call, request->model.has_value() ? *request->model : DefaultModelFor(Task::kEmbed)),
      Task::kEmbed);
  if (!model.ok()) return std::move(done)(EmbedAllAnswer{.outcome = {.status = model.status()}});
  const serving::ServedModel& m = **model;
  EmbedAllAnswer failed;
  failed.outcome.set_model(m.name(), m.version());
  auto fail = [&](absl::Status s) {
    failed.outcome.status = std::move(s);
    std::move(done)(std::move(failed));
  };
  if (m.signature().token_embeddings_name.empty()) {
    return fail(errors::ModelUnsupported(absl::StrCat(
        "model ", m.name(), " has no token embeddings: its graph has no token_embeddings output "
        "(tools/export_model.py exports it beside sentence_embedding)")));
  }
  auto prompt = PromptOf(m, *request);
  if (!prompt.ok()) return fail(prompt.status());

  const Steady::time_point tokenize_start = Steady::now();
  auto encoded = EncodeInputs(*core_, *call, m, *request, *prompt);
  if (!encoded.ok()) return fail(encoded.status());
  std::vector<tokenizer::Encoding> rows = *std::move(encoded);
  const Steady::duration tokenize = Steady::now() - tokenize_start;
  std::vector<size_t> lengths;
  size_t tokens = 0;
  for (const tokenizer::Encoding& e : rows) {
    lengths.push_back(e.ids.size());
    tokens += e.ids.size();
  }
  core_->EmbedAll(call, *model, std::move(rows),
                  [done = std::move(done), base = std::move(failed.outcome), tokenize, tokens,
                   lengths = std::move(lengths)](absl::StatusOr<serving::InferOutcome> outcome) mutable {
                    EmbedAllAnswer a{.outcome = std::move(base)};
                    if (!outcome.ok()) {
                      a.outcome.status = outcome.status();
                      return std::move(done)(std::move(a));
                    }
                    serving::InferenceResult& r = outcome->result;
                    bool whole = r.hidden > 0 && r.token_states.size() == lengths.size();
                    for (size_t i = 0; whole && i < lengths.size(); ++i) {
                      whole = r.token_states[i].size() == lengths[i] * static_cast<size_t>(r.hidden);
                    }
                    if (!whole) {
                      a.outcome.status = errors::Internal(absl::StrCat(
                          "the model answered token states for ", r.token_states.size(), " of ", lengths.size(),
                          " inputs (hidden ", r.hidden, ")"));
                      return std::move(done)(std::move(a));
                    }
                    a.hidden = static_cast<size_t>(r.hidden);
                    a.states = std::move(r.token_states);
                    a.tokens = tokens;
                    a.outcome.post = Steady::now();
                    serving::StageTimings t = r.timings;
                    t.tokenize = tokenize;
                    a.outcome.timings = t;
                    std::move(done)(std::move(a));
                  });
}

}  // namespace tide::pipeline
