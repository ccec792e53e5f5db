// tide::grpc_edge::HealthService — grpc.health.v1.Health for Kubernetes gRPC probes,
// grpc_health_probe and gRPC's client-side health checking (which uses Watch).
//
// Contract:
//  - Service names (HealthStatusFor):
//      "" , "readiness" and every service tide serves ("inference.GRPCInferenceService",
//      "tei.v1.Info", "tei.v1.Rerank", ...; kServedServices): SERVING while ServiceCore::Ready()
//      (every model ready, not draining), NOT_SERVING otherwise — /v2/health/ready.
//      "liveness": SERVING whenever the process answers (while models load and while draining
//      too) — /v2/health/live. Kubernetes: `grpc: {port: 8001, service: liveness}` for the
//      livenessProbe, `service: readiness` (or none) for readiness and startup.
//    Check of any other name is NOT_FOUND, as the protocol asks; Watch of one streams
//    SERVICE_UNKNOWN (and never changes: tide's names are fixed).
//  - Watch streams the status at once, then every change: a poller thread samples the core every
//    `watch_poll` while any Watch is open (none otherwise) and writes to each stream whose status
//    changed; a stream whose write is in flight gets only the latest status after it (statuses in
//    between are skipped, as the protocol allows). SIGTERM's drain turns readiness NOT_SERVING
//    within one poll.
//  - Shutdown() (GrpcServer::Shutdown calls it before stopping gRPC): every open Watch gets
//    NOT_SERVING (where it had not) and ends UNAVAILABLE, so open streams do not hold the
//    server's shutdown; new Watch calls end at once. Idempotent; the destructor calls it.
//  - No API key is needed (probes carry none). Thread-safe; Check answers on the gRPC thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>
#include <vector>

#include "health.grpc.pb.h"
#include "pipeline/completion_recorder.h"
#include "serving/service_core.h"

namespace tide::grpc_edge {

using HealthStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

// The services tide's gRPC edge registers (what Check and Watch know besides "", "liveness" and
// "readiness").
inline constexpr std::string_view kServedServices[] = {
    "inference.GRPCInferenceService", "tei.v1.Info", "tei.v1.Rerank", "tei.v1.Tokenize", "tei.v1.Predict",
    "tei.v1.Embed", "grpc.health.v1.Health"};

// The status of `service` for a server whose readiness is `ready`; SERVICE_UNKNOWN for a name
// tide does not know.
HealthStatus HealthStatusFor(std::string_view service, bool ready);

class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  // `recorder` (may be null: nothing recorded) records Check's answers.
  HealthService(serving::ServiceCore* core, const pipeline::CompletionRecorder* recorder,
                std::chrono::milliseconds watch_poll = std::chrono::milliseconds(100))
      : core_(core), recorder_(recorder), watch_poll_(watch_poll) {}
  ~HealthService() override;
  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context, const grpc::health::v1::HealthCheckRequest* request) override;
  void Shutdown();

  class WatchReactor;  // in health_service.cc

 private:
  void Poll();
  void Remove(WatchReactor* watch);
  // The open watches, each with a reference the caller drops (Unref). Requires mu_.
  std::vector<WatchReactor*> Referenced();

  serving::ServiceCore* const core_;
  const pipeline::CompletionRecorder* const recorder_;
  const std::chrono::milliseconds watch_poll_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::set<WatchReactor*> watches_;  // guarded by mu_; each removes itself in OnDone
  bool shut_down_ = false;           // guarded by mu_
  std::thread poller_;               // started with the first Watch
};

}  // namespace tide::grpc_edge
