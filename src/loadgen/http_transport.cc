#include "loadgen/http_transport.h"

#include <optional>

#include <boost/asio/connect.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/this_thread.h"
#include "tls/tls_context.h"

namespace tide::loadgen {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

absl::StatusOr<HttpUrl> ParseHttpUrl(std::string_view std_url) {
  const absl::string_view url(std_url.data(), std_url.size());
  absl::string_view rest = url;
  HttpUrl out;
  if (absl::ConsumePrefix(&rest, "https://")) {
    out.tls = true;
    out.port = 443;
  } else if (!absl::ConsumePrefix(&rest, "http://")) {
    return absl::InvalidArgumentError(absl::StrCat("URL '", url, "' must start with http:// or https://"));
  }
  size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  if (slash != absl::string_view::npos && rest.substr(slash) != "/") out.path = std::string(rest.substr(slash));
  size_t colon = authority.rfind(':');
  if (colon != absl::string_view::npos) {
    uint32_t port = 0;
    if (!absl::SimpleAtoi(authority.substr(colon + 1), &port) || port == 0 || port > 65535)
      return absl::InvalidArgumentError(absl::StrCat("URL '", url, "' has a bad port"));
    out.port = static_cast<uint16_t>(port);
    authority = authority.substr(0, colon);
  }
  if (authority.empty()) return absl::InvalidArgumentError(absl::StrCat("URL '", url, "' has no host"));
  out.host = std::string(authority);
  return out;
}

int64_t AsioEventLoop::Now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_)
      .count();
}

void AsioEventLoop::RunAt(int64_t time_ns, std::function<void()> fn) {
  auto timer = std::make_shared<asio::steady_timer>(io_, start_ + std::chrono::nanoseconds(time_ns));
  timer->async_wait([timer, fn = std::move(fn)](const boost::system::error_code& ec) {
    if (!ec) fn();
  });
}

void AsioEventLoop::Run() {
  // The loop wakes for every send time and every answer: it should preempt the server's compute
  // threads at once, or its own wake-up delay would show up as server latency.
  this_thread::RequestShortTimeSlice(std::chrono::microseconds(100));
  io_.restart();
  io_.run();
}

struct HttpTransport::Connection {
  explicit Connection(asio::io_context& io) : socket(io), timer(io) {}
  // Runs fn(stream) on the TLS stream when there is one, else on the socket.
  template <typename Fn>
  void With(Fn&& fn) {
    if (tls_stream) {
      fn(*tls_stream);
    } else {
      fn(socket);
    }
  }
  void Close() {
    boost::system::error_code ignored;
    socket.close(ignored);
    // Destroyed later, not here: this may run inside a completion handler of the stream itself.
    if (tls_stream) asio::post(socket.get_executor(), [old = std::move(tls_stream)] {});
    connected = false;
  }
  tcp::socket socket;
  std::shared_ptr<asio::ssl::stream<tcp::socket&>> tls_stream;  // over `socket` while connected with TLS
  asio::steady_timer timer;
  beast::flat_buffer buffer;
  std::optional<http::response_parser<http::string_body>> parser;
  bool connected = false;
  bool reused = false;     // this request went out on a connection that had served another
  bool timed_out = false;
  uint64_t generation = 0;  // bumped per request so that stale timer/IO handlers do nothing
  Pending request;
};

absl::StatusOr<std::unique_ptr<HttpTransport>> HttpTransport::Create(
    AsioEventLoop* loop, const HttpTransportOptions& options) {
  if (options.bodies.empty()) return absl::InvalidArgumentError("no request bodies");
  if (options.max_connections == 0) return absl::InvalidArgumentError("max_connections must be >= 1");
  std::unique_ptr<HttpTransport> t(new HttpTransport(loop, options));
  boost::system::error_code ec;
  tcp::resolver resolver(loop->io());
  auto results = resolver.resolve(options.host, std::to_string(options.port), ec);
  if (ec || results.empty())
    return absl::UnavailableError(absl::StrCat("cannot resolve ", options.host, ": ", ec.message()));
  for (const auto& r : results) t->endpoints_.push_back(r.endpoint());
  const std::string host_header = absl::StrCat(options.host, ":", options.port);
  t->raw_requests_.reserve(options.bodies.size());
  for (const std::string& body : options.bodies) {
    t->raw_requests_.push_back(absl::StrCat(options.method, " ", options.path, " HTTP/1.1\r\nHost: ",
                                            host_header, "\r\nContent-Type: ", options.content_type,
                                            "\r\nContent-Length: ", body.size(),
                                            options.connection_close ? "\r\nConnection: close" : "",
                                            "\r\nUser-Agent: tide-bench\r\n\r\n", body));
  }
  return t;
}

HttpTransport::~HttpTransport() {
  for (auto& c : all_) {
    boost::system::error_code ec;
    c->timer.cancel();
    c->socket.close(ec);
  }
}

void HttpTransport::Send(size_t index, std::function<void(const TransportResult&)> done) {
  Pending request{index, std::move(done)};
  if (!idle_.empty()) {
    std::shared_ptr<Connection> conn = std::move(idle_.back());
    idle_.pop_back();
    Start(conn, std::move(request), false);
  } else if (all_.size() < options_.max_connections) {
    all_.push_back(std::make_shared<Connection>(loop_->io()));
    Start(all_.back(), std::move(request), false);
  } else {
    pending_.push_back(std::move(request));
  }
}

void HttpTransport::Start(const std::shared_ptr<Connection>& conn, Pending request, bool retry) {
  const uint64_t gen = ++conn->generation;
  if (!retry) {
    conn->request = std::move(request);
    conn->timed_out = false;
    conn->timer.expires_after(std::chrono::milliseconds(options_.timeout_ms));
    conn->timer.async_wait([this, conn, gen](const boost::system::error_code& ec) {
      if (ec || conn->generation != gen) return;
      conn->timed_out = true;
      boost::system::error_code ignored;
      conn->socket.close(ignored);  // the pending operation fails and reports the timeout
    });
  } else {
    // A retry keeps the original deadline; re-arm the timer for the new generation.
    conn->timer.async_wait([this, conn, gen](const boost::system::error_code& ec) {
      if (ec || conn->generation != gen) return;
      conn->timed_out = true;
      boost::system::error_code ignored;
      conn->socket.close(ignored);
    });
  }
  conn->reused = conn->connected;
  if (conn->connected) {
    Write(conn, gen);
  } else {
    Connect(conn, gen);
  }
}

void HttpTransport::Connect(const std::shared_ptr<Connection>& conn, uint64_t gen) {
  asio::async_connect(conn->socket, endpoints_,
                      [this, conn, gen](const boost::system::error_code& ec, const tcp::endpoint&) {
                        if (conn->generation != gen) return;
                        if (ec) return Fail(conn, gen, absl::StrCat("connect: ", ec.message()), false);
                        conn->connected = true;
                        boost::system::error_code ignored;
                        conn->socket.set_option(tcp::no_delay(true), ignored);
                        conn->buffer.clear();
                        if (options_.tls) return Handshake(conn, gen);
                        Write(conn, gen);
                      });
}

void HttpTransport::Handshake(const std::shared_ptr<Connection>& conn, uint64_t gen) {
  conn->tls_stream = std::make_shared<asio::ssl::stream<tcp::socket&>>(conn->socket, *options_.tls);
  if (absl::Status s = tls::SetClientHostName(conn->tls_stream->native_handle(), options_.host, options_.tls_verify);
      !s.ok()) {
    return Fail(conn, gen, absl::StrCat("tls: ", s.message()), false);
  }
  conn->tls_stream->async_handshake(asio::ssl::stream_base::client,
                                    [this, conn, gen](const boost::system::error_code& ec) {
                                      if (conn->generation != gen) return;
                                      if (ec) return Fail(conn, gen, absl::StrCat("tls: ", ec.message()), false);
                                      Write(conn, gen);
                                    });
}

void HttpTransport::Write(const std::shared_ptr<Connection>& conn, uint64_t gen) {
  const std::string& raw = raw_requests_[conn->request.index % raw_requests_.size()];
  conn->With([&](auto& stream) {
    asio::async_write(stream, asio::buffer(raw), [this, conn, gen](const boost::system::error_code& ec, size_t) {
      if (conn->generation != gen) return;
      if (ec) return Fail(conn, gen, absl::StrCat("io: ", ec.message()), true);
      Read(conn, gen);
    });
  });
}

void HttpTransport::Read(const std::shared_ptr<Connection>& conn, uint64_t gen) {
  conn->parser.emplace();
  conn->parser->body_limit(std::uint64_t{1} << 30);
  conn->With([&](auto& stream) {
  http::async_read(stream, conn->buffer, *conn->parser,
                   [this, conn, gen](const boost::system::error_code& ec, size_t bytes) {
                     if (conn->generation != gen) return;
                     if (ec) {
                       const bool nothing_read = !conn->parser->got_some();
                       return Fail(conn, gen, absl::StrCat("io: ", ec.message()), nothing_read);
                     }
                     conn->timer.cancel();
                     const auto& res = conn->parser->get();
                     TransportResult result;
                     result.http_status = static_cast<int>(res.result_int());
                     result.response_bytes = bytes;
                     if (!res.keep_alive()) conn->Close();
                     Complete(conn, std::move(result));
                   });
  });
}

void HttpTransport::Fail(const std::shared_ptr<Connection>& conn, uint64_t gen, std::string error,
                         bool retryable) {
  conn->Close();
  conn->buffer.clear();
  if (!conn->timed_out && retryable && conn->reused) {
    // The server closed an idle keep-alive connection before this request reached it.
    Start(conn, Pending{}, /*retry=*/true);
    return;
  }
  conn->timer.cancel();
  TransportResult result;
  result.error = conn->timed_out ? std::string("timeout") : std::move(error);
  Complete(conn, std::move(result));
}

void HttpTransport::Complete(const std::shared_ptr<Connection>& conn, TransportResult result) {
  ++conn->generation;  // no handler of this request may act any more
  std::function<void(const TransportResult&)> done = std::move(conn->request.done);
  if (!pending_.empty()) {
    Pending next = std::move(pending_.front());
    pending_.pop_front();
    Start(conn, std::move(next), false);
  } else {
    idle_.push_back(conn);
  }
  if (done) done(result);
}

absl::StatusOr<std::string> HttpGet(const std::string& host, uint16_t port, const std::string& target,
                                    std::chrono::milliseconds timeout, std::shared_ptr<asio::ssl::context> tls) {
  asio::io_context io;
  beast::tcp_stream stream(io);
  // Over TLS: the same exchange on a TLS stream over `stream` (whose timeout still applies).
  std::optional<asio::ssl::stream<beast::tcp_stream&>> tls_stream;
  if (tls) tls_stream.emplace(stream, *tls);
  beast::flat_buffer buffer;
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, absl::StrCat(host, ":", port));
  req.set(http::field::user_agent, "tide-bench");
  http::response<http::string_body> res;
  boost::system::error_code result_ec;
  tcp::resolver resolver(io);
  boost::system::error_code ec;
  auto endpoints = resolver.resolve(host, std::to_string(port), ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", ec.message()));
  stream.expires_after(timeout);
  auto exchange = [&](auto& s) {
    http::async_write(s, req, [&](const boost::system::error_code& e2, size_t) {
      if (e2) {
        result_ec = e2;
        return;
      }
      http::async_read(s, buffer, res, [&](const boost::system::error_code& e3, size_t) { result_ec = e3; });
    });
  };
  stream.async_connect(endpoints, [&](const boost::system::error_code& e, const tcp::endpoint&) {
    if (e) {
      result_ec = e;
      return;
    }
    if (!tls_stream) return exchange(stream);
    (void)tls::SetClientHostName(tls_stream->native_handle(), host, /*verify=*/false);
    tls_stream->async_handshake(asio::ssl::stream_base::client, [&](const boost::system::error_code& e1) {
      if (e1) {
        result_ec = e1;
        return;
      }
      exchange(*tls_stream);
    });
  });
  io.run();
  if (result_ec == beast::error::timeout)
    return absl::DeadlineExceededError(absl::StrCat("GET ", target, " timed out"));
  if (result_ec) return absl::UnavailableError(absl::StrCat("GET ", target, ": ", result_ec.message()));
  if (res.result_int() < 200 || res.result_int() >= 300)
    return absl::InternalError(absl::StrCat("GET ", target, " answered ", res.result_int()));
  return std::move(res.body());
}

}  // namespace tide::loadgen
