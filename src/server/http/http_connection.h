// tide::http::internal::HttpConnection — the state machine of one client connection: Beast's
// asynchronous reads and writes drive it through TLS handshake, waiting, reading a head, reading a
// body, handing the request to the Handler, writing responses in request order, and lingering
// before the close. Every decision about time and limits is the ConnectionPolicy's
// (connection_policy.h); request heads are checked by request_head.h and responses framed by
// response_serializer.h; this class only turns socket events into policy questions and answers
// into socket operations.
//
// Contract: internal to server/http (Boost.Asio types; included by .cc files of this folder only).
//  - Created by the accept loop (or internal::ServeConnectedSocket), listed in Core::connections,
//    then Start()ed on its executor. Owned by shared_ptr: the callbacks in flight and the
//    Responders handed out keep it alive; the destructor unlists it.
//  - Thread safety: every method runs on the connection's strand (executor()) except Complete()
//    (any thread: posts to the strand) and the eviction accessors (tier, tier_since, evicting,
//    MarkEvicting: any thread, read by the accept loop under Core::mu).
//  - Plaintext and TLS connections are the same class over a ConnectionStream.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/cancellation_flag.h"
#include "common/error.h"
#include "server/http/connection_policy.h"
#include "server/http/connection_stream.h"
#include "server/http/http_server.h"
#include "server/http/response_serializer.h"
#include "server/http/server_core.h"

namespace tide::http::internal {

class HttpConnection final : public ResponseSink, public std::enable_shared_from_this<HttpConnection> {
 public:
  HttpConnection(std::shared_ptr<HttpServer::Core> core, boost::asio::ip::tcp::socket socket);
  ~HttpConnection() override;

  boost::asio::any_io_executor executor() { return stream_.socket().get_executor(); }

  // Eviction state, for the accept loop (any thread, under Core::mu).
  EvictionCandidate eviction_candidate() const;
  // Marks it chosen for eviction (until Evict declines).
  void MarkEvicting() { evicting_.store(true); }

  // Starts the TLS handshake or the first read.
  void Start();
  // Closes the connection to make room for a new one, unless it got a request in flight since it
  // was chosen (then it stays, and the server is over its cap by one until a connection closes).
  void Evict();
  // Closes the socket; responses still owed are dropped and their client_gone set.
  void Close();

  // Any thread: a Responder's response for request `request_id`.
  void Complete(uint64_t request_id, Response response) override;

 private:
  using tcp = boost::asio::ip::tcp;
  using error_code = boost::system::error_code;

  // One response position on this connection, in request order.
  struct Slot {
    uint64_t id = 0;
    bool ready = false;
    bool close_after = false;
    ResponseFraming framing;
    std::string bytes;
    std::shared_ptr<CancellationFlag> client_gone;
    bool counted = false;  // a Responder's response, counted in Core::unwritten_responses
  };

  // Publishes the eviction tier (and since when it holds) for the accept loop. Called after every
  // state change.
  void Publish();
  void DiscardSlots();
  void ArmIdleTimer();
  void OnHandshake(error_code ec);
  void StartRead();
  void OnIdleRead(error_code ec, size_t n);
  void PausedRead();
  void OnPausedRead(error_code ec, size_t n);
  void ReadHeader();
  void OnHeader(error_code ec);
  void OnBody(error_code ec);
  void OnReadError(error_code ec);
  // The server's own answer; the connection closes after it.
  void RespondAndClose(const ServerAnswer& answer);
  void OnPeerGone();
  void Dispatch();
  void OnComplete(uint64_t request_id, Response response);
  void TryWrite();
  void OnWrite(error_code ec);
  void LingeringClose();
  void DiscardRead();
  void ArmReadTimerAt(ConnectionPolicy::time_point deadline);
  void CancelReadTimer();
  void OnReadTimer(error_code ec, uint64_t generation);
  void ArmWriteTimer();

  std::shared_ptr<HttpServer::Core> core_;
  ConnectionStream stream_;
  ConnectionPolicy policy_;
  boost::asio::steady_timer read_timer_;
  boost::asio::steady_timer write_timer_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::deque<Slot> slots_;
  std::string write_buffer_;
  std::array<char, kReadChunk> discard_buffer_;
  std::string remote_address_;
  ConnectionPolicy::time_point received_at_;
  // The policy's tier and tier_since, published for the accept loop.
  std::atomic<EvictionTier> tier_{EvictionTier::kIdle};
  std::atomic<int64_t> tier_since_ticks_{0};
  std::atomic<bool> evicting_{false};
  size_t write_counted_ = 0;  // counted responses in the write in flight
  uint64_t next_id_ = 0;
  uint64_t read_timer_gen_ = 0;
  uint64_t write_timer_gen_ = 0;
  bool reading_ = false;      // a read of ours is outstanding
  bool paused_read_ = false;  // that read is PausedRead's read-ahead
  bool writing_ = false;      // a write of ours is outstanding
  bool read_closed_ = false;  // no further requests will be read on this connection
  bool close_after_write_ = false;
  bool timed_out_ = false;
  bool closed_ = false;
};

}  // namespace tide::http::internal
