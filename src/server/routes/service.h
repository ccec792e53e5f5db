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
//  - handler() is the http::Handler to give to the HttpServer; it is thread-safe. On the I/O thread
//    an inference route only admits the request (drain, API key, concurrency, then its estimated
//    bytes against max_inflight_bytes: 413 when it could never fit, 429 + Retry-After when the
//    budget is full) and hands it to the tokenization workers (a bounded pool; 429 when its queue
//    is full; bodies up to 64 KiB take its light lane, which one worker is kept for). A worker checks the deadline and client_gone before and while it parses and
//    tokenizes (504 / dropped), then hands the rows to the model's batcher; the response is
//    written from the instance thread that finished the request's last row. Health, metadata and
//    metrics routes answer on the I/O thread.
//  - Every endpoint refuses more than limits.max_documents rows (rerank texts, Cohere documents,
//    tokenize inputs, a KServe tensor's batch dimension or BYTES elements) with 422 naming the
//    limit, before the rows are materialised.
//  - Every error is a JSON body {"error": ...} with the status from api::HttpStatusFor; 503 and 429
//    carry Retry-After.
//  - SetDraining(true): readiness turns false and new inference requests get 503.
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
#include "api/request_limits.h"
#include "absl/functional/any_invocable.h"
#include "common/version.h"
#include "guard/concurrency_limiter.h"
#include "guard/memory_budget.h"
#include "server/http/router.h"
#include "serving/model_manager.h"
#include "server/routes/repository_routes.h"
#include "server/routes/route_util.h"
#include "serving/scoring.h"
#include "serving/serving_metrics.h"
#include "serving/work_pool.h"

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
  // Bytes the inference requests being parsed, tokenized and scored may hold together, each
  // estimated before parsing as request_memory_factor x body bytes + request_memory_fixed_bytes
  // (the factor covers the worst case bench/memory/factor.sh measured: 18-26x for KServe token
  // tensors of the largest shape, 8x for a 7.5 MB rerank). Full: 429 at once; one request alone
  // over it: 413. 0: unlimited. With the defaults, at most 4 bodies of 8 MiB are worked on at once.
  int64_t max_inflight_bytes = int64_t{1} << 30;
  int64_t request_memory_factor = 32;
  int64_t request_memory_fixed_bytes = int64_t{1} << 20;
  // After the in-flight bytes reached malloc_trim_above_bytes, the release that brings them under
  // an eighth of it returns freed heap to the OS (malloc_trim on a tokenization worker). 0: never.
  int64_t malloc_trim_above_bytes = int64_t{128} << 20;
  // Threads that parse and tokenize inference requests off the HTTP I/O threads (TEI's
  // --tokenization-workers); 0: one per core.
  int tokenization_workers = 0;
  // Requests waiting for a tokenization worker beyond which new ones get 429 at once.
  size_t tokenization_queue = 1024;
  // Triton's repository extension (/v2/repository/...); not owned, must outlive the Service.
  // Null: those paths answer 404.
  const RepositoryRoutes* repository = nullptr;
};

class Service {
 public:
  static absl::StatusOr<std::unique_ptr<Service>> Create(serving::ModelManager* models,
                                                         serving::ServingMetrics* metrics,
                                                         const ServiceOptions& options);
  ~Service();  // stops the tokenization workers first (queued requests are dropped: 500)
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
  // The opening of every inference route: its ResponseSender for `endpoint` (metrics label), then
  // AdmitRequest. nullopt: already answered.
  std::optional<ResponseSender> OpenInference(const http::Request& request, http::Responder respond,
                                              const char* endpoint);

  // The work of an inference route that runs on a tokenization worker. `keep` (the request's
  // memory lease) must live until the response is sent: capture it in the model's callback.
  using Keep = std::shared_ptr<void>;
  using Work = absl::AnyInvocable<void(http::Request, ResponseSender, Keep) &&>;
  // Admits the request by its estimated bytes (413 / 429) and queues `work` on the tokenization
  // workers (429 when their queue is full); the worker first drops a request whose client left
  // and answers 504 to one whose deadline passed while it waited.
  void Offload(http::Request request, ResponseSender sender, Work work);
  // Between a worker's chunks of work: CANCELLED when the client left, DEADLINE_EXCEEDED when the
  // deadline passed.
  static absl::Status StillWanted(const serving::RowTask::Admission& admission, std::string_view stage);
  // Returns freed heap to the OS after a burst (MemoryBudget's on_drained), on a worker.
  void TrimHeap();

  // The rerank path shared by TEI and Cohere: serving::ScoreOrFallback (tokenize, then the model's
  // scores or, breaker open, a fallback's), rendered with `render` (degraded when scores.fallback).
  using RerankRenderer = std::function<absl::StatusOr<std::string>(const serving::RerankScores&)>;
  void ScorePairs(ResponseSender sender, Keep keep, std::shared_ptr<serving::ServedModel> model,
                  const serving::RowTask::Admission& admission, std::string_view query,
                  const std::vector<std::string>& documents, const serving::PairOptions& pair_options,
                  bool raw_scores, RerankRenderer render);
  // The bodies of the inference routes, on a tokenization worker.
  void RerankWork(http::Request request, ResponseSender sender, Keep keep);
  void CohereRerankWork(http::Request request, ResponseSender sender, Keep keep);
  void TokenizeWork(http::Request request, ResponseSender sender, Keep keep);
  void InferWork(http::Request request, std::string model_name, std::string version, ResponseSender sender,
                 Keep keep);

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
  std::unique_ptr<guard::MemoryBudget> budget_;
  std::atomic<bool> trim_pending_{false};
  http::Router router_;
  http::Router admin_router_;
  // Last: destroyed first, so no worker runs while the members above go away.
  std::unique_ptr<serving::WorkPool> pool_;
};

}  // namespace tide::server
