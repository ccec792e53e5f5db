#include "server/grpc/grpc_server.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
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
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, credentials, &server->port_);
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
  health_->Shutdown();  // open Watch streams end, so they do not hold gRPC's shutdown
  const auto left = deadline - std::chrono::steady_clock::now();
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::duration_cast<std::chrono::system_clock::duration>(left));
  server_->Wait();
}

}  // namespace tide::grpc_edge
