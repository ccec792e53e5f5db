// tide::http::HttpServer — an HTTP/1.1 server (Boost.Beast underneath) that hands each request to a
// Handler and writes whatever the Handler's Responder is given, whenever and from whichever thread.
//
// Contract:
//  - Ownership: the caller owns the HttpServer and the Handler; the Handler must outlive Stop().
//    Handler::Handle runs on an I/O thread and must not block for long (hand work to a queue).
//  - Every request gets exactly one response. The Responder is move-only and must be called once,
//    from any thread. Until then the server keeps the connection open. Calling it after the client
//    left or after Stop() is safe: the response is dropped. A Responder destroyed without being
//    called answers 500 {"error":"internal: request dropped"}.
//  - Per connection: HTTP/1.1 keep-alive and pipelining (responses are written in request order,
//    up to kMaxPipelinedRequests requests in flight, after which reading pauses), HTTP/1.0,
//    `Connection: close`, `Expect: 100-continue`, chunked request bodies.
//  - The server answers some requests itself, with a JSON body {"error": "...", "error_type": "..."}
//    (JsonError, server/http/error_response.h) and then closes the connection: 400 malformed HTTP, 408 header or body read
//    timeout, 413 body larger than max_body_bytes, 431 header larger than max_header_bytes.
//  - Request framing is checked when the headers are in, before any body byte is read, so that a
//    body can never be taken for the next request (RFC 9112 §6.1, §6.3): a Transfer-Encoding
//    whose final coding is not `chunked` (or any Transfer-Encoding on HTTP/1.0) -> 400; a
//    Transfer-Encoding other than a lone `chunked` (gzip, deflate, ..., then chunked) -> 501;
//    Transfer-Encoding together with Content-Length, more than one Content-Length field or a list
//    value -> 400; an HTTP/1.1 request without Host, or any request with more than one Host field
//    or an invalid Host value -> 400 (RFC 9112 §3.2). Each of these closes the connection.
//  - An absolute-form target (`GET http://host:port/path?q HTTP/1.1`, RFC 9112 §3.2.2) is served
//    as its origin form: Request::target/path/query are those of "/path?q" (the Host header and
//    the URI's authority are not compared; tide serves every authority alike).
//  - A HEAD response carries the status and headers the handler gave, with the Content-Length of
//    the body it gave, and no body.
//  - Connection lifecycle: a new connection has header_read_timeout from accept to deliver its
//    first request's headers (a connection that never sends a byte is closed silently then);
//    idle_timeout only applies between requests, on a keep-alive connection that has completed at
//    least one. At max_connections open connections, a new one evicts (closes silently) first the
//    connection idle the longest (no request in flight, no partial request: keep-alive between
//    requests, never sent a byte, or lingering after its last response), else the one that has
//    been reading a request's headers the longest, else the one reading a request's body the
//    longest. Only when every connection has a request in flight (or a response being written) is
//    the new one refused: it gets `503 {"error":"server at connection limit ..."}` and is closed.
//    evicted_connections() and refused_connections() count both.
//  - Client disconnect: the server keeps a read outstanding on every connection, also while
//    requests are in flight, so a FIN or RST from the client is seen at once and sets client_gone
//    on every request of that connection still waiting for its response. (A client that only
//    half-closes its sending side counts as gone too; its responses are still written if the
//    socket accepts them.) While parsing is paused by the pipelining limit the server keeps
//    reading, without parsing, into a buffer of up to kPausedReadBytes, so the disconnect of a
//    pipelining client is still seen at once; a client that has more than that unparsed in
//    flight is seen gone when the next response is written.
//  - Every response carries `Server: tide` and `Content-Length` (none for 204 and 304). The server
//    owns framing: handler headers named Content-Length, Transfer-Encoding, Connection or Server are
//    ignored, and a handler status outside 200..599 is answered as 500.
//  - TLS (options.tls set): every connection starts with a TLS handshake (server certificate of
//    tls->current() at accept time, so a reloaded certificate serves new connections while
//    established ones keep theirs; client certificates verified when the context asks for them).
//    The handshake counts against the first request's header_read_timeout and the connection ranks
//    as idle for eviction until it completes; a failed handshake (a plaintext client, no valid
//    client certificate) closes the connection without an answer, and so does a refusal at
//    max_connections (no plaintext 503). Everything else is the same on both.
//  - Thread safety: Start/StopAccepting/Stop/WaitIdle are called from one controlling thread;
//    port() and the counters from any thread. Stop() blocks until the I/O threads exit.
//
// Implementation details follow in http_server.cc: one io_context, `io_threads` threads, one strand
// per connection; no thread is created per request.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cancellation_flag.h"
#include "common/error.h"

namespace tide::tls {
class ServerTlsContext;
}

namespace tide::http {

struct Request {
  std::string method;                 // "GET", "POST", ... as sent
  std::string target;                 // origin-form request-target: "/v1/rerank?x=1" (an
                                      // absolute-form target reduced to its path and query)
  std::string path;                   // target before '?', not percent-decoded
  std::string query;                  // target after '?', without it; "" if none
  int version = 11;                   // 10 for HTTP/1.0, 11 for HTTP/1.1
  std::vector<std::pair<std::string, std::string>> headers;  // in arrival order
  std::string body;                   // de-chunked
  std::shared_ptr<CancellationFlag> client_gone;  // never null when built by the server
  std::chrono::steady_clock::time_point received_at;  // first byte of the request arrived
  std::string remote_address;         // "ip:port"

  // First value of the header `name` (case-insensitive), or "" when absent.
  std::string_view header(std::string_view name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";  // empty: no Content-Type header
  // Extra headers. Control characters (CR, LF, NUL, ...) are dropped from values and from
  // content_type; a header whose name is not an RFC 9110 token is not sent.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

namespace internal {
// Where a Responder delivers its response. Implemented by the server's connections and by
// Responder::FromCallback.
class ResponseSink {
 public:
  virtual ~ResponseSink() = default;
  virtual void Complete(uint64_t request_id, Response response) = 0;
};
}  // namespace internal

// Move-only, call-once completion of one request. Safe to call from any thread.
class Responder {
 public:
  Responder() = default;
  Responder(std::shared_ptr<internal::ResponseSink> sink, uint64_t request_id)
      : sink_(std::move(sink)), request_id_(request_id) {}
  Responder(Responder&& other) noexcept = default;
  Responder& operator=(Responder&& other) noexcept;
  Responder(const Responder&) = delete;
  Responder& operator=(const Responder&) = delete;
  ~Responder();

  // Delivers the response. Calling an empty (moved-from or already used) Responder does nothing.
  void operator()(Response response) &&;
  explicit operator bool() const { return sink_ != nullptr; }

  // A Responder that hands the response to `callback` (for tests and in-process callers). If it is
  // destroyed uncalled, `callback` receives the 500 "request dropped" response.
  static Responder FromCallback(absl::AnyInvocable<void(Response)> callback);

 private:
  std::shared_ptr<internal::ResponseSink> sink_;
  uint64_t request_id_ = 0;
};

class Handler {
 public:
  virtual ~Handler() = default;
  virtual void Handle(Request request, Responder respond) = 0;
};

// What the server did at max_connections (HttpServerOptions::on_connection_limit).
enum class ConnectionLimitAction { kEvicted, kRefused };

struct HttpServerOptions {
  std::string host = "127.0.0.1";       // address to bind; "0.0.0.0" for all interfaces
  uint16_t port = 8000;                 // 0 = ephemeral (read it back with port())
  int io_threads = 2;                   // threads running the I/O loop (parsing, writing)
  // EEVDF time slice the I/O threads ask for (this_thread::RequestShortTimeSlice): woken by a
  // client, they preempt a compute thread at once. 0 keeps the kernel's default slice.
  std::chrono::microseconds io_time_slice{100};
  size_t max_header_bytes = 16 * 1024;  // request line + headers; over it: 431
  size_t max_body_bytes = 8 * 1024 * 1024;  // decoded body; over it: 413
  // From the first byte of a request to the end of its headers; over it: 408. For a connection's
  // first request it counts from accept (a connection that sends nothing is closed silently).
  std::chrono::milliseconds header_read_timeout{10000};
  // From the end of the headers to the end of the body; over it: 408.
  std::chrono::milliseconds body_read_timeout{30000};
  // Keep-alive connection that completed a request, with no request in flight and no bytes
  // arriving: closed silently. Also bounds how long one response write may take.
  std::chrono::milliseconds idle_timeout{60000};
  // Open connections. At the cap a new connection evicts an idle or still-reading one (see the
  // contract above) and is refused with 503 only when every connection has a request in flight.
  size_t max_connections = 1024;
  // Called (on an I/O thread; must be quick and thread-safe) for each connection evicted or
  // refused at max_connections, e.g. to count it in a metric. Empty: not called.
  std::function<void(ConnectionLimitAction)> on_connection_limit;
  // Serve HTTPS with this context (tls/tls_context.h; shared with the caller, who reloads it).
  // Null: plaintext HTTP.
  std::shared_ptr<tls::ServerTlsContext> tls;
};

// Requests read ahead on one connection while earlier ones still wait for their responses.
inline constexpr size_t kMaxPipelinedRequests = 16;
// Unparsed bytes read ahead on a connection whose parsing is paused by kMaxPipelinedRequests.
inline constexpr size_t kPausedReadBytes = 64 * 1024;

namespace internal {
// Serves one already-connected stream socket `fd` (for example one end of socketpair(2)) with the
// connection code HttpServer uses for every accepted client: the same parser, header and body
// limits, timeouts, pipelining, 100-continue, framing and error answers. The I/O loop runs on the
// calling thread, and the call returns once the connection is closed and every Responder handed
// out for it has been called or destroyed (a Responder kept forever keeps it waiting, as it keeps
// an accepted connection open). Takes ownership of `fd` (closed on every path). For the HTTP fuzz
// target (fuzz/http_fuzz.cc) and tests: byte streams in, without a listening socket or threads.
// INVALID_ARGUMENT for unusable options, a null handler or a descriptor asio cannot adopt.
absl::Status ServeConnectedSocket(const HttpServerOptions& options, Handler* handler, int fd);
}  // namespace internal

class HttpServer {
 public:
  // INVALID_ARGUMENT for unusable options or a null handler. Binds nothing yet.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Create(const HttpServerOptions& options,
                                                            Handler* handler);
  ~HttpServer();  // Stop()s

  // Binds, listens and starts the I/O threads. UNAVAILABLE when the address cannot be bound,
  // FAILED_PRECONDITION when called twice.
  absl::Status Start();
  // The bound port (the ephemeral one when options.port was 0); 0 before Start().
  uint16_t port() const;
  // Closes the listening socket; open connections keep being served (graceful drain: call this,
  // wait for active_requests() to reach 0, then Stop()).
  void StopAccepting();
  // Closes every connection (responses not yet written are dropped, their client_gone set) and
  // joins the I/O threads. Idempotent.
  void Stop();
  // Requests handed to the Handler whose Responder has not been called or destroyed yet.
  size_t active_requests() const;
  // Open client connections.
  size_t active_connections() const;
  // Connections closed to make room for a new one at max_connections, and new connections refused
  // (503) because every open one had a request in flight. Since Start().
  uint64_t evicted_connections() const;
  uint64_t refused_connections() const;
  // Waits until no request is in flight and every response handed to a Responder has been written
  // (or dropped because its client left), or until `deadline`. True when idle.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline) const;

  struct Core;  // implementation, defined in http_server.cc

 private:
  explicit HttpServer(std::shared_ptr<Core> core);
  std::shared_ptr<Core> core_;
};

}  // namespace tide::http
