// The Service's embedding routes (service.h): POST /embed (TEI), POST /v1/embeddings (OpenAI),
// POST /v2/embed (Cohere v2). Each decodes its wire format into an api::EmbedRequest, runs the
// pipeline's Embed (the batcher, quota, breaker, metrics and access log as every inference route)
// and renders the vectors; OpenAI's and Cohere's errors in their own shapes (api/embed.h).
// POST /embed_all (TEI) runs the pipeline's EmbedAll and renders each input's token states.
#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "api/embed.h"
#include "server/routes/route_util.h"
#include "server/routes/service.h"

namespace tide::server {
namespace {

std::string NextEmbedId() {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat("tide-embed-", counter.fetch_add(1, std::memory_order_relaxed) + 1);
}

}  // namespace

ResponseSender::ErrorRenderer EmbedErrorRenderer(std::string_view endpoint) {
  if (endpoint == "v1_embeddings") return &api::OpenAiError;
  if (endpoint == "v2_embed") return &api::CohereError;
  return nullptr;
}

void Service::Embed(http::Request request, http::Responder respond) {
  StartInference(std::move(request), std::move(respond), "embed", {}, {},
                 [this](const http::Request& r, ResponseSender s, serving::CallPtr c) {
                   EmbedWork(r, std::move(s), std::move(c), api::EmbedApi::kTei);
                 });
}

void Service::OpenAiEmbeddings(http::Request request, http::Responder respond) {
  StartInference(std::move(request), std::move(respond), "v1_embeddings", {}, {},
                 [this](const http::Request& r, ResponseSender s, serving::CallPtr c) {
                   EmbedWork(r, std::move(s), std::move(c), api::EmbedApi::kOpenAi);
                 });
}

void Service::CohereEmbed(http::Request request, http::Responder respond) {
  StartInference(std::move(request), std::move(respond), "v2_embed", {}, {},
                 [this](const http::Request& r, ResponseSender s, serving::CallPtr c) {
                   EmbedWork(r, std::move(s), std::move(c), api::EmbedApi::kCohere);
                 });
}

void Service::EmbedAll(http::Request request, http::Responder respond) {
  StartInference(std::move(request), std::move(respond), "embed_all", {}, {},
                 [this](const http::Request& r, ResponseSender sender, serving::CallPtr call) {
                   absl::StatusOr<api::EmbedRequest> parsed = api::ParseTeiEmbedAllRequest(r.body, limits_);
                   if (!parsed.ok()) return sender.SendError(parsed.status());
                   auto req = std::make_shared<const api::EmbedRequest>(*std::move(parsed));
                   pipeline_.EmbedAll(call, req, [sender = std::move(sender)](pipeline::EmbedAllAnswer answer) mutable {
                     if (!answer.outcome.status.ok()) return sender.SendFailure(std::move(answer.outcome));
                     absl::StatusOr<std::string> body = api::RenderTeiEmbedAllResponse(answer.states, answer.hidden);
                     if (!body.ok()) {
                       answer.outcome.status = body.status();
                       return sender.SendFailure(std::move(answer.outcome));
                     }
                     sender.SendAnswer(JsonResponse(*std::move(body)), std::move(answer.outcome));
                   });
                 });
}

void Service::EmbedWork(const http::Request& request, ResponseSender sender, serving::CallPtr call,
                        api::EmbedApi api) {
  absl::StatusOr<api::EmbedRequest> parsed = api == api::EmbedApi::kOpenAi   ? api::ParseOpenAiEmbeddingsRequest(request.body, limits_)
                                             : api == api::EmbedApi::kCohere ? api::ParseCohereEmbedRequest(request.body, limits_)
                                                                             : api::ParseTeiEmbedRequest(request.body, limits_);
  if (!parsed.ok()) return sender.SendError(parsed.status());
  auto req = std::make_shared<const api::EmbedRequest>(*std::move(parsed));
  pipeline_.Embed(call, req, [sender = std::move(sender), req](pipeline::EmbedAnswer answer) mutable {
    if (!answer.outcome.status.ok()) return sender.SendFailure(std::move(answer.outcome));
    absl::StatusOr<std::string> body;
    switch (req->api) {
      case api::EmbedApi::kTei:
        body = api::RenderTeiEmbedResponse(req->inputs.size(), answer.vectors, answer.dim);
        break;
      case api::EmbedApi::kOpenAi:
        body = api::RenderOpenAiEmbeddingsResponse(*req, answer.outcome.model, answer.vectors, answer.dim,
                                                   answer.tokens);
        break;
      case api::EmbedApi::kCohere:
        body = api::RenderCohereEmbedResponse(*req, NextEmbedId(), answer.vectors, answer.dim, answer.tokens);
        break;
    }
    if (!body.ok()) {
      answer.outcome.status = body.status();
      return sender.SendFailure(std::move(answer.outcome));
    }
    sender.SendAnswer(JsonResponse(*std::move(body)), std::move(answer.outcome));
  });
}

}  // namespace tide::server
