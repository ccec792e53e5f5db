// tide::http::internal::ConnectionStream — the byte stream of one HTTP connection: a TCP socket,
// or TLS over one (HttpServerOptions::tls). One type with one set of operations, so that the
// connection state machine (http_connection.h) is written once for both; an operation costs a
// branch on the variant.
//
// Contract: internal to server/http (Boost.Asio types; included by .cc files of this folder only).
// Not thread-safe: used on its connection's strand.
#pragma once

#include <memory>
#include <utility>
#include <variant>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>

namespace tide::http::internal {

class ConnectionStream {
 public:
  using tcp = boost::asio::ip::tcp;

  explicit ConnectionStream(tcp::socket socket) : stream_(std::in_place_type<tcp::socket>, std::move(socket)) {}
  // `context` is the server's current TLS context, taken at accept: a certificate reloaded later
  // serves the connections accepted after the reload.
  ConnectionStream(tcp::socket socket, std::shared_ptr<boost::asio::ssl::context> context)
      : context_(std::move(context)), stream_(std::in_place_type<TlsStream>, std::move(socket), *context_) {}

  bool tls() const { return context_ != nullptr; }
  // The TCP socket underneath (shutdown, close, cancel, addresses).
  tcp::socket& socket() {
    if (TlsStream* tls = std::get_if<TlsStream>(&stream_)) return tls->next_layer();
    return std::get<tcp::socket>(stream_);
  }
  // Runs fn(stream) on the stream itself (tcp::socket& or ssl::stream<tcp::socket>&), to start a
  // read or a write on it.
  template <typename Fn>
  void With(Fn&& fn) {
    std::visit(std::forward<Fn>(fn), stream_);
  }
  // TLS only: the server side of the handshake.
  template <typename Handler>
  void AsyncHandshake(Handler&& handler) {
    std::get<TlsStream>(stream_).async_handshake(boost::asio::ssl::stream_base::server,
                                                 std::forward<Handler>(handler));
  }

 private:
  using TlsStream = boost::asio::ssl::stream<tcp::socket>;
  std::shared_ptr<boost::asio::ssl::context> context_;  // before stream_: outlives it
  std::variant<tcp::socket, TlsStream> stream_;
};

}  // namespace tide::http::internal
