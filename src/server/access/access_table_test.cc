// The one table: every HTTP route and every gRPC method carries a decision (none, monitor, tenant,
// admin); entries are unique; the admin API is admin-only and probes are open. The gRPC side is
// also checked against the generated service descriptors (src/server/grpc/rpc_access_test.cc), and
// both edges apply it in the black-box tests (tests/blackbox/tide_serve_access_test.cc).
#include "server/access/access_table.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace tide::server {
namespace {

using guard::Access;

TEST(AccessTable, EveryRouteHasADecisionAndAppearsOnce) {
  std::set<std::string> seen;
  for (const RouteEntry& e : RouteTable()) {
    const std::string key = std::string(e.method) + " " + e.pattern;
    SCOPED_TRACE(key);
    EXPECT_NE(e.access, Access::kUnset);
    EXPECT_TRUE(seen.insert(key).second) << "listed twice";
    // The admin listener serves nothing that needs a tenant's or an admin's key.
    if (e.admin) EXPECT_TRUE(e.access == Access::kOpen || e.access == Access::kMonitor);
    // The repository and rollout APIs are admin-only; health is open.
    const std::string pattern = e.pattern;
    if (pattern.rfind("/v2/repository/", 0) == 0 || pattern.find("/rollout") != std::string::npos) {
      EXPECT_EQ(e.access, Access::kAdmin);
    }
    if (pattern.find("/health") != std::string::npos) EXPECT_EQ(e.access, Access::kOpen);
  }
}

TEST(AccessTable, EveryRpcHasADecisionAndTheEdgesAgree) {
  std::set<std::string> seen;
  for (const RpcEntry& e : RpcTable()) {
    SCOPED_TRACE(e.method);
    EXPECT_NE(e.access, Access::kUnset);
    EXPECT_TRUE(seen.insert(e.method).second) << "listed twice";
    EXPECT_EQ(RpcAccess(e.method), e.access);
  }
  EXPECT_EQ(RpcAccess("/inference.GRPCInferenceService/NotAMethod"), Access::kUnset);
  // The same question gets the same answer on both edges.
  auto route = [](std::string_view method, std::string_view pattern) {
    for (const RouteEntry& e : RouteTable()) {
      if (e.method == method && e.pattern == pattern) return e.access;
    }
    return Access::kUnset;
  };
  EXPECT_EQ(RpcAccess("/tei.v1.Info/Info"), route("GET", "/info"));
  EXPECT_EQ(RpcAccess("/tei.v1.Rerank/Rerank"), route("POST", "/rerank"));
  EXPECT_EQ(RpcAccess("/inference.GRPCInferenceService/ModelInfer"), route("POST", "/v2/models/{model}/infer"));
  EXPECT_EQ(RpcAccess("/inference.GRPCInferenceService/ModelMetadata"), route("GET", "/v2/models/{model}"));
  EXPECT_EQ(RpcAccess("/inference.GRPCInferenceService/ModelReady"), route("GET", "/v2/models/{model}/ready"));
  EXPECT_EQ(RpcAccess("/inference.GRPCInferenceService/ServerMetadata"), route("GET", "/v2"));
  EXPECT_EQ(RpcAccess("/inference.GRPCInferenceService/ServerReady"), route("GET", "/v2/health/ready"));
  EXPECT_EQ(RpcAccess("/inference.GRPCInferenceService/ModelStatistics"), route("GET", "/v2/models/{model}/stats"));
  EXPECT_EQ(RpcAccess("/inference.GRPCInferenceService/ModelConfig"), route("GET", "/v2/models/{model}/config"));
  EXPECT_EQ(RpcAccess("/inference.GRPCInferenceService/RepositoryIndex"), route("POST", "/v2/repository/index"));
  EXPECT_EQ(RpcAccess("/inference.GRPCInferenceService/RepositoryModelLoad"),
            route("POST", "/v2/repository/models/{model}/load"));
}

}  // namespace
}  // namespace tide::server
