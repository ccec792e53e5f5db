#include "server/grpc/grpc_server.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "grpc/impl/codegen/grpc_types.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/support/server_interceptor.h"
#include "server/grpc/connection_gate.h"
#include "server/grpc/health_service.h"
#include "server/grpc/kserve_service.h"
#include "server/grpc/tei_service.h"
#include "tls/tls_context.h"

namespace tide::grpc_edge {
namespace {

constexpr char kKeyFile[] = "key.pem";
constexpr char kCertFile[] = "cert.pem";
constexpr char kCaFile[] = "client-ca.pem";

// Writes `text` to dir/name (mode 0600) through a temporary file and rename(2), so that a reader
// sees the old file or the new one, never a part.
absl::Status WriteAtomically(const std::string& dir, const char* name, const std::string& text) {
  const std::string path = absl::StrCat(dir, "/", name);
  const std::string temp = absl::StrCat(dir, "/.", name, ".tmp");
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot write ", temp, ": ", std::strerror(errno)));
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("cannot write ", temp, ": ", std::strerror(error)));
    }
    written += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 || ::rename(temp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// The copy of the current PEMs gRPC's provider watches. Key before certificate: the provider
// re-reads both when either changes, and checks the pair before using it.
absl::Status WritePems(const std::string& dir, const tls::ServerTlsContext& context) {
  const tls::ServerTlsPem pem = context.current_pem();
  if (absl::Status s = WriteAtomically(dir, kKeyFile, pem.private_key); !s.ok()) return s;
  if (absl::Status s = WriteAtomically(dir, kCertFile, pem.cert_chain); !s.ok()) return s;
  if (!pem.client_ca.empty()) return WriteAtomically(dir, kCaFile, pem.client_ca);
  return absl::OkStatus();
}

}  // namespace

namespace {

// Tells the gate that a call is in flight on its connection, from the call's start until gRPC
// destroys the call (the interceptor lives as long as the call).
class CallInFlight final : public grpc::experimental::Interceptor {
 public:
  CallInFlight(ConnectionGate* gate, grpc::experimental::ServerRpcInfo* info) : gate_(gate) {
    id_ = gate_->CallStarted(info->server_context()->peer());
  }
  ~CallInFlight() override { gate_->CallFinished(id_); }
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override { methods->Proceed(); }

 private:
  ConnectionGate* gate_;
  uint64_t id_ = 0;
};

class CallInFlightFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CallInFlightFactory(ConnectionGate* gate) : gate_(gate) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    return new CallInFlight(gate_, info);
  }

 private:
  ConnectionGate* gate_;
};

int ClampMs(std::chrono::milliseconds ms) {
  return static_cast<int>(std::min<int64_t>(ms.count(), std::numeric_limits<int>::max()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Create(serving::ServiceCore* core,
                                                               const pipeline::RequestPipeline* pipeline,
                                                               const GrpcServerOptions& options) {
  if (core == nullptr) return absl::InvalidArgumentError("a service core is required");
  if (pipeline == nullptr) return absl::InvalidArgumentError("a request pipeline is required");
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("gRPC port ", options.port, " is out of range"));
  }
  if (options.max_message_bytes <= 0 || options.max_message_bytes > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("--grpc-max-message-bytes must be in 1..",
                                                   std::numeric_limits<int>::max(), ", got ",
                                                   options.max_message_bytes));
  }
  if (options.max_concurrent_streams < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--grpc-max-concurrent-streams must be at least 1, got ", options.max_concurrent_streams));
  }
  for (const auto& [name, value] :
       {std::pair<const char*, int64_t>{"--grpc-max-connection-idle-ms", options.max_connection_idle.count()},
        {"--grpc-max-connection-age-ms", options.max_connection_age.count()},
        {"--grpc-max-connection-age-grace-ms", options.max_connection_age_grace.count()},
        {"--grpc-http2-min-recv-ping-interval-without-data", options.http2_min_recv_ping_interval_without_data.count()},
        {"--grpc-http2-max-ping-strikes", options.http2_max_ping_strikes}}) {
    if (value < 0) return absl::InvalidArgumentError(absl::StrCat(name, " must not be negative, got ", value));
  }
  std::unique_ptr<GrpcServer> server(new GrpcServer());
  const pipeline::RequestPipeline* p = pipeline;
  server->kserve_ = std::make_unique<KServeService>(core, p, options);
  server->info_ = std::make_unique<TeiInfoService>(core, p, options);
  server->rerank_ = std::make_unique<TeiRerankService>(core, p, options);
  server->tokenize_ = std::make_unique<TeiTokenizeService>(core, p, options);
  server->predict_ = std::make_unique<TeiPredictService>(core, p, options);
  server->embed_ = std::make_unique<TeiEmbedService>(core, p);
  server->health_ = std::make_unique<HealthService>(core, &p->recorder());

  // TLS (when configured): gRPC runs the TLS handshake on each connection handed over below.
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (options.tls != nullptr) {
    const char* tmp = std::getenv("TMPDIR");
    std::string dir = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/tide-grpc-tls-XXXXXX");
    if (::mkdtemp(dir.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("gRPC TLS: cannot create ", dir, ": ", std::strerror(errno)));
    }
    server->tls_ = options.tls;
    server->tls_dir_ = dir;  // removed by the destructor from here on
    if (absl::Status s = WritePems(dir, *options.tls); !s.ok()) return s;
    const bool mutual = options.tls->mutual();
    auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        absl::StrCat(dir, "/", kKeyFile), absl::StrCat(dir, "/", kCertFile),
        mutual ? absl::StrCat(dir, "/", kCaFile) : std::string(), kTlsRefreshSeconds);
    grpc::experimental::TlsServerCredentialsOptions tls_options(provider);
    tls_options.watch_identity_key_cert_pairs();
    if (mutual) {
      tls_options.watch_root_certs();
      tls_options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    } else {
      tls_options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    }
    credentials = grpc::experimental::TlsServerCredentials(tls_options);
  }
  // tide accepts the connections (the cap gRPC 1.51 lacks) and hands them to gRPC's external
  // connection acceptor, which runs gRPC's handshake (with these credentials) as on its own
  // listener.
  ConnectionGateOptions gate_options;
  gate_options.host = options.host;
  gate_options.port = options.port;
  gate_options.max_connections = options.max_connections;
  gate_options.handshake_timeout = options.handshake_timeout;
  gate_options.descriptor_reserve = options.descriptor_reserve;
  gate_options.on_event = options.on_connection_event;
  auto gate = ConnectionGate::Create(gate_options);
  if (!gate.ok()) return gate.status();
  server->gate_ = *std::move(gate);
  server->port_ = server->gate_->port();

  grpc::ServerBuilder builder;
  server->acceptor_ = builder.experimental().AddExternalConnectionAcceptor(
      grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, credentials);
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  // gRPC's own handshake deadline (it also covers the client's HTTP/2 SETTINGS); the gate closes
  // connections that did not even send the preface by then.
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, ClampMs(options.handshake_timeout));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  // gRPC reads 0 as "now" for idle and age; tide's 0 means never (gRPC's default, INT_MAX).
  const auto never_if_zero = [](std::chrono::milliseconds ms) {
    return ms.count() == 0 ? std::numeric_limits<int>::max() : ClampMs(ms);
  };
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, never_if_zero(options.max_connection_idle));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, never_if_zero(options.max_connection_age));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, never_if_zero(options.max_connection_age_grace));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             ClampMs(options.http2_min_recv_ping_interval_without_data));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, options.http2_max_ping_strikes);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<CallInFlightFactory>(server->gate_.get()));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
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
  if (server->server_ == nullptr) return absl::InternalError("gRPC: the server did not start");
  server->gate_->Start([acceptor = server->acceptor_.get(), listener = server->gate_->listener_fd()](int fd) {
    grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters connection;
    connection.listener_fd = listener;
    connection.fd = fd;
    acceptor->HandleNewConnection(&connection);  // gRPC owns fd now (closes it if shut down)
  });
  return server;
}

GrpcServer::~GrpcServer() {
  Shutdown(std::chrono::steady_clock::now());
  if (!tls_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(tls_dir_, ignored);
  }
}

absl::Status GrpcServer::ReloadTls() {
  if (tls_ == nullptr) return absl::OkStatus();
  return WritePems(tls_dir_, *tls_);
}

void GrpcServer::Shutdown(std::chrono::steady_clock::time_point deadline) {
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  gate_->Stop();  // no new connections
  health_->Shutdown();  // open Watch streams end, so they do not hold gRPC's shutdown
  const auto left = deadline - std::chrono::steady_clock::now();
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::duration_cast<std::chrono::system_clock::duration>(left));
  server_->Wait();
}

size_t GrpcServer::open_connections() const { return gate_ == nullptr ? 0 : gate_->open_connections(); }
size_t GrpcServer::max_connections() const { return gate_ == nullptr ? 0 : gate_->max_connections(); }

}  // namespace tide::grpc_edge
