// tide::testing::HttpClient — a small synchronous HTTP/1.1 client for black-box tests.
//
// Contract:
//  - One client owns at most one TCP connection to host:port and reuses it (keep-alive) until the
//    server answers `Connection: close`, an operation fails, or Disconnect() is called; the next
//    request then connects again. Requests are never retried.
//  - Every network wait is bounded by `timeout`; a transport failure or timeout comes back as
//    ClientResponse::status == 0 with `error` set (no exceptions).
//  - Not thread-safe: use one client per thread.
//  - UseTls(options): every connection from then on is TLS (the server's certificate is verified
//    against options.ca_file for the client's host, an IP address or a name; options.cert_file is
//    presented when the server asks for a client certificate). A failed handshake is an error of
//    the operation that connected.
//  - The raw calls (SendRaw, ReadResponse, ReadUntilClosed) work on the same connection, for
//    malformed-request, pipelining and slow-sender tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "tls/tls_context.h"

namespace tide::testing {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct ClientResponse {
  int status = 0;     // 0: no response; see `error`
  std::string error;  // transport error, empty when a response arrived
  HeaderList headers;
  std::string body;

  // First value of header `name` (case-insensitive), "" when absent.
  std::string_view header(std::string_view name) const;
};

struct RawReadResult {
  std::string bytes;      // everything received
  bool closed = false;    // the server closed (or reset) the connection before the timeout
};

class HttpClient {
 public:
  HttpClient(std::string host, uint16_t port,
             std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  ClientResponse Get(std::string_view path, const HeaderList& headers = {});
  // Adds Content-Type: application/json unless `headers` has a Content-Type.
  ClientResponse Post(std::string_view path, std::string_view body, const HeaderList& headers = {});
  ClientResponse Send(std::string_view method, std::string_view path, std::string_view body,
                      const HeaderList& headers);

  // Connects if needed and writes `bytes` verbatim.
  absl::Status SendRaw(std::string_view bytes);
  // Reads one response from the connection (skipping 1xx interim responses).
  ClientResponse ReadResponse();
  // Reads until the server closes the connection or `timeout` passes; after a timeout the
  // connection stays open and usable.
  RawReadResult ReadUntilClosed(std::chrono::milliseconds timeout);

  absl::Status UseTls(const tls::ClientTlsOptions& options);
  // "subject=..., serial=..., not after ..." of the server certificate of the open TLS connection;
  // "" when not connected over TLS.
  std::string PeerCertificate() const;

  absl::Status Connect();
  void Disconnect();
  bool connected() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tide::testing
