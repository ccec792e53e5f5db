// tide::server::Service — the HTTP API of tide: every route, from the wire format (src/api) to the
// served models (src/serving) and back.
//
//   POST /rerank                                  TEI rerank
//   POST /v1/rerank                               Cohere / Jina rerank
//   POST /tokenize                                TEI tokenize
//   GET  /v2, /v2/health/live, /v2/health/ready   KServe v2 server metadata and health
//   GET  /v2/models/{m}[/versions/{v}][/ready]    KServe v2 model metadata and readiness
//   POST /v2/models/{m}[/versions/{v}]/infer      KServe v2 inference (JSON or binary tensors)
//   GET  /v2/models/{m}[/versions/{v}]/stats      Triton statistics extension
//   GET  /metrics                                 Prometheus text format
//   GET  /load                                    in-flight requests, queued rows/tokens, free capacity (load_report.h)
//   POST /v2/rerank                               Cohere v2 rerank (vLLM)
//   POST /predict, /decode; GET /info, /ping      TEI (tei_routes.cc)
//   POST /, /invocations                          TEI / SageMaker default route: /rerank, or /predict for a classifier
//   GET  /v2/models/stats, /v2/models/{m}[/versions/{v}]/config   Triton: every model's statistics, model configuration
//   GET  /docs, /api-doc/openapi.json             API documentation (api_docs.h, api/openapi.h)
//   POST /v2/repository/...                       Triton's repository extension (repository_routes.h)
//   GET|PUT /v2/models/{m}/rollout[/promote|/rollback]  gray release (rollout_routes.h)
//
// Contract:
//  - The HTTP edge: every inference route turns its request into a CallInfo (route_util's
//    CallInfoFor: Authorization, x-timeout-ms, x-priority), starts the call on the core (which
//    admits it and runs the route's work on a tokenization worker: see serving/service_core.h for
//    the order of the checks and their answers), decodes the body there into an api:: request,
//    hands it to the request pipeline (pipeline/request_pipeline.h, the one the gRPC edge uses)
//    and renders its domain answer; the pipeline's recorder records the completion. Health,
//    metadata and metrics routes answer on the I/O thread.
//  - The Service does not own the core, the models or the metrics; all must outlive it.
//  - handler() is the http::Handler to give to the HttpServer; it is thread-safe.
//  - Every endpoint refuses more than limits.max_documents rows (rerank texts, Cohere documents,
//    tokenize inputs, a KServe tensor's batch dimension or BYTES elements) with 422 naming the
//    limit, before the rows are materialised.
//  - Every error is a JSON body {"error": ..., "error_type": ...} with the status of its error kind
//    (common/error.h); 503 and 429 carry Retry-After, 401 WWW-Authenticate. Every answer produced
//    by a model names it: x-tide-model-version (and KServe's model_version field).
//  - ServiceCore::SetDraining(true): readiness turns false and new inference requests get 503.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "api/cohere_rerank.h"
#include "api/request_limits.h"
#include "api/rerank.h"
#include "absl/functional/any_invocable.h"
#include "guard/access.h"
#include "server/access/access_table.h"
#include "server/http/router.h"
#include "serving/model_manager.h"
#include "server/routes/repository_routes.h"
#include "server/routes/rollout_routes.h"
#include "pipeline/request_pipeline.h"
#include "server/routes/route_util.h"
#include "serving/scoring.h"
#include "serving/serving_metrics.h"
#include "serving/service_core.h"

namespace tide::server {

struct ServiceOptions {
  // Triton's repository extension (/v2/repository/...); not owned, must outlive the Service.
  // Null: those paths answer 404.
  const RepositoryRoutes* repository = nullptr;
  // Gray release (/v2/models/{m}/rollout...); not owned, must outlive the Service. Null: 404.
  const RolloutRoutes* rollout = nullptr;
  // Browser protections (http/browser_checks.h). --allowed-hosts: the Host names served (empty:
  // any; "*" any); a request naming another host gets 403 before anything else (DNS rebinding).
  std::vector<std::string> allowed_hosts;
  // --cors-allow-origin: origins (scheme://host[:port], or "*") whose pages may call the tenant and
  // open routes cross-origin: tide answers their CORS preflight (OPTIONS) and adds
  // Access-Control-Allow-Origin to the answers. Empty: no preflight is answered (OPTIONS: 405) and
  // a state-changing request (any method but GET/HEAD) whose Origin is not the server's own gets
  // 403. Admin routes never accept another origin, whatever this says.
  std::vector<std::string> cors_allow_origins;
};

class Service {
 public:
  // `pipeline` (the one both edges share: request limits, version, completion recorder) must
  // outlive the Service; not owned.
  static absl::StatusOr<std::unique_ptr<Service>> Create(serving::ServiceCore* core,
                                                         const pipeline::RequestPipeline* pipeline,
                                                         const ServiceOptions& options);
  http::Handler* handler() { return &router_; }
  // The routes of the admin listener only: /v2/health/live, /v2/health/ready, /health, /ping, /metrics,
  // /load and /v2 (the same handlers as handler()'s); any other path is 404.
  http::Handler* admin_handler() { return &admin_router_; }

 private:
  Service(serving::ServiceCore* core, const pipeline::RequestPipeline* pipeline, const ServiceOptions& options)
      : core_(core), pipeline_(*pipeline), limits_(pipeline->options().limits), options_(options) {}
  absl::Status AddRoutes();
  // The route's handler behind the edge checks, in this order: the Host allowlist (403), the
  // Origin (403: admin routes and state-changing methods accept only the server's own origin, or
  // for non-admin routes a --cors-allow-origin one), the credential the route table asks for
  // (core's Authorize: 401 / 403), and for admin routes that change state a JSON Content-Type
  // (415), so that a browser must preflight them. A refusal is answered and counted like the
  // route's own errors (metrics label `metric`).
  http::RouteHandler Guarded(const RouteEntry& entry, const char* metric, http::RouteHandler handler,
                             guard::Listener listener);
  absl::Status Refusal(const RouteEntry& entry, const http::Request& request, guard::Listener listener) const;
  // CORS: the preflight answer for `methods` of a path, and the headers added to an answer for a
  // listed origin.
  http::Response Preflight(const http::Request& request, const std::string& methods) const;
  bool CorsAllowed(const RouteEntry& entry, const http::Request& request) const;

  // The work of an inference route, on a tokenization worker, with its admitted call. The
  // request's headers stay where CallInfoFor saw them (it lives on the heap).
  using Work = absl::AnyInvocable<void(const http::Request&, ResponseSender, serving::CallPtr) &&>;
  // The sender of one request's answer, recording its completion (pipeline/completion_recorder.h).
  ResponseSender SenderFor(const http::Request& request, http::Responder respond, const char* endpoint) const;
  // With tracing on, `respond` wrapped so that the answer of an admin route (route `pattern`,
  // tide.endpoint `endpoint`) ends its SERVER span and names it (traceparent, x-trace-id).
  http::Responder TracedAdmin(const http::Request& request, const char* pattern, const char* endpoint,
                              http::Responder respond) const;
  // The opening of every inference route: its ResponseSender for `endpoint` (metrics label), the
  // request's CallInfo (`model` / `version`: the model the path names, if any), then
  // ServiceCore::Start; a refusal is answered here. `from_cache` (may be empty) is offered the
  // admitted call on the I/O thread first (ServiceCore::Start's attempt): true when it answered.
  using CacheAttempt = absl::AnyInvocable<bool(const http::Request&, ResponseSender&, const serving::CallPtr&)>;
  void StartInference(http::Request request, http::Responder respond, const char* endpoint,
                      std::string_view model, std::string_view version, Work work,
                      CacheAttempt from_cache = nullptr);
  // TEI /rerank answered whole from the score cache on the I/O thread (no worker hop), when it can.
  // The request body parsed once: by the cache attempt on the I/O thread when there is one (a
  // request the cache has only in part keeps its parse for the worker), else by the worker.
  using ParsedRerank = std::shared_ptr<std::optional<api::RerankRequest>>;
  bool RerankFromCache(const http::Request& request, ResponseSender& sender, const serving::CallPtr& call,
                       const ParsedRerank& parsed_slot);

  // The bodies of the inference routes, on a tokenization worker: decode, the pipeline, render.
  void RerankWork(const http::Request& request, ResponseSender sender, serving::CallPtr call,
                  const ParsedRerank& parsed_slot = nullptr);
  void CohereRerankWork(const http::Request& request, ResponseSender sender, serving::CallPtr call,
                        api::CohereApiVersion api_version);
  void PredictWork(const http::Request& request, ResponseSender sender, serving::CallPtr call);
  // Embeddings (embed_routes.cc): decode TEI / OpenAI / Cohere, the pipeline's Embed, render.
  void EmbedWork(const http::Request& request, ResponseSender sender, serving::CallPtr call, api::EmbedApi api);
  void DecodeWork(const http::Request& request, ResponseSender sender, serving::CallPtr call);
  void TokenizeWork(const http::Request& request, ResponseSender sender, serving::CallPtr call);
  void InferWork(const http::Request& request, std::string_view model_name, std::string_view version,
                 ResponseSender sender, serving::CallPtr call);

  // Routes (one per endpoint family; see the table above).
  void Rerank(http::Request request, http::Responder respond);
  void CohereRerank(http::Request request, http::Responder respond);
  void CohereRerankV2(http::Request request, http::Responder respond);
  void Predict(http::Request request, http::Responder respond);
  void Embed(http::Request request, http::Responder respond);
  void OpenAiEmbeddings(http::Request request, http::Responder respond);
  void CohereEmbed(http::Request request, http::Responder respond);
  void EmbedAll(http::Request request, http::Responder respond);
  void Invocations(http::Request request, http::Responder respond);
  void Decode(http::Request request, http::Responder respond);
  void Info(http::Request request, http::Responder respond);
  void Ping(http::Request request, http::Responder respond);
  void ModelConfig(http::Request request, const http::PathParams& params, http::Responder respond);
  void AllModelStats(http::Request request, http::Responder respond);
  void Tokenize(http::Request request, http::Responder respond);
  void ServerMetadata(http::Request request, http::Responder respond);
  void Live(http::Request request, http::Responder respond);
  void Ready(http::Request request, http::Responder respond);
  void ModelMetadata(http::Request request, const http::PathParams& params, http::Responder respond);
  void ModelReady(http::Request request, const http::PathParams& params, http::Responder respond);
  void ModelStats(http::Request request, const http::PathParams& params, http::Responder respond);
  void Infer(http::Request request, const http::PathParams& params, http::Responder respond);
  void Metrics(http::Request request, http::Responder respond);
  void Load(http::Request request, http::Responder respond);

  serving::ServiceCore* const core_;  // admission (Start), access (Authorize), readiness, load
  const pipeline::RequestPipeline& pipeline_;
  const api::RequestLimits& limits_;  // the pipeline's: what the routes decode under
  const ServiceOptions options_;
  http::Router router_;
  http::Router admin_router_;
};

}  // namespace tide::server
