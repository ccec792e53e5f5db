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
//
// Contract:
//  - The Service does not own the models or the metrics; both must outlive it.
//  - handler() is the http::Handler to give to the HttpServer; it is thread-safe. Each route parses
//    on the I/O thread, tokenizes there, and hands the rows to the model's batcher; the response is
//    written from the instance thread that finished the request's last row.
//  - Every error is a JSON body {"error": ...} with the status from api::HttpStatusFor; 503 and 429
//    carry Retry-After.
//  - SetDraining(true): readiness turns false and new inference requests get 503.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "api/request_limits.h"
#include "common/version.h"
#include "guard/concurrency_limiter.h"
#include "server/http/router.h"
#include "serving/model_manager.h"
#include "server/routes/route_util.h"
#include "serving/scoring.h"
#include "serving/serving_metrics.h"

namespace tide::server {

struct ServiceOptions {
  api::RequestLimits limits;
  // Deadline of a request that names none (x-timeout-ms header, KServe "timeout" parameter);
  // zero: none. A request's own timeout may only shorten it.
  std::chrono::milliseconds default_timeout{0};
  std::string version{Version()};
  // Bearer key required on the inference endpoints (rerank, v1/rerank, tokenize, infer) and on
  // model metadata and statistics (/v2/models/{m}[/versions/{v}][/stats]); empty: none. Compared
  // in constant time. Open without it: health (/health, /v2/health/*), server metadata (/v2),
  // /metrics and model readiness (/v2/models/{m}[/versions/{v}]/ready) — probes and scrapers.
  std::string api_key;
  // Inference requests in flight beyond which new ones get 429 at once (TEI's
  // max_concurrent_requests); 0: unlimited.
  int64_t max_concurrent_requests = 0;
};

class Service {
 public:
  static absl::StatusOr<std::unique_ptr<Service>> Create(serving::ModelManager* models,
                                                         serving::ServingMetrics* metrics,
                                                         const ServiceOptions& options);
  http::Handler* handler() { return &router_; }
  // The routes of the admin listener only: /v2/health/live, /v2/health/ready, /health, /metrics,
  // /load and /v2 (the same handlers as handler()'s); any other path is 404.
  http::Handler* admin_handler() { return &admin_router_; }
  void SetDraining(bool draining) { draining_.store(draining); }
  bool draining() const { return draining_.load(); }

 private:
  Service(serving::ModelManager* models, serving::ServingMetrics* metrics, const ServiceOptions& options)
      : models_(models), metrics_(metrics), options_(options) {}
  absl::Status AddRoutes();
  // The edge checks of every inference endpoint, before any parsing: draining (503), API key
  // (401), concurrency limit (429, the permit then travels with `sender`). False: answered.
  bool AdmitRequest(const http::Request& request, ResponseSender* sender);

  // The rerank path shared by TEI and Cohere: tokenize the pairs, answer from BM25 while the model's
  // breaker is open, else score them in the batcher and render the scores with `render`
  // (scores[i] belongs to documents[i]; the second argument is the tokens the model ran).
  using RerankRenderer = std::function<absl::StatusOr<std::string>(std::span<const float>, size_t)>;
  void ScorePairs(ResponseSender sender, std::shared_ptr<serving::ServedModel> model,
                  const serving::RowTask::Admission& admission, std::string_view query,
                  const std::vector<std::string>& documents, const serving::PairOptions& pair_options,
                  bool raw_scores, bool tei_array, RerankRenderer render);

  // Routes (one per endpoint family; see the table above).
  void Rerank(http::Request request, http::Responder respond);
  void CohereRerank(http::Request request, http::Responder respond);
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

  serving::ModelManager* const models_;
  serving::ServingMetrics* const metrics_;
  const ServiceOptions options_;
  std::atomic<bool> draining_{false};
  guard::ConcurrencyLimiter limiter_{options_.max_concurrent_requests};
  http::Router router_;
  http::Router admin_router_;
};

}  // namespace tide::server
