#include "server/routes/route_table.h"

namespace tide::server {

std::span<const RouteEntry> RouteTable() {
  static constexpr RouteEntry kRoutes[] = {
      {"POST", "/rerank", Endpoint::kRerank, false},
      {"POST", "/v1/rerank", Endpoint::kCohereRerank, false},
      {"POST", "/tokenize", Endpoint::kTokenize, false},
      {"GET", "/metrics", Endpoint::kMetrics, true},
      {"GET", "/load", Endpoint::kLoad, true},
      {"GET", "/dashboard", Endpoint::kDashboard, false},
      {"GET", "/v2", Endpoint::kServerMetadata, true},
      {"GET", "/v2/health/live", Endpoint::kLive, true},
      {"GET", "/v2/health/ready", Endpoint::kReady, true},
      {"GET", "/health", Endpoint::kLive, true},
      {"GET", "/v2/models/{model}", Endpoint::kModelMetadata, false},
      {"GET", "/v2/models/{model}/versions/{version}", Endpoint::kModelMetadata, false},
      {"GET", "/v2/models/{model}/ready", Endpoint::kModelReady, false},
      {"GET", "/v2/models/{model}/versions/{version}/ready", Endpoint::kModelReady, false},
      {"GET", "/v2/models/{model}/stats", Endpoint::kModelStats, false},
      {"GET", "/v2/models/{model}/versions/{version}/stats", Endpoint::kModelStats, false},
      {"POST", "/v2/models/{model}/infer", Endpoint::kInfer, false},
      {"POST", "/v2/models/{model}/versions/{version}/infer", Endpoint::kInfer, false},
      {"POST", "/v2/repository/index", Endpoint::kRepositoryIndex, false},
      {"POST", "/v2/repository/models/{model}/load", Endpoint::kRepositoryLoad, false},
      {"POST", "/v2/repository/models/{model}/unload", Endpoint::kRepositoryUnload, false},
      // Drop-in compatibility (issue 16): Cohere v2, TEI's other routes, Triton's config and stats.
      {"POST", "/v2/rerank", Endpoint::kCohereRerankV2, false},
      {"POST", "/predict", Endpoint::kPredict, false},
      {"POST", "/", Endpoint::kInvocations, false},
      {"POST", "/invocations", Endpoint::kInvocations, false},
      {"POST", "/decode", Endpoint::kDecode, false},
      {"GET", "/info", Endpoint::kInfo, false},
      {"GET", "/ping", Endpoint::kPing, true},
      {"GET", "/docs", Endpoint::kDocs, false},
      {"GET", "/api-doc/openapi.json", Endpoint::kOpenApi, false},
      {"GET", "/v2/models/stats", Endpoint::kAllModelStats, false},
      {"GET", "/v2/models/{model}/config", Endpoint::kModelConfig, false},
      {"GET", "/v2/models/{model}/versions/{version}/config", Endpoint::kModelConfig, false},
      {"GET", "/v2/models/{model}/rollout", Endpoint::kRolloutGet, false},
      {"PUT", "/v2/models/{model}/rollout", Endpoint::kRolloutPut, false},
      {"POST", "/v2/models/{model}/rollout/promote", Endpoint::kRolloutPromote, false},
      {"POST", "/v2/models/{model}/rollout/rollback", Endpoint::kRolloutRollback, false},
  };
  return kRoutes;
}

}  // namespace tide::server
