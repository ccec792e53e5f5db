// tide::grpc_edge::GrpcServer — tide's gRPC listener: KServe v2 GRPCInferenceService (with
// Triton's extensions), TEI's tei.v1 Info / Rerank / Tokenize and grpc.health.v1 on one port, all
// over one serving::ServiceCore (the one the HTTP edge uses).
//
// Contract:
//  - Create binds host:port (port 0: a free one; port() tells which) and starts serving, or fails
//    with UNAVAILABLE naming the address (e.g. the port is taken) / INVALID_ARGUMENT for options
//    out of range. Messages over max_message_bytes are refused RESOURCE_EXHAUSTED by gRPC.
//  - Connections: tide accepts them (ConnectionGate: the cap with eviction, the handshake timeout,
//    the descriptor reserve) and hands each to gRPC as a plaintext channel; gRPC applies the
//    per-connection limits (concurrent streams, max idle, max age + grace, keepalive
//    enforcement). A server interceptor tells the gate which connections have calls in flight,
//    so those are never evicted. The handoff is gRPC's ExternalConnectionAcceptor: gRPC runs its
//    usual handshake for the server's credentials (TLS too) and reports the client's address as
//    the peer.
//  - gRPC's callback API: handlers run on gRPC's threads (at most options.max_threads for its
//    resource quota) and never block; the work runs on the core's tokenization workers and
//    answers from the instance thread, as on the HTTP edge.
//  - Shutdown(deadline): no new calls; calls in flight may finish until `deadline`, then are
//    cancelled; returns when every call is done. Measured: an idle client connection holds gRPC's
//    shutdown for ~5 s (until its deadline if sooner), so callers wait for calls in flight first
//    (ServiceCore's in-flight count) and give this a short deadline. Call ServiceCore::SetDraining(true) first so that
//    health answers NOT_SERVING and new inference calls UNAVAILABLE. Idempotent; the destructor
//    shuts down at once if it was not.
//  - TLS (options.tls): gRPC's own TLS stack serves the PEMs of options.tls->current_pem(), which
//    Create copies into a private folder (mode 0700, removed by the destructor) watched by gRPC's
//    FileWatcherCertificateProvider. ReloadTls() rewrites that copy from the context's current
//    (already validated) PEMs, so after the caller's successful ServerTlsContext::Reload, new gRPC
//    handshakes use the new certificate within kTlsRefreshSeconds while established HTTP/2
//    connections keep theirs. With a client CA, a client must present a certificate it signed.
//  - The core (and what it uses) must outlive the server.
#pragma once

#include <chrono>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pipeline/request_pipeline.h"
#include "server/grpc/grpc_options.h"
#include "serving/service_core.h"

namespace grpc {
class Server;
namespace experimental {
class ExternalConnectionAcceptor;
}
}

namespace tide::grpc_edge {

class KServeService;
class TeiInfoService;
class TeiRerankService;
class TeiTokenizeService;
class TeiPredictService;
class TeiEmbedService;
class HealthService;
class ConnectionGate;

// How often gRPC's certificate provider looks at the copy ReloadTls writes.
inline constexpr unsigned kTlsRefreshSeconds = 1;

class GrpcServer {
 public:
  // `pipeline`: the request path the HTTP edge uses too (its request limits, version and
  // completion recorder); not owned, must outlive the server.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Create(serving::ServiceCore* core,
                                                            const pipeline::RequestPipeline* pipeline,
                                                            const GrpcServerOptions& options);
  ~GrpcServer();

  int port() const { return port_; }
  // Open connections and the cap in force (lowered to fit the open-file limit).
  size_t open_connections() const;
  size_t max_connections() const;
  // See the contract (TLS). No-op without TLS; INTERNAL when the copy cannot be written.
  absl::Status ReloadTls();
  void Shutdown(std::chrono::steady_clock::time_point deadline);

 private:
  GrpcServer() = default;

  int port_ = 0;
  std::shared_ptr<tls::ServerTlsContext> tls_;
  std::string tls_dir_;  // the watched copy of the PEMs; "" without TLS
  bool shut_down_ = false;
  std::unique_ptr<KServeService> kserve_;
  std::unique_ptr<TeiInfoService> info_;
  std::unique_ptr<TeiRerankService> rerank_;
  std::unique_ptr<TeiTokenizeService> tokenize_;
  std::unique_ptr<TeiPredictService> predict_;
  std::unique_ptr<TeiEmbedService> embed_;
  std::unique_ptr<HealthService> health_;
  std::unique_ptr<ConnectionGate> gate_;  // its interceptor runs inside server_'s calls
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor_;  // the gate's handoff
  std::unique_ptr<grpc::Server> server_;  // last: destroyed first
};

}  // namespace tide::grpc_edge
