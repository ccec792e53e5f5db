// tide::tls — the TLS contexts of tide's edges (server side) and of its clients (load generator,
// tests). OpenSSL 3 through Boost.Asio's ssl::context.
//
// Contract:
//  - ServerTlsContext::Create(files) reads the PEM certificate chain, its private key and, when
//    client_ca_file is given, the CA bundle client certificates must chain to (mutual TLS: a client
//    without such a certificate fails the handshake). Errors name the flag and the file:
//    INVALID_ARGUMENT for a file that cannot be read, does not parse, or a key that does not match
//    the certificate. Nothing is kept from a failed Create.
//  - Reload() reads the same files again. On success, current() returns the new context: a
//    connection takes current() once, when it is accepted, so new handshakes use the new
//    certificate while established connections keep theirs. On failure (same errors as Create) the
//    current context stays and the error is returned for the caller to log.
//  - current(), current_pem(), Reload() are thread-safe; current() is a mutex-guarded shared_ptr
//    copy (once per accepted connection).
//  - Protocol: TLS 1.2 and 1.3 only; the server's cipher preferences are OpenSSL's defaults.
//    A peer closing without close_notify reads as an ordinary end of stream (HTTP framing detects
//    truncation itself).
//  - MakeClientContext: a client context that verifies the server against ca_file (else the
//    system's default CA paths, or nothing when verify is false) and, with cert_file/key_file,
//    presents a client certificate. Host name / IP checks are set per connection with
//    SetClientHostName.
#pragma once

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace boost::asio::ssl {
class context;
}
struct ssl_st;  // OpenSSL's SSL

namespace tide::tls {

// The files of the server flags --tls-cert-file, --tls-key-file, --tls-client-ca-file.
struct ServerTlsFiles {
  std::string cert_file;       // PEM certificate chain, leaf first
  std::string key_file;        // PEM private key of the leaf (unencrypted)
  std::string client_ca_file;  // PEM CA bundle; non-empty: clients must present a certificate it signed
  bool enabled() const { return !cert_file.empty() || !key_file.empty() || !client_ca_file.empty(); }
};

// INVALID_ARGUMENT unless both cert_file and key_file are given, or neither (and then no
// client_ca_file). Reads nothing.
absl::Status ValidateServerTlsFlags(const ServerTlsFiles& files);

// The PEM texts of a loaded (validated) server identity, for the gRPC edge, which builds its own
// credentials from them.
struct ServerTlsPem {
  std::string cert_chain;
  std::string private_key;
  std::string client_ca;  // "" without mTLS
};

class ServerTlsContext {
 public:
  static absl::StatusOr<std::shared_ptr<ServerTlsContext>> Create(const ServerTlsFiles& files);

  // Re-reads the files; see the contract. Returns the error and keeps the current context on failure.
  absl::Status Reload();

  std::shared_ptr<boost::asio::ssl::context> current() const;
  ServerTlsPem current_pem() const;
  // "subject=..., serial=..., not after ..." of the current leaf certificate (for logs).
  std::string description() const;
  const ServerTlsFiles& files() const { return files_; }
  bool mutual() const { return !files_.client_ca_file.empty(); }

 private:
  struct Loaded;
  static absl::StatusOr<std::shared_ptr<Loaded>> Load(const ServerTlsFiles& files);
  explicit ServerTlsContext(ServerTlsFiles files) : files_(std::move(files)) {}

  const ServerTlsFiles files_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const Loaded> loaded_ ABSL_GUARDED_BY(mu_);
};

struct ClientTlsOptions {
  std::string ca_file;    // PEM CA bundle to verify the server with; "": the system's default paths
  std::string cert_file;  // client certificate (mTLS); needs key_file
  std::string key_file;
  bool verify = true;     // false: accept any server certificate (benchmarks against throwaway certs)
};

absl::StatusOr<std::shared_ptr<boost::asio::ssl::context>> MakeClientContext(const ClientTlsOptions& options);

// Sets SNI (for a host name) and the name or IP address the server's certificate must carry, on a
// client connection's SSL object (boost::asio::ssl::stream::native_handle()).
absl::Status SetClientHostName(ssl_st* ssl, const std::string& host, bool verify);

}  // namespace tide::tls
