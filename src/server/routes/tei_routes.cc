// The Service's TEI routes besides /rerank and /tokenize (service.h): POST /predict, POST / and
// /invocations, POST /decode, GET /info, GET /ping.
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/rerank.h"
#include "api/tei_decode.h"
#include "api/tei_info.h"
#include "api/tei_predict.h"
#include "common/error.h"
#include "server/routes/route_util.h"
#include "server/routes/service.h"
#include "tokenizer/token_text.h"

namespace tide::server {
namespace {

using Steady = std::chrono::steady_clock;

}  // namespace

void Service::Predict(http::Request request, http::Responder respond) {
  StartInference(std::move(request), std::move(respond), "predict", {}, {},
                 [this](const http::Request& r, ResponseSender s, serving::CallPtr c) {
                   PredictWork(r, std::move(s), std::move(c));
                 });
}

// TEI answers its default route with the model's task: rerank for a reranker, predict for a
// classifier.
void Service::Invocations(http::Request request, http::Responder respond) {
  StartInference(std::move(request), std::move(respond), "invocations", {}, {},
                 [this](const http::Request& r, ResponseSender s, serving::CallPtr c) {
                   auto model = core_->FindModel();
                   if (model.ok() && (*model)->parameters().task == config::Task::kClassify) {
                     return PredictWork(r, std::move(s), std::move(c));
                   }
                   RerankWork(r, std::move(s), std::move(c));
                 });
}

void Service::PredictWork(const http::Request& request, ResponseSender sender, serving::CallPtr call) {
  auto parsed = api::ParsePredictRequest(request.body, options_.limits);
  if (!parsed.ok()) return sender.SendError(parsed.status());
  auto model = core_->FindModel();
  if (!model.ok()) return sender.SendError(model.status());
  sender.set_model((*model)->name(), (*model)->version());
  const std::vector<serving::TextInput> inputs = TextInputsOf(parsed->inputs);
  const Steady::time_point tokenize_start = Steady::now();
  std::vector<tokenizer::Encoding> rows;
  if (absl::Status s = core_->Tokenize(*call, **model, inputs, /*add_special_tokens=*/true, &rows,
                                       parsed->truncation_direction.value_or((*model)->parameters().truncation_direction));
      !s.ok()) {
    return sender.SendError(s);
  }
  if (!parsed->truncate.value_or(true)) {
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].truncated()) {
        return sender.SendError(errors::InvalidInput(
            absl::StrCat("inputs[", i, "] has ", rows[i].untruncated_length, " tokens; the model's limit is ",
                         (*model)->max_sequence_length(), " (send \"truncate\": true to cut it)")));
      }
    }
  }
  const Steady::duration tokenize = Steady::now() - tokenize_start;
  auto req = std::make_shared<api::PredictRequest>(*std::move(parsed));
  core_->Infer(call, *model, std::move(rows),
               [sender = std::move(sender), req, tokenize, m = *model](absl::StatusOr<serving::InferOutcome> outcome) mutable {
                 if (!outcome.ok()) return sender.SendError(outcome.status());
                 const Steady::time_point post = Steady::now();
                 const serving::InferenceResult& result = outcome->result;
                 auto body = api::RenderPredictResponse(*req, result.logits, m->LabelNames(result.num_labels));
                 if (!body.ok()) return sender.SendError(body.status());
                 serving::StageTimings t = result.timings;
                 t.tokenize = tokenize;
                 sender.SendAnswer(JsonResponse(*std::move(body)), t, post, outcome->fallback);
               });
}

void Service::Decode(http::Request request, http::Responder respond) {
  StartInference(std::move(request), std::move(respond), "decode", {}, {},
                 [this](const http::Request& r, ResponseSender s, serving::CallPtr c) {
                   DecodeWork(r, std::move(s), std::move(c));
                 });
}

void Service::DecodeWork(const http::Request& request, ResponseSender sender, serving::CallPtr call) {
  auto parsed = api::ParseDecodeRequest(request.body, options_.limits);
  if (!parsed.ok()) return sender.SendError(parsed.status());
  auto model = core_->FindModel();
  if (!model.ok()) return sender.SendError(model.status());
  sender.set_model((*model)->name(), (*model)->version());
  std::vector<std::string> texts;
  texts.reserve(parsed->ids.size());
  for (const std::vector<int64_t>& ids : parsed->ids) {
    texts.push_back(tokenizer::Decode((*model)->tokenizer(), ids, parsed->skip_special_tokens));
  }
  sender.Send(JsonResponse(api::RenderDecodeResponse(texts)));
}

void Service::Info(http::Request request, http::Responder respond) {
  ResponseSender sender = SenderFor(request, std::move(respond), "info");
  auto model = core_->FindModel();
  if (!model.ok()) return sender.SendError(model.status());
  const serving::ServedModel& m = **model;
  sender.set_model(m.name(), m.version());
  api::TeiInfo info;
  info.model_id = m.name();
  info.classifier = m.parameters().task == config::Task::kClassify;
  info.labels = m.LabelNames(std::max<int64_t>(m.num_labels(), 1));
  info.max_concurrent_requests = core_->options().max_concurrent_requests;
  info.max_input_length = static_cast<int64_t>(m.max_sequence_length());
  info.max_batch_tokens = static_cast<int64_t>(m.max_batch_tokens());
  if (m.config().max_batch_size() > 0) info.max_batch_requests = m.config().max_batch_size();
  info.max_client_batch_size = static_cast<int64_t>(options_.limits.max_documents);
  info.auto_truncate = true;
  const int workers = core_->options().tokenization_workers;
  info.tokenization_workers = workers > 0 ? workers : std::max(1u, std::thread::hardware_concurrency());
  info.version = options_.version;
  sender.Send(JsonResponse(api::RenderTeiInfo(info)));
}

// SageMaker's and TEI's health route: 200 with an empty body when ready, else 503 (as
// /v2/health/ready).
void Service::Ping(http::Request request, http::Responder respond) {
  ResponseSender sender = SenderFor(request, std::move(respond), "ping");
  if (!core_->Ready()) return sender.SendError(errors::Unavailable("not ready"));
  http::Response r;
  r.content_type.clear();
  sender.Send(std::move(r));
}

}  // namespace tide::server
