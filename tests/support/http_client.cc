#include "http_client.h"

#include <cstdint>
#include <limits>
#include <optional>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/ascii.h"
#include "absl/strings/str_cat.h"

namespace tide::testing {
namespace {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

std::string ToString(boost::beast::string_view s) { return std::string(s.data(), s.size()); }

}  // namespace

std::string_view ClientResponse::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (AsciiEqualsIgnoreCase(key, name)) return value;
  }
  return {};
}

struct HttpClient::Impl {
  Impl(std::string h, uint16_t p, std::chrono::milliseconds t) : host(std::move(h)), port(p), timeout(t) {}

  // Starts an operation with `start(handler)` and runs the loop until it completes or `limit`
  // passes; on timeout the operation is cancelled, the socket closed unless `keep_open`, and
  // timed_out is returned.
  template <typename Start>
  boost::system::error_code Run(Start start, std::chrono::milliseconds limit, size_t* transferred = nullptr,
                                bool keep_open = false) {
    bool done = false;
    boost::system::error_code result;
    start([&](boost::system::error_code ec, auto&&... rest) {
      done = true;
      result = ec;
      if constexpr (sizeof...(rest) == 1) {
        if (transferred != nullptr) *transferred = static_cast<size_t>((rest, ...));
      }
    });
    ioc.restart();
    ioc.run_for(limit);
    if (!done) {
      boost::system::error_code ignored;
      if (keep_open) {
        socket.cancel(ignored);
      } else {
        socket.close(ignored);
        connected = false;
      }
      ioc.restart();
      ioc.run();
      return net::error::timed_out;
    }
    return result;
  }

  // Runs fn(stream) on the connection's stream: the TLS stream when there is one, else the socket.
  template <typename Fn>
  void With(Fn&& fn) {
    if (tls_stream) {
      fn(*tls_stream);
    } else {
      fn(socket);
    }
  }

  std::string host;
  uint16_t port;
  std::chrono::milliseconds timeout;
  net::io_context ioc;
  tcp::socket socket{ioc};
  std::shared_ptr<net::ssl::context> tls_context;  // null: plaintext
  bool tls_verify = true;
  std::unique_ptr<net::ssl::stream<tcp::socket&>> tls_stream;  // over `socket`, while connected
  boost::beast::flat_buffer buffer;
  bool connected = false;
};

absl::Status HttpClient::UseTls(const tls::ClientTlsOptions& options) {
  auto context = tls::MakeClientContext(options);
  if (!context.ok()) return context.status();
  Disconnect();
  impl_->tls_context = *std::move(context);
  impl_->tls_verify = options.verify;
  return absl::OkStatus();
}

std::string HttpClient::PeerCertificate() const {
  if (!impl_->connected || !impl_->tls_stream) return "";
  X509* cert = SSL_get1_peer_certificate(impl_->tls_stream->native_handle());
  if (cert == nullptr) return "";
  std::string out;
  if (char* subject = X509_NAME_oneline(X509_get_subject_name(cert), nullptr, 0)) {
    absl::StrAppend(&out, "subject=", subject);
    OPENSSL_free(subject);
  }
  absl::StrAppend(&out, ", serial=", ASN1_INTEGER_get(X509_get_serialNumber(cert)));
  X509_free(cert);
  return out;
}

HttpClient::HttpClient(std::string host, uint16_t port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>(std::move(host), port, timeout)) {}

HttpClient::~HttpClient() { Disconnect(); }

bool HttpClient::connected() const { return impl_->connected; }

absl::Status HttpClient::Connect() {
  if (impl_->connected) return absl::OkStatus();
  Impl& impl = *impl_;
  impl.buffer.clear();
  boost::system::error_code ec;
  const net::ip::address address = net::ip::make_address(impl.host == "localhost" ? "127.0.0.1" : impl.host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("bad host ", impl.host));
  impl.socket = tcp::socket(impl.ioc);
  ec = impl.Run([&](auto handler) { impl.socket.async_connect(tcp::endpoint(address, impl.port), handler); },
                impl.timeout);
  if (ec) {
    boost::system::error_code ignored;
    impl.socket.close(ignored);
    return absl::UnavailableError(absl::StrCat("connect to ", impl.host, ":", impl.port, ": ", ec.message()));
  }
  impl.socket.set_option(tcp::no_delay(true), ec);
  if (impl.tls_context) {
    impl.tls_stream = std::make_unique<net::ssl::stream<tcp::socket&>>(impl.socket, *impl.tls_context);
    if (absl::Status s = tls::SetClientHostName(impl.tls_stream->native_handle(), impl.host, impl.tls_verify); !s.ok()) {
      Disconnect();
      return s;
    }
    ec = impl.Run([&](auto handler) { impl.tls_stream->async_handshake(net::ssl::stream_base::client, handler); },
                  impl.timeout);
    if (ec) {
      Disconnect();
      return absl::UnavailableError(absl::StrCat("TLS handshake with ", impl.host, ":", impl.port, ": ", ec.message()));
    }
  }
  impl.connected = true;
  return absl::OkStatus();
}

void HttpClient::Disconnect() {
  boost::system::error_code ignored;
  impl_->socket.shutdown(tcp::socket::shutdown_both, ignored);
  impl_->socket.close(ignored);
  impl_->tls_stream.reset();
  impl_->buffer.clear();
  impl_->connected = false;
}

absl::Status HttpClient::SendRaw(std::string_view bytes) {
  if (absl::Status status = Connect(); !status.ok()) return status;
  Impl& impl = *impl_;
  const boost::system::error_code ec = impl.Run(
      [&](auto handler) {
        impl.With([&](auto& stream) { net::async_write(stream, net::buffer(bytes.data(), bytes.size()), handler); });
      },
      impl.timeout);
  if (ec) {
    Disconnect();
    return absl::UnavailableError(absl::StrCat("write: ", ec.message()));
  }
  return absl::OkStatus();
}

ClientResponse HttpClient::ReadResponse() {
  ClientResponse response;
  Impl& impl = *impl_;
  if (!impl.connected) {
    response.error = "not connected";
    return response;
  }
  for (;;) {
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());  // not boost::none: Boost 1.74 compares it wrongly
    const boost::system::error_code ec =
        impl.Run([&](auto handler) { impl.With([&](auto& stream) { bhttp::async_read(stream, impl.buffer, parser, handler); }); },
                 impl.timeout);
    if (ec) {
      response.error = absl::StrCat("read: ", ec.message());
      Disconnect();
      return response;
    }
    const auto& message = parser.get();
    if (message.result_int() / 100 == 1) continue;  // interim (100 Continue)
    response.status = static_cast<int>(message.result_int());
    for (const auto& field : message) {
      response.headers.emplace_back(ToString(field.name_string()), ToString(field.value()));
    }
    response.body = message.body();
    if (!message.keep_alive()) Disconnect();
    return response;
  }
}

RawReadResult HttpClient::ReadUntilClosed(std::chrono::milliseconds timeout) {
  RawReadResult result;
  Impl& impl = *impl_;
  const auto data = impl.buffer.data();
  result.bytes.assign(static_cast<const char*>(data.data()), data.size());
  impl.buffer.clear();
  if (!impl.connected) {
    result.closed = true;
    return result;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char chunk[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return result;
    size_t n = 0;
    const boost::system::error_code ec =
        impl.Run([&](auto handler) { impl.With([&](auto& stream) { stream.async_read_some(net::buffer(chunk), handler); }); },
                 left, &n,
                 /*keep_open=*/true);
    result.bytes.append(chunk, n);
    if (ec == net::error::timed_out) return result;
    if (ec) {
      result.closed = true;
      Disconnect();
      return result;
    }
  }
}

ClientResponse HttpClient::Send(std::string_view method, std::string_view path, std::string_view body,
                                const HeaderList& headers) {
  std::string request;
  request.append(method).append(" ").append(path).append(" HTTP/1.1\r\n");
  absl::StrAppend(&request, "Host: ", impl_->host, ":", impl_->port, "\r\n");
  bool has_length = false;
  for (const auto& [name, value] : headers) {
    if (AsciiEqualsIgnoreCase(name, "content-length") || AsciiEqualsIgnoreCase(name, "transfer-encoding")) has_length = true;
    absl::StrAppend(&request, name, ": ", value, "\r\n");
  }
  if (!has_length && (!body.empty() || method == "POST" || method == "PUT")) {
    absl::StrAppend(&request, "Content-Length: ", body.size(), "\r\n");
  }
  request.append("\r\n").append(body);
  if (absl::Status status = SendRaw(request); !status.ok()) {
    ClientResponse response;
    response.error = std::string(status.message());
    return response;
  }
  return ReadResponse();
}

ClientResponse HttpClient::Get(std::string_view path, const HeaderList& headers) {
  return Send("GET", path, "", headers);
}

ClientResponse HttpClient::Post(std::string_view path, std::string_view body, const HeaderList& headers) {
  bool has_type = false;
  for (const auto& [name, value] : headers) has_type = has_type || AsciiEqualsIgnoreCase(name, "content-type");
  if (has_type) return Send("POST", path, body, headers);
  HeaderList with_type = headers;
  with_type.emplace_back("Content-Type", "application/json");
  return Send("POST", path, body, with_type);
}

}  // namespace tide::testing
