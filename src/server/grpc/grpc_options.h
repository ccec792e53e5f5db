// tide::grpc_edge::GrpcServerOptions — the settings of the gRPC edge (tide serve's --grpc-* flags).
//
// Contract: plain value type with commented defaults; GrpcServer::Create validates it.
#pragma once

#include "serving/model_repository_controller.h"

#include <cstdint>
#include <memory>
#include <string>

#include "api/request_limits.h"
#include "common/version.h"

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
  // The same request limits as the HTTP edge (--max-documents, --max-text-bytes).
  api::RequestLimits limits;
  std::string version{Version()};
  // What tei.v1 Info reports as max_batch_tokens (the models' --max-batch-tokens).
  int64_t max_batch_tokens = 0;
  // Triton's repository extension (RepositoryIndex / RepositoryModelLoad / RepositoryModelUnload),
  // the same controller the HTTP repository API uses; not owned. Null: the index lists what the
  // model manager serves and load / unload answer UNIMPLEMENTED.
  serving::ModelRepositoryController* repository = nullptr;
  // Bearer key the repository RPCs require (tide serve: --admin-api-key, else --api-key); empty:
  // none.
  std::string admin_api_key;
  // Serve TLS with the certificate (and client CA: mutual TLS) of this context, the HTTP edge's
  // (tide serve's --tls-* flags); GrpcServer::ReloadTls picks up its reloaded certificate. Null:
  // plaintext.
  std::shared_ptr<tls::ServerTlsContext> tls;
};

}  // namespace tide::grpc_edge
