#include "server/access/access_table.h"

namespace tide::server {

using guard::Access;

std::span<const RouteEntry> RouteTable() {
  static constexpr RouteEntry kRoutes[] = {
      {"POST", "/rerank", Endpoint::kRerank, false, Access::kTenant},
      {"POST", "/v1/rerank", Endpoint::kCohereRerank, false, Access::kTenant},
      {"POST", "/tokenize", Endpoint::kTokenize, false, Access::kTenant},
      {"GET", "/metrics", Endpoint::kMetrics, true, Access::kMonitor},
      {"GET", "/load", Endpoint::kLoad, true, Access::kMonitor},
      {"GET", "/dashboard", Endpoint::kDashboard, false, Access::kMonitor},
      {"GET", "/v2", Endpoint::kServerMetadata, true, Access::kMonitor},
      {"GET", "/v2/health/live", Endpoint::kLive, true, Access::kOpen},
      {"GET", "/v2/health/ready", Endpoint::kReady, true, Access::kOpen},
      {"GET", "/health", Endpoint::kLive, true, Access::kOpen},
      {"GET", "/v2/models/{model}", Endpoint::kModelMetadata, false, Access::kTenant},
      {"GET", "/v2/models/{model}/versions/{version}", Endpoint::kModelMetadata, false, Access::kTenant},
      {"GET", "/v2/models/{model}/ready", Endpoint::kModelReady, false, Access::kMonitor},
      {"GET", "/v2/models/{model}/versions/{version}/ready", Endpoint::kModelReady, false, Access::kMonitor},
      {"GET", "/v2/models/{model}/stats", Endpoint::kModelStats, false, Access::kTenant},
      {"GET", "/v2/models/{model}/versions/{version}/stats", Endpoint::kModelStats, false, Access::kTenant},
      {"POST", "/v2/models/{model}/infer", Endpoint::kInfer, false, Access::kTenant},
      {"POST", "/v2/models/{model}/versions/{version}/infer", Endpoint::kInfer, false, Access::kTenant},
      {"POST", "/v2/repository/index", Endpoint::kRepositoryIndex, false, Access::kAdmin},
      {"POST", "/v2/repository/models/{model}/load", Endpoint::kRepositoryLoad, false, Access::kAdmin},
      {"POST", "/v2/repository/models/{model}/unload", Endpoint::kRepositoryUnload, false, Access::kAdmin},
      // Drop-in compatibility: Cohere v2, TEI's other routes, Triton's config and stats.
      {"POST", "/v2/rerank", Endpoint::kCohereRerankV2, false, Access::kTenant},
      {"POST", "/predict", Endpoint::kPredict, false, Access::kTenant},
      {"POST", "/", Endpoint::kInvocations, false, Access::kTenant},
      {"POST", "/invocations", Endpoint::kInvocations, false, Access::kTenant},
      {"POST", "/decode", Endpoint::kDecode, false, Access::kTenant},
      {"GET", "/info", Endpoint::kInfo, false, Access::kTenant},
      {"GET", "/ping", Endpoint::kPing, true, Access::kOpen},
      {"GET", "/docs", Endpoint::kDocs, false, Access::kOpen},
      {"GET", "/api-doc/openapi.json", Endpoint::kOpenApi, false, Access::kOpen},
      {"GET", "/v2/models/stats", Endpoint::kAllModelStats, false, Access::kTenant},
      {"GET", "/v2/models/{model}/config", Endpoint::kModelConfig, false, Access::kTenant},
      {"GET", "/v2/models/{model}/versions/{version}/config", Endpoint::kModelConfig, false, Access::kTenant},
      {"GET", "/v2/models/{model}/rollout", Endpoint::kRolloutGet, false, Access::kAdmin},
      {"PUT", "/v2/models/{model}/rollout", Endpoint::kRolloutPut, false, Access::kAdmin},
      {"POST", "/v2/models/{model}/rollout/promote", Endpoint::kRolloutPromote, false, Access::kAdmin},
      {"POST", "/v2/models/{model}/rollout/rollback", Endpoint::kRolloutRollback, false, Access::kAdmin},
      // Embedding models: TEI, OpenAI, Cohere v2 (a tenant's, like /rerank).
      {"POST", "/embed", Endpoint::kEmbed, false, Access::kTenant},
      {"POST", "/v1/embeddings", Endpoint::kOpenAiEmbeddings, false, Access::kTenant},
      {"POST", "/v2/embed", Endpoint::kCohereEmbedV2, false, Access::kTenant},
      {"POST", "/embed_all", Endpoint::kEmbedAll, false, Access::kTenant},
  };
  return kRoutes;
}

std::span<const RpcEntry> RpcTable() {
  static constexpr RpcEntry kRpcs[] = {
      // KServe v2 GRPCInferenceService (Triton's), as on HTTP.
      {"/inference.GRPCInferenceService/ServerLive", Access::kOpen},
      {"/inference.GRPCInferenceService/ServerReady", Access::kOpen},
      {"/inference.GRPCInferenceService/ModelReady", Access::kMonitor},
      {"/inference.GRPCInferenceService/ServerMetadata", Access::kMonitor},
      {"/inference.GRPCInferenceService/ModelMetadata", Access::kTenant},
      {"/inference.GRPCInferenceService/ModelInfer", Access::kTenant},
      {"/inference.GRPCInferenceService/ModelStreamInfer", Access::kTenant},
      {"/inference.GRPCInferenceService/ModelConfig", Access::kTenant},
      {"/inference.GRPCInferenceService/ModelStatistics", Access::kTenant},
      {"/inference.GRPCInferenceService/RepositoryIndex", Access::kAdmin},
      {"/inference.GRPCInferenceService/RepositoryModelLoad", Access::kAdmin},
      {"/inference.GRPCInferenceService/RepositoryModelUnload", Access::kAdmin},
      // TEI's tei.v1 (Info agrees with HTTP /info: a tenant's).
      {"/tei.v1.Info/Info", Access::kTenant},
      {"/tei.v1.Embed/Embed", Access::kTenant},
      {"/tei.v1.Embed/EmbedStream", Access::kTenant},
      {"/tei.v1.Embed/EmbedSparse", Access::kTenant},
      {"/tei.v1.Embed/EmbedSparseStream", Access::kTenant},
      {"/tei.v1.Embed/EmbedAll", Access::kTenant},
      {"/tei.v1.Embed/EmbedAllStream", Access::kTenant},
      {"/tei.v1.Predict/Predict", Access::kTenant},
      {"/tei.v1.Predict/PredictPair", Access::kTenant},
      {"/tei.v1.Predict/PredictStream", Access::kTenant},
      {"/tei.v1.Predict/PredictPairStream", Access::kTenant},
      {"/tei.v1.Rerank/Rerank", Access::kTenant},
      {"/tei.v1.Rerank/RerankStream", Access::kTenant},
      {"/tei.v1.Tokenize/Tokenize", Access::kTenant},
      {"/tei.v1.Tokenize/TokenizeStream", Access::kTenant},
      {"/tei.v1.Tokenize/Decode", Access::kTenant},
      {"/tei.v1.Tokenize/DecodeStream", Access::kTenant},
      // Standard health checking (probes).
      {"/grpc.health.v1.Health/Check", Access::kOpen},
      {"/grpc.health.v1.Health/Watch", Access::kOpen},
  };
  return kRpcs;
}

guard::Access RpcAccess(std::string_view full_method) {
  for (const RpcEntry& e : RpcTable()) {
    if (full_method == e.method) return e.access;
  }
  return Access::kUnset;
}

}  // namespace tide::server
