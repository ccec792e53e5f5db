// tide::grpc_edge::GrpcServerOptions — the settings of the gRPC edge (tide serve's --grpc-* flags).
//
// Contract: plain value type with commented defaults; GrpcServer::Create validates it.
#pragma once

#include "serving/model_repository_controller.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "api/request_limits.h"
#include "server/grpc/connection_gate.h"

namespace tide::tls {
class ServerTlsContext;
}

namespace tide::grpc_edge {

struct GrpcServerOptions {
  std::string host = "127.0.0.1";
  // KServe's and Triton's gRPC port; 0 picks a free one (GrpcServer::port() tells which). `tide
  // serve --grpc-port 0` does not start the edge at all.
  int port = 8001;
  // Largest request message; a larger one is refused RESOURCE_EXHAUSTED by gRPC before it is
  // read into memory. The HTTP edge's --max-body-bytes default.
  int64_t max_message_bytes = 8 * 1024 * 1024;
  // Threads gRPC may use for its own I/O and callbacks. The handlers never block (the work runs on
  // the service core's tokenization workers), so a few are enough.
  int max_threads = 4;
  // Connections (tide serve's --grpc-* connection flags). The cap, the handshake timeout and the
  // descriptor reserve are the ConnectionGate's (connection_gate.h); the rest are gRPC's channel
  // arguments (named after them; the ping ones are Triton's flags too).
  // Open connections; at the cap a new one evicts a closed, handshaking or idle one (that order).
  size_t max_connections = 1024;
  // From accept to the HTTP/2 client preface; a connection that has not sent it is closed.
  std::chrono::milliseconds handshake_timeout{10000};
  // Descriptors kept spare beyond the cap under the open-file limit (the cap is lowered to fit).
  size_t descriptor_reserve = 256;
  // Concurrent calls (HTTP/2 streams) per connection (GRPC_ARG_MAX_CONCURRENT_STREAMS).
  int max_concurrent_streams = 128;
  // A connection without calls this long gets GOAWAY (GRPC_ARG_MAX_CONNECTION_IDLE_MS); 0: never.
  std::chrono::milliseconds max_connection_idle{300000};
  // A connection this old gets GOAWAY (GRPC_ARG_MAX_CONNECTION_AGE_MS, +-10% jitter), and its
  // calls then have max_connection_age_grace to finish (GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS);
  // clients reconnect, which also spreads them over new replicas. 0: never (grace: unlimited).
  std::chrono::milliseconds max_connection_age{3600000};
  std::chrono::milliseconds max_connection_age_grace{60000};
  // Keepalive enforcement: a client ping sooner than this after the previous one, with no data
  // between, is a strike (GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS) ...
  std::chrono::milliseconds http2_min_recv_ping_interval_without_data{300000};
  // ... and after this many strikes the connection gets GOAWAY ENHANCE_YOUR_CALM
  // (GRPC_ARG_HTTP2_MAX_PING_STRIKES; 0: unlimited).
  int http2_max_ping_strikes = 2;
  // Called for each connection evicted, refused or closed at the handshake timeout (on the
  // gate's thread; quick and thread-safe), e.g. to count it in a metric. Empty: not called.
  std::function<void(ConnectionEvent)> on_connection_event;

  // Triton's repository extension (RepositoryIndex / RepositoryModelLoad / RepositoryModelUnload),
  // the same controller the HTTP repository API uses; not owned. Null: the index lists what the
  // model manager serves and load / unload answer UNIMPLEMENTED.
  serving::ModelRepositoryController* repository = nullptr;
  // Serve TLS with the certificate (and client CA: mutual TLS) of this context, the HTTP edge's
  // (tide serve's --tls-* flags); GrpcServer::ReloadTls picks up its reloaded certificate. Null:
  // plaintext.
  std::shared_ptr<tls::ServerTlsContext> tls;
};

}  // namespace tide::grpc_edge
