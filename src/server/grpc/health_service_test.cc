// HealthStatusFor: the service names Kubernetes probes and gRPC clients ask about.
#include "server/grpc/health_service.h"

#include "gtest/gtest.h"

namespace tide::grpc_edge {
namespace {

using grpc::health::v1::HealthCheckResponse;

TEST(HealthStatusFor, ReadinessNamesFollowReadyAndLivenessDoesNot) {
  for (const char* name : {"", "readiness", "inference.GRPCInferenceService", "tei.v1.Rerank", "grpc.health.v1.Health"}) {
    EXPECT_EQ(HealthStatusFor(name, true), HealthCheckResponse::SERVING) << name;
    EXPECT_EQ(HealthStatusFor(name, false), HealthCheckResponse::NOT_SERVING) << name;
  }
  // Liveness: SERVING while loading and draining too (what /v2/health/live answers).
  EXPECT_EQ(HealthStatusFor("liveness", true), HealthCheckResponse::SERVING);
  EXPECT_EQ(HealthStatusFor("liveness", false), HealthCheckResponse::SERVING);
  for (const char* name : {"no.such.Service", "Liveness", "tei.v1", " readiness"}) {
    EXPECT_EQ(HealthStatusFor(name, true), HealthCheckResponse::SERVICE_UNKNOWN) << name;
  }
}

}  // namespace
}  // namespace tide::grpc_edge
