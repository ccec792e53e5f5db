// tide::grpc_edge::HealthService — grpc.health.v1.Health for Kubernetes gRPC probes and
// grpc_health_probe.
//
// Contract:
//  - Check("") and Check(<a service tide serves>: "inference.GRPCInferenceService", "tei.v1.Info",
//    "tei.v1.Rerank", "tei.v1.Tokenize", "grpc.health.v1.Health") answer SERVING while
//    ServiceCore::Ready() (every model ready, not draining), NOT_SERVING otherwise; any other
//    service name is NOT_FOUND, as the protocol asks. No API key is needed (probes carry none).
//  - Watch is not offered (UNIMPLEMENTED); probes use Check.
//  - Thread-safe; answers on the gRPC thread.
#pragma once

#include "health.grpc.pb.h"
#include "serving/service_core.h"

namespace tide::grpc_edge {

class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  explicit HealthService(serving::ServiceCore* core) : core_(core) {}
  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override;

 private:
  serving::ServiceCore* const core_;
};

}  // namespace tide::grpc_edge
