// tide::server access table — the ONE table of tide's API surface: every HTTP route (method,
// pattern, which endpoint answers it, whether the admin listener serves it) and every gRPC method,
// each with the credential it needs (guard::Access: none, monitor, tenant, admin). The HTTP
// Service registers its handlers from RouteTable and checks each request against the entry's
// access before the handler runs; the gRPC services check RpcAccess(<their method>) the same way;
// both through guard::Authorize. The HTTP fuzz target registers its model-free handlers from the
// same table, and tests walk both lists (every route and every method of the generated gRPC
// services must have an entry with a decision), so a new route or RPC cannot be added without one.
//
// Contract: constant data; thread-safe.
#pragma once

#include <span>
#include <string_view>

#include "guard/access.h"

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
  // Triton's model repository extension (admin role; main port).
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
  // Embeddings (embed_routes.cc in server/routes; docs/embeddings.md).
  kEmbed,              // POST /embed (TEI)
  kOpenAiEmbeddings,   // POST /v1/embeddings (OpenAI)
  kCohereEmbedV2,      // POST /v2/embed (Cohere v2)
  kEmbedAll,           // POST /embed_all (TEI: per-token embeddings)
};

struct RouteEntry {
  const char* method;
  const char* pattern;  // http::Router syntax: {model} and {version} are path parameters
  Endpoint endpoint;
  bool admin;  // also served on the admin listener (--admin-port)
  guard::Access access;  // who may call it (guard/access.h)
};

std::span<const RouteEntry> RouteTable();

// A gRPC method by its full name ("/package.Service/Method") and who may call it.
struct RpcEntry {
  const char* method;
  guard::Access access;
};

std::span<const RpcEntry> RpcTable();

// The access of a gRPC method (its full name); kUnset for a method the table does not list (the
// gRPC edge then refuses the call: no decision, no access).
guard::Access RpcAccess(std::string_view full_method);

}  // namespace tide::server
