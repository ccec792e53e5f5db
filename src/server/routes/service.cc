#include "server/routes/service.h"

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/cohere_rerank.h"
#include "api/kserve_infer.h"
#include "api/kserve_metadata.h"
#include "api/model_statistics.h"
#include "api/rerank.h"
#include "api/status_http.h"
#include "api/tokenize.h"
#include "common/error.h"
#include "common/error_echo.h"
#include "config/model_config.h"
#include "config/model_config_json.h"
#include "nlohmann/json.hpp"
#include "server/routes/api_docs.h"
#include "server/http/browser_checks.h"
#include "server/routes/dashboard.h"
#include "server/routes/load_report.h"
#include "server/access/access_table.h"
#include "server/routes/route_util.h"
#include "serving/scoring.h"

namespace tide::server {

namespace {


std::string NextRequestId() {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat("tide-", counter.fetch_add(1, std::memory_order_relaxed) + 1);
}

// The KServe answer rendered for `request` (JSON, or binary tensors when asked).
absl::StatusOr<http::Response> InferHttpResponse(const api::InferResponse& response, const api::InferRequest& request) {
  auto rendered = api::RenderInferResponse(response, request);
  if (!rendered.ok()) return rendered.status();
  http::Response http_response = JsonResponse(std::move(rendered->body));
  if (rendered->inference_header_content_length.has_value()) {
    http_response.content_type = "application/octet-stream";
    http_response.headers.emplace_back(std::string(api::kInferenceHeaderContentLength),
                                       std::to_string(*rendered->inference_header_content_length));
  }
  return http_response;
}

// A rerank answer rendered with `render` (the cache-hit header when the core has a cache).
template <typename Render>
void SendRerank(ResponseSender& sender, pipeline::RerankAnswer answer, Render render) {
  if (!answer.outcome.status.ok()) return sender.SendFailure(std::move(answer.outcome));
  auto body = render(answer);
  if (!body.ok()) {
    answer.outcome.status = body.status();
    return sender.SendFailure(std::move(answer.outcome));
  }
  http::Response response = JsonResponse(*std::move(body));
  if (answer.outcome.cache_on) {
    response.headers.emplace_back("x-tide-cache-hits", std::to_string(answer.outcome.cache_hits));
  }
  sender.SendAnswer(std::move(response), std::move(answer.outcome));
}

// The metrics label of an endpoint's answers (the one its handler records with).
const char* MetricName(Endpoint endpoint) {
  switch (endpoint) {
    case Endpoint::kRerank: return "rerank";
    case Endpoint::kCohereRerank: return "v1_rerank";
    case Endpoint::kCohereRerankV2: return "v2_rerank";
    case Endpoint::kTokenize: return "tokenize";
    case Endpoint::kPredict: return "predict";
    case Endpoint::kInvocations: return "invocations";
    case Endpoint::kDecode: return "decode";
    case Endpoint::kInfo: return "info";
    case Endpoint::kPing: return "ping";
    case Endpoint::kServerMetadata: return "server_metadata";
    case Endpoint::kLive: return "health_live";
    case Endpoint::kReady: return "health_ready";
    case Endpoint::kModelMetadata: return "model_metadata";
    case Endpoint::kModelReady: return "model_ready";
    case Endpoint::kModelStats:
    case Endpoint::kAllModelStats: return "model_stats";
    case Endpoint::kModelConfig: return "model_config";
    case Endpoint::kInfer: return "infer";
    case Endpoint::kLoad: return "load";
    case Endpoint::kEmbed: return "embed";
    case Endpoint::kOpenAiEmbeddings: return "v1_embeddings";
    case Endpoint::kCohereEmbedV2: return "v2_embed";
    case Endpoint::kEmbedAll: return "embed_all";
    // Answered without per-request metrics (as the routes themselves answer).
    case Endpoint::kMetrics:
    case Endpoint::kDashboard:
    case Endpoint::kDocs:
    case Endpoint::kOpenApi:
    case Endpoint::kRepositoryIndex:
    case Endpoint::kRepositoryLoad:
    case Endpoint::kRepositoryUnload:
    case Endpoint::kRolloutGet:
    case Endpoint::kRolloutPut:
    case Endpoint::kRolloutPromote:
    case Endpoint::kRolloutRollback: return nullptr;
  }
  return nullptr;
}

// The admin API's routes, which answer without per-request metrics: their name in a trace
// (tide.endpoint); null for the others.
const char* AdminSpanEndpoint(Endpoint endpoint) {
  switch (endpoint) {
    case Endpoint::kRepositoryIndex: return "repository_index";
    case Endpoint::kRepositoryLoad: return "repository_load";
    case Endpoint::kRepositoryUnload: return "repository_unload";
    case Endpoint::kRolloutGet: return "rollout_get";
    case Endpoint::kRolloutPut: return "rollout_put";
    case Endpoint::kRolloutPromote: return "rollout_promote";
    case Endpoint::kRolloutRollback: return "rollout_rollback";
    default: return nullptr;
  }
}

bool ChangesState(std::string_view method) { return method != "GET" && method != "HEAD"; }

// The route pattern (http.route) of a request answered by `endpoint`'s handler: the table's entry
// of that method and metric name (of two, the one with as many path segments); "" when none.
std::string_view RoutePatternOf(const http::Request& request, const char* endpoint) {
  std::string_view found;
  const auto segments = [](std::string_view path) { return std::count(path.begin(), path.end(), '/'); };
  for (const RouteEntry& e : RouteTable()) {
    const char* metric = MetricName(e.endpoint);
    if (metric == nullptr || e.method != request.method || std::string_view(metric) != endpoint) continue;
    if (found.empty() || segments(e.pattern) == segments(request.path)) found = e.pattern;
  }
  return found;
}

// Headers a page may send and read cross-origin (CORS), for listed origins.
constexpr char kCorsAllowHeaders[] =
    "authorization, content-type, content-encoding, accept-encoding, x-request-id, x-timeout-ms, x-priority, "
    "cache-control, inference-header-content-length, traceparent, tracestate";
constexpr char kCorsExposeHeaders[] =
    "x-request-id, x-tide-model-version, x-tide-degraded, x-tide-cache-hits, x-tokenization-time, x-queue-time, "
    "x-inference-time, x-total-time, server-timing, retry-after, inference-header-content-length, traceparent, "
    "x-trace-id";

}  // namespace

absl::Status Service::Refusal(const RouteEntry& entry, const http::Request& request, guard::Listener listener) const {
  if (!http::HostAllowed(request.header("host"), options_.allowed_hosts)) {
    return errors::Forbidden(absl::StrCat("Host '", EchoForError(request.header("host")),
                                          "' is not served here (--allowed-hosts)"));
  }
  const std::string_view origin = request.header("origin");
  const bool admin = entry.access == guard::Access::kAdmin;
  if (!origin.empty() && (admin || ChangesState(request.method)) && !http::SameOrigin(origin, request.header("host"))) {
    const bool listed = !admin && http::OriginListed(origin, options_.cors_allow_origins);
    if (!listed) {
      return errors::Forbidden(absl::StrCat(
          "cross-origin request refused: Origin '", EchoForError(origin), "' is not this server's origin",
          admin ? " (the admin API takes no cross-origin requests)" : " (allow it with --cors-allow-origin)"));
    }
  }
  if (auto who = core_->Authorize(entry.access, request.header("authorization"), listener); !who.ok()) {
    return who.status();
  }
  if (admin && ChangesState(request.method) && !http::IsJsonMediaType(request.header("content-type"))) {
    return errors::UnsupportedMediaType(
        "the admin API takes Content-Type: application/json (an empty body too), so that a web page cannot "
        "send it without a CORS preflight");
  }
  return absl::OkStatus();
}

bool Service::CorsAllowed(const RouteEntry& entry, const http::Request& request) const {
  if (options_.cors_allow_origins.empty() || entry.access == guard::Access::kAdmin) return false;
  const std::string_view origin = request.header("origin");
  return !origin.empty() && http::OriginListed(origin, options_.cors_allow_origins);
}

http::Response Service::Preflight(const http::Request& request, const std::string& methods) const {
  if (!http::HostAllowed(request.header("host"), options_.allowed_hosts)) {
    return ErrorResponse(errors::Forbidden(absl::StrCat("Host '", EchoForError(request.header("host")),
                                                        "' is not served here (--allowed-hosts)")));
  }
  const std::string_view origin = request.header("origin");
  if (origin.empty() || !http::OriginListed(origin, options_.cors_allow_origins)) {
    return ErrorResponse(errors::Forbidden(absl::StrCat("CORS preflight refused: Origin '", EchoForError(origin),
                                                        "' is not listed in --cors-allow-origin")));
  }
  http::Response r;
  r.status = 204;
  r.content_type.clear();
  r.headers.emplace_back("Access-Control-Allow-Origin", std::string(origin));
  r.headers.emplace_back("Access-Control-Allow-Methods", methods);
  r.headers.emplace_back("Access-Control-Allow-Headers", kCorsAllowHeaders);
  r.headers.emplace_back("Access-Control-Max-Age", "600");
  r.headers.emplace_back("Vary", "Origin");
  return r;
}

http::RouteHandler Service::Guarded(const RouteEntry& entry, const char* metric, http::RouteHandler handler,
                                    guard::Listener listener) {
  return [this, &entry, metric, handler = std::move(handler), listener](http::Request request, http::PathParams params,
                                                                        http::Responder respond) {
    // The admin API's answers (refusals too) are SERVER spans like every other route's.
    if (const char* admin = AdminSpanEndpoint(entry.endpoint); admin != nullptr) {
      respond = TracedAdmin(request, entry.pattern, admin, std::move(respond));
    }
    if (absl::Status refused = Refusal(entry, request, listener); !refused.ok()) {
      if (metric == nullptr) return std::move(respond)(ErrorResponse(refused));
      return SenderFor(request, std::move(respond), metric).SendError(refused);
    }
    if (CorsAllowed(entry, request)) {
      respond = http::Responder::FromCallback([origin = std::string(request.header("origin")),
                                               inner = std::move(respond)](http::Response response) mutable {
        response.headers.emplace_back("Access-Control-Allow-Origin", origin);
        response.headers.emplace_back("Access-Control-Expose-Headers", kCorsExposeHeaders);
        response.headers.emplace_back("Vary", "Origin");
        std::move(inner)(std::move(response));
      });
    }
    handler(std::move(request), std::move(params), std::move(respond));
  };
}

http::Responder Service::TracedAdmin(const http::Request& request, const char* pattern, const char* endpoint,
                                     http::Responder respond) const {
  const pipeline::RequestTracing* tracing = pipeline_.recorder().tracing();
  if (tracing == nullptr) return respond;
  auto trace = std::make_shared<pipeline::RequestTrace>(tracing->StartHttp(
      request.method, pattern, request.received_at, request.header("traceparent"), request.header("tracestate")));
  return http::Responder::FromCallback(
      [trace, endpoint, inner = std::move(respond)](http::Response response) mutable {
        response.headers.emplace_back("traceparent", trace->traceparent());
        response.headers.emplace_back("x-trace-id", trace->trace_id());
        trace->EndHttp(endpoint, response.status);
        std::move(inner)(std::move(response));
      });
}

ResponseSender Service::SenderFor(const http::Request& request, http::Responder respond, const char* endpoint) const {
  ResponseSender sender(std::move(respond), &pipeline_.recorder(), endpoint, request.received_at);
  sender.set_error_renderer(EmbedErrorRenderer(endpoint));
  if (pipeline_.recorder().logs()) sender.set_request_id(RequestIdFor(request.header("x-request-id")));
  if (const pipeline::RequestTracing* tracing = pipeline_.recorder().tracing(); tracing != nullptr) {
    sender.set_trace(tracing->StartHttp(request.method, RoutePatternOf(request, endpoint), request.received_at,
                                        request.header("traceparent"), request.header("tracestate")));
  }
  return sender;
}

void Service::StartInference(http::Request request, http::Responder respond, const char* endpoint,
                             std::string_view model, std::string_view version, Work work, CacheAttempt from_cache) {
  // On the heap, so that the views CallInfoFor takes into its headers stay where they are; shared
  // by the work and the attempt (which runs first, on this thread, or not at all).
  struct Pending {
    http::Request request;
    ResponseSender sender;
  };
  ResponseSender sender = SenderFor(request, std::move(respond), endpoint);
  auto pending = std::make_shared<Pending>(Pending{std::move(request), std::move(sender)});
  absl::StatusOr<serving::CallInfo> info = CallInfoFor(pending->request);
  if (!info.ok()) return pending->sender.SendError(info.status());
  pending->sender.trace().Annotate(&*info);
  info->model = model;
  info->model_version = version;
  const serving::CallInfo call_info = *info;
  serving::ServiceCore::Attempt attempt;
  if (from_cache) {
    attempt = [pending, from_cache = std::move(from_cache)](const serving::CallPtr& call) mutable {
      return from_cache(pending->request, pending->sender, call);
    };
  }
  core_->Start(
      call_info,
      [pending, work = std::move(work)](absl::StatusOr<serving::CallPtr> call) mutable {
        if (!call.ok()) return pending->sender.SendError(call.status());
        pending->sender.trace().MarkAdmitted();
        pending->sender.hold(*call);
        std::move(work)(pending->request, std::move(pending->sender), *std::move(call));
      },
      std::move(attempt));
}

absl::StatusOr<std::unique_ptr<Service>> Service::Create(serving::ServiceCore* core,
                                                         const pipeline::RequestPipeline* pipeline,
                                                         const ServiceOptions& options) {
  if (core == nullptr) return absl::InvalidArgumentError("a service core is required");
  if (pipeline == nullptr) return absl::InvalidArgumentError("a request pipeline is required");
  std::unique_ptr<Service> service(new Service(core, pipeline, options));
  if (absl::Status s = service->AddRoutes(); !s.ok()) return s;
  return service;
}

absl::Status Service::AddRoutes() {
  auto plain = [this](void (Service::*fn)(http::Request, http::Responder)) {
    return [this, fn](http::Request r, http::PathParams, http::Responder respond) {
      (this->*fn)(std::move(r), std::move(respond));
    };
  };
  auto with_params = [this](void (Service::*fn)(http::Request, const http::PathParams&, http::Responder)) {
    return [this, fn](http::Request r, http::PathParams p, http::Responder respond) {
      (this->*fn)(std::move(r), p, std::move(respond));
    };
  };
  auto handler = [&](Endpoint endpoint) -> http::RouteHandler {
    switch (endpoint) {
      case Endpoint::kRerank: return plain(&Service::Rerank);
      case Endpoint::kCohereRerank: return plain(&Service::CohereRerank);
      case Endpoint::kTokenize: return plain(&Service::Tokenize);
      case Endpoint::kMetrics: return plain(&Service::Metrics);
      case Endpoint::kServerMetadata: return plain(&Service::ServerMetadata);
      case Endpoint::kLive: return plain(&Service::Live);
      case Endpoint::kReady: return plain(&Service::Ready);
      case Endpoint::kModelMetadata: return with_params(&Service::ModelMetadata);
      case Endpoint::kModelReady: return with_params(&Service::ModelReady);
      case Endpoint::kModelStats: return with_params(&Service::ModelStats);
      case Endpoint::kInfer: return with_params(&Service::Infer);
      case Endpoint::kLoad: return plain(&Service::Load);
      case Endpoint::kRepositoryIndex:
      case Endpoint::kRepositoryLoad:
      case Endpoint::kRepositoryUnload: return RepositoryRouteHandler(options_.repository, endpoint);
      case Endpoint::kRolloutGet:
      case Endpoint::kRolloutPut:
      case Endpoint::kRolloutPromote:
      case Endpoint::kRolloutRollback: return RolloutRouteHandler(options_.rollout, endpoint);
      case Endpoint::kDashboard:
        return [](http::Request, http::PathParams, http::Responder respond) {
          std::move(respond)(DashboardResponse());
        };
      case Endpoint::kCohereRerankV2: return plain(&Service::CohereRerankV2);
      case Endpoint::kPredict: return plain(&Service::Predict);
      case Endpoint::kInvocations: return plain(&Service::Invocations);
      case Endpoint::kDecode: return plain(&Service::Decode);
      case Endpoint::kInfo: return plain(&Service::Info);
      case Endpoint::kPing: return plain(&Service::Ping);
      case Endpoint::kDocs:
        return [](http::Request, http::PathParams, http::Responder respond) { std::move(respond)(DocsResponse()); };
      case Endpoint::kOpenApi:
        return [](http::Request, http::PathParams, http::Responder respond) { std::move(respond)(OpenApiResponse()); };
      case Endpoint::kModelConfig: return with_params(&Service::ModelConfig);
      case Endpoint::kAllModelStats: return plain(&Service::AllModelStats);
      case Endpoint::kEmbed: return plain(&Service::Embed);
      case Endpoint::kOpenAiEmbeddings: return plain(&Service::OpenAiEmbeddings);
      case Endpoint::kCohereEmbedV2: return plain(&Service::CohereEmbed);
      case Endpoint::kEmbedAll: return plain(&Service::EmbedAll);
    }
    return nullptr;
  };
  // Every route behind the checks of its table entry; the admin listener's with its own listener
  // (monitor routes open there).
  std::vector<std::pair<std::string, std::string>> cors_methods;  // pattern -> "GET, POST" (non-admin)
  for (const RouteEntry& e : RouteTable()) {
    if (e.access == guard::Access::kUnset) {
      return absl::InternalError(absl::StrCat("route ", e.method, " ", e.pattern, " has no access decision"));
    }
    const char* metric = MetricName(e.endpoint);
    if (absl::Status s = router_.Add(e.method, e.pattern, Guarded(e, metric, handler(e.endpoint), guard::Listener::kMain));
        !s.ok()) {
      return s;
    }
    if (e.access != guard::Access::kAdmin) {
      auto it = std::find_if(cors_methods.begin(), cors_methods.end(), [&](const auto& p) { return p.first == e.pattern; });
      if (it == cors_methods.end()) {
        cors_methods.emplace_back(e.pattern, e.method);
      } else {
        it->second += absl::StrCat(", ", e.method);
      }
    }
    if (!e.admin) continue;
    if (absl::Status s =
            admin_router_.Add(e.method, e.pattern, Guarded(e, metric, handler(e.endpoint), guard::Listener::kAdminPort));
        !s.ok()) {
      return s;
    }
  }
  // CORS preflights only when origins are listed (otherwise OPTIONS is 405 like any other method).
  if (!options_.cors_allow_origins.empty()) {
    for (const auto& [pattern, methods] : cors_methods) {
      if (absl::Status s = router_.Add("OPTIONS", pattern,
                                       [this, methods = methods](http::Request r, http::PathParams, http::Responder respond) {
                                         std::move(respond)(Preflight(r, methods));
                                       });
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

// ---- rerank ------------------------------------------------------------------------------------

void Service::Rerank(http::Request request, http::Responder respond) {
  // The attempt runs (on the I/O thread) before the work (on a worker), never beside it.
  auto parsed_slot = std::make_shared<std::optional<api::RerankRequest>>();
  StartInference(
      std::move(request), std::move(respond), "rerank", {}, {},
      [this, parsed_slot](const http::Request& r, ResponseSender s, serving::CallPtr c) {
        RerankWork(r, std::move(s), std::move(c), parsed_slot);
      },
      [this, parsed_slot](const http::Request& r, ResponseSender& s, const serving::CallPtr& c) {
        return RerankFromCache(r, s, c, parsed_slot);
      });
}

bool Service::RerankFromCache(const http::Request& request, ResponseSender& sender, const serving::CallPtr& call,
                              const ParsedRerank& parsed_slot) {
  // Anything unusual (a bad body, an unknown model) is left to the worker, which answers it.
  auto parsed = api::ParseRerankRequest(request.body, limits_);
  if (!parsed.ok()) return false;
  std::optional<pipeline::RerankAnswer> answer = pipeline_.RerankFromCache(call, *parsed);
  if (!answer.has_value()) {  // not whole in the cache: the worker takes this parse over
    parsed_slot->emplace(*std::move(parsed));
    return false;
  }
  sender.trace().MarkAdmitted();
  sender.hold(call);
  SendRerank(sender, *std::move(answer), [&](const pipeline::RerankAnswer& a) {
    return api::RenderRerankResponse(*parsed, a.scores, false);
  });
  return true;
}

void Service::RerankWork(const http::Request& request, ResponseSender sender, serving::CallPtr call,
                         const ParsedRerank& parsed_slot) {
  const bool kept = parsed_slot != nullptr && parsed_slot->has_value();
  absl::StatusOr<api::RerankRequest> parsed = kept ? absl::StatusOr<api::RerankRequest>(*std::move(*parsed_slot))
                                                   : api::ParseRerankRequest(request.body, limits_);
  if (kept) parsed_slot->reset();
  if (!parsed.ok()) return sender.SendError(parsed.status());
  auto req = std::make_shared<const api::RerankRequest>(*std::move(parsed));
  pipeline_.Rerank(call, req, [sender = std::move(sender), req](pipeline::RerankAnswer answer) mutable {
    SendRerank(sender, std::move(answer), [&](const pipeline::RerankAnswer& a) {
      return api::RenderRerankResponse(*req, a.scores, a.outcome.fallback != nullptr);
    });
  });
}

void Service::CohereRerank(http::Request request, http::Responder respond) {
  StartInference(std::move(request), std::move(respond), "v1_rerank", {}, {},
                 [this](const http::Request& r, ResponseSender s, serving::CallPtr c) {
                   CohereRerankWork(r, std::move(s), std::move(c), api::CohereApiVersion::kV1);
                 });
}

void Service::CohereRerankV2(http::Request request, http::Responder respond) {
  StartInference(std::move(request), std::move(respond), "v2_rerank", {}, {},
                 [this](const http::Request& r, ResponseSender s, serving::CallPtr c) {
                   CohereRerankWork(r, std::move(s), std::move(c), api::CohereApiVersion::kV2);
                 });
}

void Service::CohereRerankWork(const http::Request& request, ResponseSender sender, serving::CallPtr call,
                               api::CohereApiVersion api_version) {
  auto parsed = api::ParseCohereRerankRequest(request.body, limits_, api_version);
  if (!parsed.ok()) return sender.SendError(parsed.status());
  auto req = std::make_shared<const api::CohereRerankRequest>(*std::move(parsed));
  pipeline_.CohereRerank(call, req, [sender = std::move(sender), req](pipeline::RerankAnswer answer) mutable {
    SendRerank(sender, std::move(answer), [&](const pipeline::RerankAnswer& a) {
      return api::RenderCohereRerankResponse(
          *req, a.scores,
          api::CohereRerankResponseInfo{NextRequestId(), a.outcome.model, a.real_tokens, a.outcome.fallback != nullptr});
    });
  });
}

// ---- tokenize ----------------------------------------------------------------------------------

void Service::Tokenize(http::Request request, http::Responder respond) {
  StartInference(std::move(request), std::move(respond), "tokenize", {}, {},
                 [this](const http::Request& r, ResponseSender s, serving::CallPtr c) {
                   TokenizeWork(r, std::move(s), std::move(c));
                 });
}

void Service::TokenizeWork(const http::Request& request, ResponseSender sender, serving::CallPtr call) {
  auto parsed = api::ParseTokenizeRequest(request.body, limits_);
  if (!parsed.ok()) return sender.SendError(parsed.status());
  pipeline::TokenizeAnswer answer = pipeline_.Tokenize(*call, *parsed);
  if (!answer.outcome.status.ok()) return sender.SendFailure(std::move(answer.outcome));
  sender.SendAnswer(JsonResponse(api::RenderTokenizeResponse(answer.tokens)), std::move(answer.outcome));
}

// ---- KServe v2: health and metadata ---------------------------------------------------------------

void Service::ServerMetadata(http::Request request, http::Responder respond) {
  ResponseSender sender = SenderFor(request, std::move(respond), "server_metadata");
  api::ServerMetadata md;
  md.version = pipeline_.options().version;
  md.extensions = {"binary_tensor_data", "classification", "model_configuration", "model_repository", "statistics"};
  sender.Send(JsonResponse(api::RenderServerMetadata(md)));
}

void Service::Live(http::Request request, http::Responder respond) {
  ResponseSender sender = SenderFor(request, std::move(respond), "health_live");
  sender.Send(JsonResponse(R"({"live":true})"));
}

void Service::Ready(http::Request request, http::Responder respond) {
  ResponseSender sender = SenderFor(request, std::move(respond), "health_ready");
  const bool ready = core_->Ready();
  sender.Send(JsonResponse(ready ? R"({"ready":true})" : R"({"ready":false})", ready ? 200 : 503));
}

void Service::Load(http::Request request, http::Responder respond) {
  ResponseSender sender = SenderFor(request, std::move(respond), "load");
  const serving::ServiceCore::Load load = core_->CurrentLoad();
  sender.Send(JsonResponse(
      RenderLoadJson(MakeLoadReport(load.ready, load.in_flight, load.max_concurrent_requests, load.queues))));
}

void Service::ModelMetadata(http::Request request, const http::PathParams& params, http::Responder respond) {
  ResponseSender sender = SenderFor(request, std::move(respond), "model_metadata");
  auto model = pipeline_.Model(params.Get("model"), params.Get("version"));
  if (!model.ok()) return sender.SendError(model.status());
  const serving::ServedModel& m = **model;
  sender.set_model(m.name(), m.version());
  const api::ModelMetadata md = pipeline_.Metadata(m);
  sender.Send(JsonResponse(api::RenderModelMetadata(md)));
}

void Service::ModelReady(http::Request request, const http::PathParams& params, http::Responder respond) {
  ResponseSender sender = SenderFor(request, std::move(respond), "model_ready");
  auto model = pipeline_.Model(params.Get("model"), params.Get("version"));
  if (!model.ok()) return sender.SendError(model.status());
  sender.set_model((*model)->name(), (*model)->version());
  const bool ready = core_->ModelReady(**model);
  const nlohmann::json body = {{"name", (*model)->name()}, {"ready", ready}};
  sender.Send(JsonResponse(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), ready ? 200 : 503));
}

void Service::ModelStats(http::Request request, const http::PathParams& params, http::Responder respond) {
  ResponseSender sender = SenderFor(request, std::move(respond), "model_stats");
  auto model = pipeline_.Model(params.Get("model"), params.Get("version"));
  if (!model.ok()) return sender.SendError(model.status());
  sender.set_model((*model)->name(), (*model)->version());
  sender.Send(JsonResponse(api::RenderModelStatistics({(*model)->Statistics()})));
}

void Service::AllModelStats(http::Request request, http::Responder respond) {
  ResponseSender sender = SenderFor(request, std::move(respond), "model_stats");
  std::vector<api::ModelStatistics> stats;
  for (const auto& model : pipeline_.AllModels()) stats.push_back(model->Statistics());
  sender.Send(JsonResponse(api::RenderModelStatistics(stats)));
}

void Service::ModelConfig(http::Request request, const http::PathParams& params, http::Responder respond) {
  ResponseSender sender = SenderFor(request, std::move(respond), "model_config");
  auto model = pipeline_.Model(params.Get("model"), params.Get("version"));
  if (!model.ok()) return sender.SendError(model.status());
  sender.set_model((*model)->name(), (*model)->version());
  sender.Send(JsonResponse(config::ModelConfigJson((*model)->config())));
}

// ---- KServe v2: inference ---------------------------------------------------------------------------

void Service::Infer(http::Request request, const http::PathParams& params, http::Responder respond) {
  std::string model(params.Get("model"));
  std::string version(params.Get("version"));
  StartInference(std::move(request), std::move(respond), "infer", model, version,
                 [this, model, version](const http::Request& r, ResponseSender s, serving::CallPtr c) {
                   InferWork(r, model, version, std::move(s), std::move(c));
                 });
}

void Service::InferWork(const http::Request& request, std::string_view model_name, std::string_view version,
                        ResponseSender sender, serving::CallPtr call) {
  std::optional<std::string_view> header_length;
  if (std::string_view h = request.header(api::kInferenceHeaderContentLength); !h.empty()) header_length = h;
  pipeline_.Infer(
      call, model_name, version,
      [&request, header_length](const api::RequestLimits& limits) {
        return api::ParseInferRequest(request.body, header_length, limits);
      },
      [sender = std::move(sender)](pipeline::InferAnswer answer) mutable {
        if (!answer.outcome.status.ok()) return sender.SendFailure(std::move(answer.outcome));
        auto response = InferHttpResponse(answer.response, *answer.request);
        if (!response.ok()) {
          answer.outcome.status = response.status();
          return sender.SendFailure(std::move(answer.outcome));
        }
        sender.SendAnswer(*std::move(response), std::move(answer.outcome));
      });
}

// ---- metrics -------------------------------------------------------------------------------------

void Service::Metrics(http::Request request, http::Responder respond) {
  http::Response r;
  // OpenMetrics (with exemplars) for a scraper that asks for it; Prometheus text otherwise.
  const bool openmetrics = metrics::AcceptsOpenMetrics(request.header("accept"));
  r.content_type = openmetrics ? metrics::kOpenMetricsContentType : metrics::kPrometheusTextContentType;
  r.body = pipeline_.MetricsText(openmetrics);
  std::move(respond)(std::move(r));
}

}  // namespace tide::server
