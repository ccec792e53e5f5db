// tide::server route table — every HTTP route of tide (method, pattern, which endpoint answers it,
// whether the admin listener serves it), as data. Service registers its handlers from it, and the
// HTTP fuzz target (fuzz/http_fuzz.cc) registers its model-free handlers from the same table, so
// the two cannot drift apart.
//
// Contract: constant data; thread-safe. Depends on nothing but the standard library.
#pragma once

#include <span>

namespace tide::server {

enum class Endpoint {
  kRerank,          // POST /rerank (TEI)
  kCohereRerank,    // POST /v1/rerank (Cohere / Jina)
  kTokenize,        // POST /tokenize (TEI)
  kMetrics,         // GET /metrics
  kServerMetadata,  // GET /v2
  kLive,            // GET /v2/health/live, /health
  kReady,           // GET /v2/health/ready
  kModelMetadata,   // GET /v2/models/{model}[/versions/{version}]
  kModelReady,      // GET /v2/models/{model}[/versions/{version}]/ready
  kModelStats,      // GET /v2/models/{model}[/versions/{version}]/stats
  kInfer,           // POST /v2/models/{model}[/versions/{version}]/infer
  kLoad,            // GET /load (load report for balancers)
  kDashboard,       // GET /dashboard (live dashboard page)
  // Triton's model repository extension (guarded by --admin-api-key, else --api-key; main port).
  kRepositoryIndex,   // POST /v2/repository/index
  kRepositoryLoad,    // POST /v2/repository/models/{model}/load
  kRepositoryUnload,  // POST /v2/repository/models/{model}/unload
  kCohereRerankV2,  // POST /v2/rerank (Cohere v2, vLLM)
  kPredict,         // POST /predict (TEI sequence classification)
  kInvocations,     // POST /, /invocations (TEI's and SageMaker's default route: rerank or predict)
  kDecode,          // POST /decode (TEI)
  kInfo,            // GET /info (TEI)
  kPing,            // GET /ping (TEI / SageMaker health)
  kDocs,            // GET /docs (API documentation page)
  kOpenApi,         // GET /api-doc/openapi.json (OpenAPI 3 description of every route)
  kModelConfig,     // GET /v2/models/{model}[/versions/{version}]/config (Triton)
  kAllModelStats,   // GET /v2/models/stats (Triton: every model)
  // Gray release per model (rollout_routes.h; admin endpoints, guarded like the repository API).
  kRolloutGet,       // GET /v2/models/{model}/rollout
  kRolloutPut,       // PUT /v2/models/{model}/rollout
  kRolloutPromote,   // POST /v2/models/{model}/rollout/promote
  kRolloutRollback,  // POST /v2/models/{model}/rollout/rollback
};

struct RouteEntry {
  const char* method;
  const char* pattern;  // http::Router syntax: {model} and {version} are path parameters
  Endpoint endpoint;
  bool admin;  // also served on the admin listener
};

std::span<const RouteEntry> RouteTable();

}  // namespace tide::server
