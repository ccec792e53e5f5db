#include "tls/tls_context.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>

#include "absl/strings/str_cat.h"

namespace tide::tls {
namespace {

namespace ssl = boost::asio::ssl;

// The oldest error on OpenSSL's queue of this thread, which is then cleared: "what (library)".
std::string OpenSslError(const char* fallback) {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return fallback;
  const char* reason = ERR_reason_error_string(code);
  const char* lib = ERR_lib_error_string(code);
  return absl::StrCat(reason != nullptr ? reason : "unknown error", lib != nullptr ? absl::StrCat(" (", lib, ")") : "");
}

absl::StatusOr<std::string> ReadFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read ", flag, " ", path, ": ", std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::InvalidArgumentError(absl::StrCat("cannot read ", flag, " ", path, ": ", std::strerror(errno)));
  return text.str();
}

struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};

// Every certificate of a PEM bundle; INVALID_ARGUMENT when it holds none.
absl::StatusOr<std::vector<std::unique_ptr<X509, X509Deleter>>> ParseCertificates(const std::string& flag,
                                                                                 const std::string& path,
                                                                                 const std::string& pem) {
  std::unique_ptr<BIO, BioDeleter> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  std::vector<std::unique_ptr<X509, X509Deleter>> certs;
  for (;;) {
    X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    if (cert == nullptr) break;
    certs.emplace_back(cert);
  }
  ERR_clear_error();  // the end of the bundle reads as "no start line"
  if (certs.empty()) return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": no PEM certificate in it"));
  return certs;
}

// "subject=..., serial=..., not after ..." of `cert`.
std::string Describe(X509* cert) {
  std::string out;
  if (char* subject = X509_NAME_oneline(X509_get_subject_name(cert), nullptr, 0)) {
    absl::StrAppend(&out, "subject=", subject);
    OPENSSL_free(subject);
  }
  if (BIGNUM* serial = ASN1_INTEGER_to_BN(X509_get_serialNumber(cert), nullptr)) {
    if (char* hex = BN_bn2hex(serial)) {
      absl::StrAppend(&out, ", serial=", hex);
      OPENSSL_free(hex);
    }
    BN_free(serial);
  }
  std::unique_ptr<BIO, BioDeleter> bio(BIO_new(BIO_s_mem()));
  if (ASN1_TIME_print(bio.get(), X509_get0_notAfter(cert)) == 1) {
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio.get(), &data);
    absl::StrAppend(&out, ", not after ", std::string(data, static_cast<size_t>(n)));
  }
  return out;
}

// OpenSSL refuses a private key that does not belong to the certificate already loaded.
bool IsKeyMismatch(const boost::system::error_code& ec) {
  return ec.category() == boost::asio::error::get_ssl_category() &&
         ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH;
}

void SetCommonOptions(SSL_CTX* ctx) {
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // A peer that closes without close_notify is an end of stream: HTTP's framing (Content-Length,
  // chunked) detects a truncated message, and the server can still write its 408 after a read
  // timeout shut the receiving side.
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
}

}  // namespace

struct ServerTlsContext::Loaded {
  std::shared_ptr<ssl::context> context;
  ServerTlsPem pem;
  std::string description;
};

absl::Status ValidateServerTlsFlags(const ServerTlsFiles& files) {
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert-file and --tls-key-file go together: give both or neither");
  }
  if (files.cert_file.empty() && !files.client_ca_file.empty()) {
    return absl::InvalidArgumentError("--tls-client-ca-file needs --tls-cert-file and --tls-key-file");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<ServerTlsContext>> ServerTlsContext::Create(const ServerTlsFiles& files) {
  if (absl::Status s = ValidateServerTlsFlags(files); !s.ok()) return s;
  if (files.cert_file.empty()) return absl::InvalidArgumentError("TLS needs --tls-cert-file and --tls-key-file");
  auto loaded = Load(files);
  if (!loaded.ok()) return loaded.status();
  std::shared_ptr<ServerTlsContext> context(new ServerTlsContext(files));
  absl::MutexLock lock(&context->mu_);
  context->loaded_ = *std::move(loaded);
  return context;
}

absl::Status ServerTlsContext::Reload() {
  auto loaded = Load(files_);
  if (!loaded.ok()) return loaded.status();
  absl::MutexLock lock(&mu_);
  loaded_ = *std::move(loaded);
  return absl::OkStatus();
}

std::shared_ptr<ssl::context> ServerTlsContext::current() const {
  absl::MutexLock lock(&mu_);
  return loaded_->context;
}

ServerTlsPem ServerTlsContext::current_pem() const {
  absl::MutexLock lock(&mu_);
  return loaded_->pem;
}

std::string ServerTlsContext::description() const {
  absl::MutexLock lock(&mu_);
  return loaded_->description;
}

absl::StatusOr<std::shared_ptr<ServerTlsContext::Loaded>> ServerTlsContext::Load(const ServerTlsFiles& files) {
  auto loaded = std::make_shared<Loaded>();
  auto cert_pem = ReadFile("--tls-cert-file", files.cert_file);
  if (!cert_pem.ok()) return cert_pem.status();
  auto key_pem = ReadFile("--tls-key-file", files.key_file);
  if (!key_pem.ok()) return key_pem.status();
  ERR_clear_error();
  loaded->context = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* ctx = loaded->context->native_handle();
  SetCommonOptions(ctx);
  // Sessions resumed across connections need an id context once client certificates are verified.
  static constexpr unsigned char kSessionIdContext[] = "tide";
  SSL_CTX_set_session_id_context(ctx, kSessionIdContext, sizeof(kSessionIdContext) - 1);

  boost::system::error_code ec;
  loaded->context->use_certificate_chain(boost::asio::buffer(*cert_pem), ec);
  if (ec) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-cert-file ", files.cert_file, ": not a PEM certificate chain (", ec.message(), ")"));
  }
  loaded->context->use_private_key(boost::asio::buffer(*key_pem), ssl::context::pem, ec);
  if (ec && IsKeyMismatch(ec)) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat("--tls-key-file ", files.key_file,
                                                   " does not match the certificate of --tls-cert-file ",
                                                   files.cert_file));
  }
  if (ec) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-key-file ", files.key_file, ": not a PEM private key (", ec.message(), ")"));
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-key-file ", files.key_file, " does not match the certificate of --tls-cert-file ",
                                                   files.cert_file, " (", OpenSslError("key values mismatch"), ")"));
  }
  loaded->description = Describe(SSL_CTX_get0_certificate(ctx));
  loaded->pem.cert_chain = *std::move(cert_pem);
  loaded->pem.private_key = *std::move(key_pem);

  if (!files.client_ca_file.empty()) {
    auto ca_pem = ReadFile("--tls-client-ca-file", files.client_ca_file);
    if (!ca_pem.ok()) return ca_pem.status();
    auto certs = ParseCertificates("--tls-client-ca-file", files.client_ca_file, *ca_pem);
    if (!certs.ok()) return certs.status();
    X509_STORE* store = SSL_CTX_get_cert_store(ctx);
    for (const auto& cert : *certs) {
      // The store verifies client chains; the client CA list tells clients which issuers we accept.
      if (X509_STORE_add_cert(store, cert.get()) != 1 || SSL_CTX_add_client_CA(ctx, cert.get()) != 1) {
        return absl::InvalidArgumentError(absl::StrCat("--tls-client-ca-file ", files.client_ca_file, ": ",
                                                       OpenSslError("cannot add the certificate")));
      }
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    loaded->pem.client_ca = *std::move(ca_pem);
  }
  return loaded;
}

absl::StatusOr<std::shared_ptr<ssl::context>> MakeClientContext(const ClientTlsOptions& options) {
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError("a client certificate needs both its certificate and its key file");
  }
  ERR_clear_error();
  auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
  SetCommonOptions(context->native_handle());
  boost::system::error_code ec;
  if (!options.verify) {
    context->set_verify_mode(ssl::verify_none);
  } else {
    context->set_verify_mode(ssl::verify_peer);
    if (options.ca_file.empty()) {
      context->set_default_verify_paths(ec);
    } else {
      auto pem = ReadFile("CA file", options.ca_file);
      if (!pem.ok()) return pem.status();
      context->add_certificate_authority(boost::asio::buffer(*pem), ec);
    }
    if (ec) return absl::InvalidArgumentError(absl::StrCat("CA file ", options.ca_file, ": ", ec.message()));
  }
  if (!options.cert_file.empty()) {
    context->use_certificate_chain_file(options.cert_file, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("client certificate ", options.cert_file, ": ", ec.message()));
    context->use_private_key_file(options.key_file, ssl::context::pem, ec);
    if (ec && IsKeyMismatch(ec)) {
      ERR_clear_error();
      return absl::InvalidArgumentError(absl::StrCat("client key ", options.key_file, " does not match ", options.cert_file));
    }
    if (ec) return absl::InvalidArgumentError(absl::StrCat("client key ", options.key_file, ": ", ec.message()));
    if (SSL_CTX_check_private_key(context->native_handle()) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("client key ", options.key_file, " does not match ", options.cert_file));
    }
  }
  ERR_clear_error();
  return context;
}

absl::Status SetClientHostName(ssl_st* ssl, const std::string& host, bool verify) {
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(host, ec);
  const bool is_ip = !ec;
  // SNI carries host names only (RFC 6066 §3).
  if (!is_ip && SSL_set_tlsext_host_name(ssl, host.c_str()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("cannot set TLS server name ", host));
  }
  if (!verify) return absl::OkStatus();
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  const int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, address.to_string().c_str())
                       : X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size());
  if (ok != 1) return absl::InvalidArgumentError(absl::StrCat("cannot check the server certificate for ", host));
  return absl::OkStatus();
}

}  // namespace tide::tls
