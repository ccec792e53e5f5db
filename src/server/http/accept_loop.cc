#include "server/http/accept_loop.h"

#include <string>
#include <utility>

#include <sys/socket.h>

#include "server/http/connection_policy.h"
#include "server/http/error_response.h"
#include "server/http/http_connection.h"
#include "server/http/response_serializer.h"

namespace tide::http::internal {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

// Picks the connection to close for a new one and marks it as being evicted. False when every
// connection has a request in flight (or is already being evicted). *victim stays null when the
// chosen one is being destroyed (its place is free already).
bool ChooseEvictionVictim(HttpServer::Core& core, std::shared_ptr<HttpConnection>* victim) {
  absl::MutexLock lock(&core.mu);
  EvictionChooser chooser;
  std::weak_ptr<HttpConnection>* chosen = nullptr;
  for (auto& [raw, weak] : core.connections) {
    // An entry is erased (under mu) by the destructor, so `raw` is alive while listed.
    if (chooser.Offer(raw->eviction_candidate())) chosen = &weak;
  }
  if (!chooser.found()) return false;
  *victim = chosen->lock();
  if (*victim != nullptr) (*victim)->MarkEvicting();
  return true;
}

// Answers a connection refused at max_connections and closes it. Best effort: the answer is sent
// without waiting (it fits any socket buffer). A TLS listener closes without an answer: a
// plaintext 503 means nothing to a client that is about to start a handshake.
void RefuseConnection(tcp::socket& socket, bool tls) {
  static const std::string* const kRefused = [] {
    const Response response = ServerErrorResponse(
        ErrorKind::kUnavailable, "server at connection limit: every connection has a request in flight");
    return new std::string(SerializeResponse(response, ResponseFraming{.version = 11, .keep_alive = false}));
  }();
  if (!tls) (void)::send(socket.native_handle(), kRefused->data(), kRefused->size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  boost::system::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_send, ignored);
  socket.close(ignored);
}

// Makes room for a new connection at max_connections. False: refuse it.
bool MakeRoom(HttpServer::Core& core) {
  std::shared_ptr<HttpConnection> victim;
  if (!ChooseEvictionVictim(core, &victim)) {
    core.refused_connections.fetch_add(1);
    if (core.options.on_connection_limit) core.options.on_connection_limit(ConnectionLimitAction::kRefused);
    return false;
  }
  core.evicted_connections.fetch_add(1);
  if (core.options.on_connection_limit) core.options.on_connection_limit(ConnectionLimitAction::kEvicted);
  if (victim != nullptr) net::post(victim->executor(), [victim] { victim->Evict(); });
  return true;
}

void OnAccept(std::shared_ptr<HttpServer::Core> core, boost::system::error_code ec, tcp::socket socket) {
  if (!core->acceptor.is_open()) return;
  if (ec) {
    if (ec == net::error::operation_aborted) return;
    // E.g. EMFILE: retrying at once would spin while no descriptor is free.
    auto timer = std::make_shared<net::steady_timer>(core->accept_strand, std::chrono::milliseconds(10));
    timer->async_wait([timer, core = std::move(core)](boost::system::error_code) mutable {
      if (core->acceptor.is_open()) StartAccepting(std::move(core));
    });
    return;
  }
  if (AtConnectionCap(core->active_connections.load(), core->options.max_connections) && !MakeRoom(*core)) {
    RefuseConnection(socket, core->options.tls != nullptr);
    StartAccepting(std::move(core));
    return;
  }
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  auto connection = std::make_shared<HttpConnection>(core, std::move(socket));
  {
    absl::MutexLock lock(&core->mu);
    if (core->stopping) return;
    core->connections.emplace(connection.get(), connection);
  }
  net::post(connection->executor(), [connection] { connection->Start(); });
  StartAccepting(std::move(core));
}

}  // namespace

void StartAccepting(std::shared_ptr<HttpServer::Core> core) {
  HttpServer::Core* raw = core.get();
  raw->acceptor.async_accept(net::make_strand(raw->ioc),
                             [core = std::move(core)](boost::system::error_code ec, tcp::socket socket) mutable {
                               OnAccept(std::move(core), ec, std::move(socket));
                             });
}

}  // namespace tide::http::internal
