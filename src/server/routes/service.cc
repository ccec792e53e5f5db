#include "server/routes/service.h"

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/cohere_rerank.h"
#include "api/kserve_classification.h"
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
#include "serving/fallback.h"
#include "serving/kserve_answers.h"
#include "serving/scoring.h"
#include "serving/tensor_rows.h"
#include "tokenizer/token_text.h"

namespace tide::server {

namespace {

using serving::Clock;
using Steady = std::chrono::steady_clock;

std::string NextRequestId() {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat("tide-", counter.fetch_add(1, std::memory_order_relaxed) + 1);
}

// KServe parameters arrive as bool/int/double/string; timeouts and priorities must be integers.
absl::StatusOr<std::optional<int64_t>> IntParameter(const api::Parameters& params, std::string_view name) {
  auto it = params.find(name);
  if (it == params.end()) return std::optional<int64_t>();
  if (const int64_t* v = std::get_if<int64_t>(&it->second)) return std::optional<int64_t>(*v);
  return errors::InvalidInput(absl::StrCat("parameters.", std::string(name), " must be an integer"));
}

// The KServe answer carrying `result` as the model's output tensor (JSON, or binary when asked);
// `degraded` (a fallback's result) adds "parameters": {"degraded": true}.
absl::StatusOr<http::Response> InferHttpResponse(const serving::ServedModel& model, const api::InferRequest& request,
                                                 serving::InferenceResult result, bool degraded,
                                                 std::optional<int64_t> classification) {
  const int64_t rows = result.rows, labels = result.num_labels;
  api::InferResponse response = serving::InferResponseOf(model, request, std::move(result), degraded);
  if (classification.has_value()) {
    // Triton's classification extension: the top k as "value:index" strings.
    api::Tensor& out = response.outputs.front();
    auto top = api::ClassificationTensor(out.name, std::get<std::vector<float>>(out.data), rows, labels,
                                         *classification, model.loaded()->labels);
    if (!top.ok()) return top.status();
    out = *std::move(top);
  }
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

bool ChangesState(std::string_view method) { return method != "GET" && method != "HEAD"; }

// Headers a page may send and read cross-origin (CORS), for listed origins.
constexpr char kCorsAllowHeaders[] =
    "authorization, content-type, content-encoding, accept-encoding, x-request-id, x-timeout-ms, x-priority, "
    "cache-control, inference-header-content-length";
constexpr char kCorsExposeHeaders[] =
    "x-request-id, x-tide-model-version, x-tide-degraded, x-tide-cache-hits, x-tokenization-time, x-queue-time, "
    "x-inference-time, x-total-time, server-timing, retry-after, inference-header-content-length";

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

ResponseSender Service::SenderFor(const http::Request& request, http::Responder respond, const char* endpoint) const {
  ResponseSender sender(std::move(respond), metrics_, endpoint, request.received_at);
  if (serving::AccessLog* log = core_->access_log(); log != nullptr) {
    sender.set_access_log(log, RequestIdFor(request.header("x-request-id")));
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
        pending->sender.hold(*call);
        std::move(work)(pending->request, std::move(pending->sender), *std::move(call));
      },
      std::move(attempt));
}

absl::StatusOr<std::unique_ptr<Service>> Service::Create(serving::ServiceCore* core, const ServiceOptions& options) {
  if (core == nullptr) return absl::InvalidArgumentError("a service core is required");
  std::unique_ptr<Service> service(new Service(core, options));
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
  auto parsed = api::ParseRerankRequest(request.body, options_.limits);
  if (!parsed.ok()) return false;
  auto model = core_->FindModel(*call);
  if (!model.ok()) return false;
  serving::PairOptions pair_options{
      parsed->truncate, parsed->truncation_direction.value_or((*model)->parameters().truncation_direction),
      std::nullopt};
  pair_options.long_documents = parsed->long_documents.value_or((*model)->parameters().long_documents);
  const std::vector<std::string_view> docs(parsed->texts.begin(), parsed->texts.end());
  auto scores = core_->RerankFromCache(*call, **model, parsed->query, docs, pair_options, parsed->raw_scores);
  if (!scores.has_value()) {  // not whole in the cache: the worker takes this parse over
    parsed_slot->emplace(*std::move(parsed));
    return false;
  }
  sender.hold(call);
  sender.set_model((*model)->name(), (*model)->version());
  if (!scores->ok()) {
    sender.SendError(scores->status());
    return true;
  }
  const Steady::time_point post = Steady::now();
  auto body = api::RenderRerankResponse(*parsed, (*scores)->scores, false);
  if (!body.ok()) {
    sender.SendError(body.status());
    return true;
  }
  http::Response response = JsonResponse(*std::move(body));
  response.headers.emplace_back("x-tide-cache-hits", std::to_string((*scores)->cache_hits));
  sender.SendAnswer(std::move(response), (*scores)->timings, post, nullptr);
  return true;
}

void Service::RerankWork(const http::Request& request, ResponseSender sender, serving::CallPtr call,
                         const ParsedRerank& parsed_slot) {
  const bool kept = parsed_slot != nullptr && parsed_slot->has_value();
  absl::StatusOr<api::RerankRequest> parsed = kept ? absl::StatusOr<api::RerankRequest>(*std::move(*parsed_slot))
                                                   : api::ParseRerankRequest(request.body, options_.limits);
  if (kept) parsed_slot->reset();
  if (!parsed.ok()) return sender.SendError(parsed.status());
  auto model = core_->FindModel(*call);
  if (!model.ok()) return sender.SendError(model.status());
  sender.set_model((*model)->name(), (*model)->version());
  auto req = std::make_shared<api::RerankRequest>(*std::move(parsed));
  // A request without truncation_direction gets the model's (its truncation_direction parameter).
  serving::PairOptions pair_options{
      req->truncate, req->truncation_direction.value_or((*model)->parameters().truncation_direction), std::nullopt};
  pair_options.long_documents = req->long_documents.value_or((*model)->parameters().long_documents);
  ScorePairs(std::move(sender), std::move(call), *model, req->query, req->texts, pair_options, req->raw_scores,
             [req](const serving::RerankScores& s) {
               return api::RenderRerankResponse(*req, s.scores, s.fallback != nullptr);
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
  auto parsed = api::ParseCohereRerankRequest(request.body, options_.limits, api_version);
  if (!parsed.ok()) return sender.SendError(parsed.status());
  auto model = core_->FindModel(*call, parsed->model.value_or(""));
  if (!model.ok()) return sender.SendError(model.status());
  sender.set_model((*model)->name(), (*model)->version());
  auto req = std::make_shared<api::CohereRerankRequest>(*std::move(parsed));
  // Cohere's endpoint always truncates (in the model's truncation_direction); max_tokens_per_doc
  // cuts documents first.
  serving::PairOptions pair_options{true, (*model)->parameters().truncation_direction, req->max_tokens_per_doc};
  pair_options.long_documents = req->long_documents.value_or((*model)->parameters().long_documents);
  ScorePairs(std::move(sender), std::move(call), *model, req->query, req->documents, pair_options,
             /*raw_scores=*/false, [req, name = (*model)->name()](const serving::RerankScores& s) {
               return api::RenderCohereRerankResponse(
                   *req, s.scores, api::CohereRerankResponseInfo{NextRequestId(), name, s.real_tokens, s.fallback != nullptr});
             });
}

void Service::ScorePairs(ResponseSender sender, serving::CallPtr call, std::shared_ptr<serving::ServedModel> model,
                         std::string_view query, const std::vector<std::string>& documents,
                         const serving::PairOptions& pair_options, bool raw_scores, RerankRenderer render) {
  const std::vector<std::string_view> docs(documents.begin(), documents.end());
  core_->Rerank(call, std::move(model), query, docs, pair_options, raw_scores,
                [sender = std::move(sender), render = std::move(render), cached = core_->score_cache() != nullptr](
                    absl::StatusOr<serving::RerankScores> scores) mutable {
                  if (!scores.ok()) return sender.SendError(scores.status());
                  const Steady::time_point post = Steady::now();
                  auto body = render(*scores);
                  if (!body.ok()) return sender.SendError(body.status());
                  http::Response response = JsonResponse(*std::move(body));
                  if (cached) response.headers.emplace_back("x-tide-cache-hits", std::to_string(scores->cache_hits));
                  sender.SendAnswer(std::move(response), scores->timings, post, scores->fallback);
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
  auto parsed = api::ParseTokenizeRequest(request.body, options_.limits);
  if (!parsed.ok()) return sender.SendError(parsed.status());
  auto model = core_->FindModel();
  if (!model.ok()) return sender.SendError(model.status());
  sender.set_model((*model)->name(), (*model)->version());
  const std::vector<serving::TextInput> inputs = TextInputsOf(parsed->inputs);
  std::vector<tokenizer::Encoding> encodings;
  if (absl::Status s = core_->Tokenize(*call, **model, inputs, parsed->add_special_tokens, &encodings); !s.ok()) {
    return sender.SendError(s);
  }
  const tokenizer::Tokenizer& tok = (*model)->tokenizer();
  std::vector<std::vector<api::TokenInfo>> out(encodings.size());
  for (size_t i = 0; i < encodings.size(); ++i) {
    // TEI gives each token the input's own substring and its byte offsets; tide's tokenizers do
    // not track offsets, so the pieces are aligned to the text (tokenizer/token_text.h). A pair's
    // second text starts at its first token of type 1 (BERT); without token types, the alignment
    // runs over the first text only and the rest keep their pieces.
    const tokenizer::Encoding& e = encodings[i];
    std::vector<std::string> pieces(e.ids.size());
    std::vector<bool> special(e.ids.size());
    for (size_t t = 0; t < e.ids.size(); ++t) {
      pieces[t] = tok.IdToToken(e.ids[t]).value_or("");
      special[t] = tok.IsSpecialToken(e.ids[t]);
    }
    size_t second = e.ids.size();
    if (parsed->inputs[i].text_pair.has_value()) {
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
    align(parsed->inputs[i].text, 0, second);
    if (second < e.ids.size()) align(*parsed->inputs[i].text_pair, second, e.ids.size());
    out[i].reserve(e.ids.size());
    for (size_t t = 0; t < e.ids.size(); ++t) {
      api::TokenInfo info;
      info.id = e.ids[t];
      info.special = special[t];
      const std::string_view text = t < second ? std::string_view(parsed->inputs[i].text)
                                               : std::string_view(*parsed->inputs[i].text_pair);
      if (spans[t].has_value()) {
        info.start = spans[t]->first;
        info.stop = spans[t]->second;
        info.text = std::string(text.substr(spans[t]->first, spans[t]->second - spans[t]->first));
      } else {
        info.text = std::move(pieces[t]);
      }
      out[i].push_back(std::move(info));
    }
  }
  sender.Send(JsonResponse(api::RenderTokenizeResponse(out)));
}

// ---- KServe v2: health and metadata ---------------------------------------------------------------

void Service::ServerMetadata(http::Request request, http::Responder respond) {
  ResponseSender sender = SenderFor(request, std::move(respond), "server_metadata");
  api::ServerMetadata md;
  md.version = options_.version;
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
  auto model = models_->Find(params.Get("model"), params.Get("version"));
  if (!model.ok()) return sender.SendError(model.status());
  const serving::ServedModel& m = **model;
  sender.set_model(m.name(), m.version());
  const api::ModelMetadata md = serving::ModelMetadataOf(*models_, m);
  sender.Send(JsonResponse(api::RenderModelMetadata(md)));
}

void Service::ModelReady(http::Request request, const http::PathParams& params, http::Responder respond) {
  ResponseSender sender = SenderFor(request, std::move(respond), "model_ready");
  auto model = models_->Find(params.Get("model"), params.Get("version"));
  if (!model.ok()) return sender.SendError(model.status());
  sender.set_model((*model)->name(), (*model)->version());
  const bool ready = core_->ModelReady(**model);
  const nlohmann::json body = {{"name", (*model)->name()}, {"ready", ready}};
  sender.Send(JsonResponse(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), ready ? 200 : 503));
}

void Service::ModelStats(http::Request request, const http::PathParams& params, http::Responder respond) {
  ResponseSender sender = SenderFor(request, std::move(respond), "model_stats");
  auto model = models_->Find(params.Get("model"), params.Get("version"));
  if (!model.ok()) return sender.SendError(model.status());
  sender.set_model((*model)->name(), (*model)->version());
  sender.Send(JsonResponse(api::RenderModelStatistics({(*model)->Statistics()})));
}

void Service::AllModelStats(http::Request request, http::Responder respond) {
  ResponseSender sender = SenderFor(request, std::move(respond), "model_stats");
  std::vector<api::ModelStatistics> stats;
  for (const auto& model : models_->All()) stats.push_back(model->Statistics());
  sender.Send(JsonResponse(api::RenderModelStatistics(stats)));
}

void Service::ModelConfig(http::Request request, const http::PathParams& params, http::Responder respond) {
  ResponseSender sender = SenderFor(request, std::move(respond), "model_config");
  auto model = models_->Find(params.Get("model"), params.Get("version"));
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
  auto model = core_->FindModel(*call, model_name, version);
  if (!model.ok()) return sender.SendError(model.status());
  sender.set_model((*model)->name(), (*model)->version());
  std::optional<std::string_view> header_length;
  if (std::string_view h = request.header(api::kInferenceHeaderContentLength); !h.empty()) header_length = h;
  // Token tensors hold at most max_documents rows of max_sequence_length tokens.
  api::RequestLimits limits = options_.limits;
  const size_t seq = std::max<size_t>((*model)->max_sequence_length(), 1);
  if (limits.max_documents <= limits.max_batch_tensor_elements / seq) {
    limits.max_batch_tensor_elements = limits.max_documents * seq;
  }
  auto parsed = api::ParseInferRequest(request.body, header_length, limits);
  if (!parsed.ok()) return sender.SendError(parsed.status());
  const ModelSignature& sig = (*model)->signature();
  std::optional<int64_t> classification;
  for (const api::InferRequestedOutput& out : parsed->outputs) {
    if (out.name != sig.logits_name) {
      return sender.SendError(errors::InvalidInput(
          absl::StrCat("unknown output '", EchoForError(out.name), "'; model ", (*model)->name(), " has '", sig.logits_name, "'")));
    }
    auto k = api::ClassificationCount(out.parameters, out.name);
    if (!k.ok()) return sender.SendError(k.status());
    if (k->has_value()) classification = *k;
  }
  auto long_documents = serving::LongDocumentsParameter(parsed->parameters);
  if (!long_documents.ok()) return sender.SendError(long_documents.status());
  auto timeout = IntParameter(parsed->parameters, "timeout");
  if (!timeout.ok()) return sender.SendError(timeout.status());
  auto priority = IntParameter(parsed->parameters, "priority");
  if (!priority.ok()) return sender.SendError(priority.status());
  if (absl::Status s = call->Refine(*timeout, *priority); !s.ok()) return sender.SendError(s);
  if (absl::Status s = call->StillWanted("parsing"); !s.ok()) return sender.SendError(s);

  std::vector<tokenizer::Encoding> rows;
  Clock::duration tokenize{};
  serving::TensorWindows windows;
  if (absl::Status s = serving::RowsFromTensors(**model, *parsed, *long_documents, &rows, &windows, &tokenize);
      !s.ok()) {
    return sender.SendError(s);
  }

  auto req = std::make_shared<api::InferRequest>(*std::move(parsed));
  serving::TensorWindows compared = windows;  // a rollout compares per input (the lambda takes `windows`)
  core_->Infer(call, *model, std::move(rows),
               [sender = std::move(sender), req, m = *model, tokenize, classification,
                windows = std::move(windows)](absl::StatusOr<serving::InferOutcome> outcome) mutable {
                 if (!outcome.ok()) return sender.SendError(outcome.status());
                 serving::FoldWindowRows(windows, &outcome->result);
                 const Steady::time_point post = Steady::now();
                 serving::StageTimings t = outcome->result.timings;
                 const char* fallback = outcome->fallback;
                 auto response = InferHttpResponse(*m, *req, std::move(outcome->result), fallback != nullptr, classification);
                 if (!response.ok()) return sender.SendError(response.status());
                 t.tokenize = tokenize;
                 sender.SendAnswer(*std::move(response), t, post, fallback);
               },
               std::move(compared));
}

// ---- metrics -------------------------------------------------------------------------------------

void Service::Metrics(http::Request request, http::Responder respond) {
  core_->RefreshMetrics();
  http::Response r;
  r.content_type = metrics::kPrometheusTextContentType;
  r.body = metrics_->registry.RenderText();
  std::move(respond)(std::move(r));
}

}  // namespace tide::server
