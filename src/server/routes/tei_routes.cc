// The Service's TEI routes besides /rerank and /tokenize (service.h): POST /predict, POST / and
// /invocations, POST /decode, GET /info, GET /ping.
#include <memory>
#include <string>
#include <vector>

#include "api/tei_decode.h"
#include "api/tei_info.h"
#include "api/tei_predict.h"
#include "common/error.h"
#include "server/routes/route_util.h"
#include "server/routes/service.h"

namespace tide::server {
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
                   if (pipeline_.DefaultIsClassifier()) return PredictWork(r, std::move(s), std::move(c));
                   if (pipeline_.DefaultIsEmbedder()) return EmbedWork(r, std::move(s), std::move(c), api::EmbedApi::kTei);
                   RerankWork(r, std::move(s), std::move(c));
                 });
}

void Service::PredictWork(const http::Request& request, ResponseSender sender, serving::CallPtr call) {
  auto parsed = api::ParsePredictRequest(request.body, limits_);
  if (!parsed.ok()) return sender.SendError(parsed.status());
  auto req = std::make_shared<const api::PredictRequest>(*std::move(parsed));
  pipeline_.Predict(call, req, [sender = std::move(sender), req](pipeline::PredictAnswer answer) mutable {
    if (!answer.outcome.status.ok()) return sender.SendFailure(std::move(answer.outcome));
    auto body = api::RenderPredictResponse(*req, answer.logits, answer.labels);
    if (!body.ok()) {
      answer.outcome.status = body.status();
      return sender.SendFailure(std::move(answer.outcome));
    }
    sender.SendAnswer(JsonResponse(*std::move(body)), std::move(answer.outcome));
  });
}

void Service::Decode(http::Request request, http::Responder respond) {
  StartInference(std::move(request), std::move(respond), "decode", {}, {},
                 [this](const http::Request& r, ResponseSender s, serving::CallPtr c) {
                   DecodeWork(r, std::move(s), std::move(c));
                 });
}

void Service::DecodeWork(const http::Request& request, ResponseSender sender, serving::CallPtr) {
  auto parsed = api::ParseDecodeRequest(request.body, limits_);
  if (!parsed.ok()) return sender.SendError(parsed.status());
  pipeline::DecodeAnswer answer = pipeline_.Decode(*parsed);
  if (!answer.outcome.status.ok()) return sender.SendFailure(std::move(answer.outcome));
  sender.SendAnswer(JsonResponse(api::RenderDecodeResponse(answer.texts)), std::move(answer.outcome));
}

void Service::Info(http::Request request, http::Responder respond) {
  ResponseSender sender = SenderFor(request, std::move(respond), "info");
  pipeline::InfoAnswer answer = pipeline_.Info();
  if (!answer.outcome.status.ok()) return sender.SendFailure(std::move(answer.outcome));
  sender.SendAnswer(JsonResponse(api::RenderTeiInfo(answer.info)), std::move(answer.outcome));
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
