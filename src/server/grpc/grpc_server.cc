#include "server/grpc/grpc_server.h"

#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "server/grpc/health_service.h"
#include "server/grpc/kserve_service.h"
#include "server/grpc/tei_service.h"

namespace tide::grpc_edge {

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Create(serving::ServiceCore* core,
                                                               const GrpcServerOptions& options) {
  if (core == nullptr) return absl::InvalidArgumentError("a service core is required");
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("gRPC port ", options.port, " is out of range"));
  }
  if (options.max_message_bytes <= 0 || options.max_message_bytes > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("--grpc-max-message-bytes must be in 1..",
                                                   std::numeric_limits<int>::max(), ", got ",
                                                   options.max_message_bytes));
  }
  std::unique_ptr<GrpcServer> server(new GrpcServer());
  server->kserve_ = std::make_unique<KServeService>(core, options);
  server->info_ = std::make_unique<TeiInfoService>(core, options);
  server->rerank_ = std::make_unique<TeiRerankService>(core, options);
  server->tokenize_ = std::make_unique<TeiTokenizeService>(core, options);
  server->predict_ = std::make_unique<TeiPredictService>(core, options);
  server->embed_ = std::make_unique<TeiEmbedService>(core);
  server->health_ = std::make_unique<HealthService>(core);

  // An IPv6 literal needs brackets in a gRPC address.
  const std::string host = options.host.find(':') != std::string::npos && options.host.front() != '['
                               ? absl::StrCat("[", options.host, "]")
                               : options.host;
  const std::string address = absl::StrCat(host, ":", options.port);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &server->port_);
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  grpc::ResourceQuota quota("tide-grpc");
  quota.SetMaxThreads(std::max(options.max_threads, 2));
  builder.SetResourceQuota(quota);
  builder.RegisterService(server->kserve_.get());
  builder.RegisterService(server->info_.get());
  builder.RegisterService(server->rerank_.get());
  builder.RegisterService(server->tokenize_.get());
  builder.RegisterService(server->predict_.get());
  builder.RegisterService(server->embed_.get());
  builder.RegisterService(server->health_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("gRPC: cannot listen on ", address, " (address in use?)"));
  }
  return server;
}

GrpcServer::~GrpcServer() { Shutdown(std::chrono::steady_clock::now()); }

void GrpcServer::Shutdown(std::chrono::steady_clock::time_point deadline) {
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  health_->Shutdown();  // open Watch streams end, so they do not hold gRPC's shutdown
  const auto left = deadline - std::chrono::steady_clock::now();
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::duration_cast<std::chrono::system_clock::duration>(left));
  server_->Wait();
}

}  // namespace tide::grpc_edge
