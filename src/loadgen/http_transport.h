// tide::loadgen HTTP client side: an Asio event loop, a keep-alive connection pool that sends
// pre-serialized requests, and a one-shot GET (for /metrics).
//
// Contract:
//  - AsioEventLoop: one io_context driven by the thread that calls Run(); single use per
//    measurement (a new loop per run point, so no handler of an earlier run can leak into the
//    next). Destroy the transport before its loop.
//  - HttpTransport: at most max_connections HTTP/1.1 keep-alive connections, opened lazily; a
//    request that finds every connection busy waits in a FIFO and goes out on the next free one
//    (the driver measures that wait). Each body is serialized once at Create, so a send costs a
//    write and a parse. A request that sees no complete response within timeout_ms fails with
//    error "timeout" and its connection is closed. A reused connection that the server had
//    closed is reopened and the request retried once (not counted as an error). Create:
//    kInvalidArgument for no bodies / no connections, kUnavailable when the host does not
//    resolve. Not thread-safe: use on the loop thread only.
//  - TLS (options.tls): every connection does a TLS handshake after connecting (the server's
//    certificate checked against host when tls_verify), inside the request's timeout; a failed
//    handshake is an error "tls: ...". connection_close sends `Connection: close`, so that every
//    request opens (and with TLS, handshakes) a connection of its own.
//  - HttpGet: blocking GET on its own io_context; kDeadlineExceeded after timeout, kUnavailable
//    on connection errors, kInternal for a non-2xx answer.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>

#include "absl/status/statusor.h"
#include "loadgen/event_loop.h"

namespace tide::loadgen {

struct HttpUrl {
  std::string host;
  uint16_t port = 80;  // 443 for https:// without a port
  std::string path;  // "" when the URL has none (or only "/")
  bool tls = false;  // https://
};
// "http://host[:port][/path]" or "https://..."; kInvalidArgument otherwise.
absl::StatusOr<HttpUrl> ParseHttpUrl(std::string_view url);

class AsioEventLoop final : public EventLoop {
 public:
  AsioEventLoop() : start_(std::chrono::steady_clock::now()) {}
  int64_t Now() override;
  void RunAt(int64_t time_ns, std::function<void()> fn) override;
  void Run() override;
  void Stop() override { io_.stop(); }
  boost::asio::io_context& io() { return io_; }

 private:
  boost::asio::io_context io_;
  std::chrono::steady_clock::time_point start_;
};

struct HttpTransportOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;
  std::string method = "POST";
  std::string path = "/rerank";
  std::string content_type = "application/json";
  std::vector<std::string> bodies;  // request i sends bodies[i % bodies.size()]
  size_t max_connections = 1;
  int64_t timeout_ms = 30000;
  // HTTPS with this client context (tls::MakeClientContext); null: plaintext.
  std::shared_ptr<boost::asio::ssl::context> tls;
  bool tls_verify = true;         // check the server certificate's name / IP against host
  bool connection_close = false;  // one connection (and handshake) per request
};

class HttpTransport final : public Transport {
 public:
  static absl::StatusOr<std::unique_ptr<HttpTransport>> Create(AsioEventLoop* loop,
                                                               const HttpTransportOptions& options);
  ~HttpTransport() override;
  void Send(size_t request_index, std::function<void(const TransportResult&)> done) override;

  struct Connection;  // defined in http_transport.cc
  struct Pending {
    size_t index;
    std::function<void(const TransportResult&)> done;
  };

 private:
  HttpTransport(AsioEventLoop* loop, HttpTransportOptions options)
      : loop_(loop), options_(std::move(options)) {}
  void Start(const std::shared_ptr<Connection>& conn, Pending request, bool retry);
  void Connect(const std::shared_ptr<Connection>& conn, uint64_t gen);
  void Handshake(const std::shared_ptr<Connection>& conn, uint64_t gen);
  void Write(const std::shared_ptr<Connection>& conn, uint64_t gen);
  void Read(const std::shared_ptr<Connection>& conn, uint64_t gen);
  void Fail(const std::shared_ptr<Connection>& conn, uint64_t gen, std::string error, bool retryable);
  void Complete(const std::shared_ptr<Connection>& conn, TransportResult result);

  AsioEventLoop* loop_;
  HttpTransportOptions options_;
  std::vector<std::string> raw_requests_;
  std::vector<boost::asio::ip::tcp::endpoint> endpoints_;
  std::vector<std::shared_ptr<Connection>> all_;
  std::vector<std::shared_ptr<Connection>> idle_;
  std::deque<Pending> pending_;
};

// `tls` non-null: over HTTPS with that client context (the server certificate's name is not
// checked: this is a metrics scrape of the server the benchmark targets).
absl::StatusOr<std::string> HttpGet(const std::string& host, uint16_t port,
                                    const std::string& target, std::chrono::milliseconds timeout,
                                    std::shared_ptr<boost::asio::ssl::context> tls = nullptr);

}  // namespace tide::loadgen
