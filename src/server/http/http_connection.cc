#include "server/http/http_connection.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <limits>
#include <utility>

#include <sys/socket.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/ascii.h"
#include "common/error_echo.h"
#include "server/http/content_encoding.h"
#include "server/http/error_response.h"
#include "server/http/request_head.h"
#include "server/http/response_serializer.h"
#include "tls/tls_context.h"

namespace tide::http::internal {
namespace {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

std::string_view ToStd(boost::beast::string_view s) { return std::string_view(s.data(), s.size()); }

ConnectionStream MakeStream(const HttpServerOptions& options, tcp::socket socket) {
  if (options.tls) return ConnectionStream(std::move(socket), options.tls->current());
  return ConnectionStream(std::move(socket));
}

// The policy's words for a failed read of Beast's.
ReadFailure ReadFailureOf(boost::system::error_code ec) {
  if (ec == bhttp::error::header_limit) return ReadFailure::kHeaderLimit;
  if (ec == bhttp::error::body_limit) return ReadFailure::kBodyLimit;
  if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
      ec.category() != bhttp::make_error_code(bhttp::error::bad_method).category()) {
    return ReadFailure::kClosedByPeer;
  }
  return ReadFailure::kMalformed;
}

}  // namespace

HttpConnection::HttpConnection(std::shared_ptr<HttpServer::Core> core, tcp::socket socket)
    : core_(std::move(core)),
      stream_(MakeStream(core_->options, std::move(socket))),
      policy_(ConnectionLimits::Of(core_->options), core_->clock),
      read_timer_(stream_.socket().get_executor()),
      write_timer_(stream_.socket().get_executor()) {
  tier_since_ticks_.store(policy_.tier_since().time_since_epoch().count());
  boost::system::error_code ec;
  const tcp::endpoint remote = stream_.socket().remote_endpoint(ec);
  // A socketpair end (internal::ServeConnectedSocket) has no IP peer address.
  const int family = ec ? AF_UNSPEC : remote.data()->sa_family;
  if (family == AF_INET || family == AF_INET6) {
    remote_address_ = absl::StrCat(remote.address().to_string(), ":", remote.port());
  }
  core_->active_connections.fetch_add(1);
}

HttpConnection::~HttpConnection() {
  if (!closed_) core_->active_connections.fetch_sub(1);
  absl::MutexLock lock(&core_->mu);
  core_->connections.erase(this);
}

EvictionCandidate HttpConnection::eviction_candidate() const {
  EvictionCandidate candidate;
  candidate.tier = tier_.load(std::memory_order_acquire);
  candidate.tier_since = Clock::time_point(Clock::duration(tier_since_ticks_.load(std::memory_order_relaxed)));
  candidate.evicting = evicting_.load();
  return candidate;
}

void HttpConnection::Start() {
  if (closed_) return;
  if (stream_.tls()) {
    // The handshake counts against the first request's header deadline, and the connection ranks
    // as idle for eviction until it completes: a client that connects and never finishes its
    // handshake is closed like a silent plaintext one.
    policy_.set_phase(ConnectionPhase::kHandshake);
    ArmReadTimerAt(policy_.HandshakeDeadline());
    stream_.AsyncHandshake([self = shared_from_this()](error_code ec) { self->OnHandshake(ec); });
    Publish();
    return;
  }
  StartRead();
  Publish();
}

void HttpConnection::Evict() {
  if (closed_) return;
  if (!ConnectionPolicy::GivesWay(policy_.Tier(closed_, slots_.size(), writing_))) {
    evicting_.store(false);
    return;
  }
  Close();
}

void HttpConnection::Close() {
  if (closed_) return;
  closed_ = true;
  Publish();
  core_->active_connections.fetch_sub(1);
  DiscardSlots();
  boost::system::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
  read_timer_.cancel();
  write_timer_.cancel();
}

void HttpConnection::Complete(uint64_t request_id, Response response) {
  core_->unwritten_responses.fetch_add(1);  // before active_requests drops: WaitIdle sees one
  core_->active_requests.fetch_sub(1);
  absl::ReaderMutexLock lock(&core_->mu);
  if (core_->stopping) {  // the I/O threads may already be gone
    core_->unwritten_responses.fetch_sub(1);
    return;
  }
  net::post(executor(), [self = shared_from_this(), request_id, response = std::move(response)]() mutable {
    self->OnComplete(request_id, std::move(response));
  });
}

void HttpConnection::Publish() {
  if (!policy_.UpdateTier(policy_.Tier(closed_, slots_.size(), writing_))) return;
  tier_since_ticks_.store(policy_.tier_since().time_since_epoch().count(), std::memory_order_relaxed);
  tier_.store(policy_.tier(), std::memory_order_release);
}

// Drops every response position (the connection closes): their clients are gone.
void HttpConnection::DiscardSlots() {
  for (Slot& slot : slots_) {
    if (slot.client_gone) slot.client_gone->Cancel();
    if (slot.counted) core_->unwritten_responses.fetch_sub(1);
  }
  slots_.clear();
}

void HttpConnection::ArmIdleTimer() { ArmReadTimerAt(policy_.IdleDeadline()); }

void HttpConnection::OnHandshake(error_code ec) {
  if (closed_) return;
  CancelReadTimer();
  policy_.set_phase(ConnectionPhase::kNone);
  if (ec) {  // not TLS (plaintext HTTP), no acceptable certificate (mTLS), timeout: nothing to answer
    Close();
    return;
  }
  StartRead();
  Publish();
}

void HttpConnection::StartRead() {
  if (closed_ || read_closed_ || reading_) return;
  if (!policy_.MayParse(slots_.size())) {  // parsing resumes when responses drain
    PausedRead();
    return;
  }
  reading_ = true;
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(
      std::min<size_t>(policy_.limits().max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
  parser_->body_limit(static_cast<std::uint64_t>(policy_.limits().max_body_bytes));
  if (buffer_.size() > 0) {  // a pipelined request is already here
    received_at_ = core_->clock->Now();
    ReadHeader();
    return;
  }
  policy_.set_phase(ConnectionPhase::kIdle);
  if (slots_.empty() && !writing_) ArmIdleTimer();
  stream_.With([&](auto& stream) {
    stream.async_read_some(buffer_.prepare(kReadChunk), [self = shared_from_this()](error_code ec, size_t n) {
      self->OnIdleRead(ec, n);
    });
  });
}

void HttpConnection::OnIdleRead(error_code ec, size_t n) {
  if (closed_) return;
  CancelReadTimer();
  if (ec) {
    reading_ = false;
    if (timed_out_) {
      Close();  // idle keep-alive connection
    } else {
      OnPeerGone();
    }
    return;
  }
  buffer_.commit(n);
  received_at_ = core_->clock->Now();
  ReadHeader();
}

// While parsing is paused, reads on without parsing (up to the policy's read-ahead), so that the
// client closing the connection is seen at once and its requests' client_gone set. OnWrite cancels
// this read when a slot frees up, and parsing resumes.
void HttpConnection::PausedRead() {
  const size_t ahead = policy_.ReadAheadBytes(buffer_.size());
  if (ahead == 0) return;  // a disconnect is seen at the next write
  reading_ = true;
  paused_read_ = true;
  policy_.set_phase(ConnectionPhase::kPaused);
  stream_.With([&](auto& stream) {
    stream.async_read_some(buffer_.prepare(ahead), [self = shared_from_this()](error_code ec, size_t n) {
      self->OnPausedRead(ec, n);
    });
  });
}

void HttpConnection::OnPausedRead(error_code ec, size_t n) {
  if (closed_) return;
  reading_ = false;
  paused_read_ = false;
  if (policy_.phase() == ConnectionPhase::kLinger) {  // the last response went out meanwhile
    if (ec && ec != net::error::operation_aborted) {
      Close();
    } else {
      DiscardRead();
    }
    return;
  }
  policy_.set_phase(ConnectionPhase::kNone);
  if (ec == net::error::operation_aborted) {  // cancelled by OnWrite: a slot is free again
    StartRead();
    Publish();
    return;
  }
  if (ec) {  // FIN or RST while requests are in flight
    OnPeerGone();
    return;
  }
  buffer_.commit(n);
  StartRead();
  Publish();
}

void HttpConnection::ReadHeader() {
  policy_.set_phase(ConnectionPhase::kHeader);
  ArmReadTimerAt(policy_.HeaderDeadline());
  Publish();
  stream_.With([&](auto& stream) {
    bhttp::async_read_header(stream, buffer_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
      self->OnHeader(ec);
    });
  });
}

void HttpConnection::OnHeader(error_code ec) {
  if (closed_) return;
  CancelReadTimer();
  if (ec) {
    OnReadError(ec);
    return;
  }
  const auto& message = parser_->get();
  RequestHeadCheck check;
  for (const auto& field : message) check.AddField(ToStd(field.name_string()), ToStd(field.value()));
  if (std::optional<HeadError> refused = check.Finish(static_cast<int>(message.version()))) {
    reading_ = false;
    RespondAndClose(ServerAnswer{refused->kind, std::move(refused->message)});
    return;
  }
  if (parser_->is_done()) {
    Dispatch();
    return;
  }
  if (message.version() >= 11 && AsciiEqualsIgnoreCase(ToStd(message[bhttp::field::expect]), "100-continue")) {
    Slot interim;
    interim.id = next_id_++;
    interim.ready = true;
    interim.bytes = std::string(kContinueResponse);
    slots_.push_back(std::move(interim));
    TryWrite();
  }
  policy_.set_phase(ConnectionPhase::kBody);
  ArmReadTimerAt(policy_.BodyDeadline());
  Publish();
  stream_.With([&](auto& stream) {
    bhttp::async_read(stream, buffer_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
      self->OnBody(ec);
    });
  });
}

void HttpConnection::OnBody(error_code ec) {
  if (closed_) return;
  CancelReadTimer();
  if (ec) {
    OnReadError(ec);
    return;
  }
  Dispatch();
}

void HttpConnection::OnReadError(error_code ec) {
  reading_ = false;
  if (std::optional<ServerAnswer> answer = policy_.AnswerReadFailure(ReadFailureOf(ec), timed_out_, ec.message())) {
    RespondAndClose(*answer);
    return;
  }
  OnPeerGone();
}

void HttpConnection::RespondAndClose(const ServerAnswer& answer) {
  read_closed_ = true;
  Slot slot;
  slot.id = next_id_++;
  slot.ready = true;
  slot.close_after = true;
  slot.framing = ResponseFraming{.version = 11, .keep_alive = false, .head_request = false};
  slot.bytes = SerializeResponse(ServerErrorResponse(answer.kind, answer.message), slot.framing);
  slots_.push_back(std::move(slot));
  TryWrite();
}

void HttpConnection::OnPeerGone() {
  read_closed_ = true;
  for (Slot& slot : slots_) {
    if (slot.client_gone) slot.client_gone->Cancel();
  }
  if (slots_.empty() && !writing_) Close();
}

void HttpConnection::Dispatch() {
  reading_ = false;
  policy_.set_phase(ConnectionPhase::kNone);
  policy_.RequestDispatched();
  bhttp::request<bhttp::string_body> message = parser_->release();
  parser_.reset();

  Request request;
  request.method = std::string(ToStd(message.method_string()));
  request.target = OriginForm(ToStd(message.target()));
  const size_t question = request.target.find('?');
  request.path = request.target.substr(0, question);
  if (question != std::string::npos) request.query = request.target.substr(question + 1);
  request.version = static_cast<int>(message.version());
  request.headers.reserve(std::distance(message.begin(), message.end()));
  for (const auto& field : message) {
    request.headers.emplace_back(std::string(ToStd(field.name_string())), std::string(ToStd(field.value())));
  }
  request.body = std::move(message.body());
  request.client_gone = std::make_shared<CancellationFlag>();
  request.received_at = received_at_;
  request.remote_address = remote_address_;

  Slot slot;
  slot.id = next_id_++;
  slot.framing.keep_alive = message.keep_alive();
  slot.close_after = !slot.framing.keep_alive;
  slot.framing.version = request.version == 10 ? 10 : 11;
  slot.framing.head_request = message.method() == bhttp::verb::head;
  slot.client_gone = request.client_gone;
  const uint64_t id = slot.id;
  slots_.push_back(std::move(slot));
  if (!message.keep_alive()) read_closed_ = true;

  core_->active_requests.fetch_add(1);
  {
    Responder responder(shared_from_this(), id);
    // A compressed body is inflated (bounded by max_body_bytes) before any handler sees it.
    absl::Status decoded = absl::OkStatus();
    if (const std::string_view coding = request.header("Content-Encoding"); !coding.empty()) {
      decoded = DecodeContentEncoding(coding, &request.body, policy_.limits().max_body_bytes);
      std::erase_if(request.headers, [](const auto& h) { return absl::EqualsIgnoreCase(h.first, "Content-Encoding"); });
    }
    try {
      if (!decoded.ok()) {
        std::move(responder)(ErrorResponse(decoded));
      } else {
        core_->handler->Handle(std::move(request), std::move(responder));
      }
    } catch (const std::exception& e) {
      // The handler broke its contract; its Responder (destroyed by now) answered 500.
      std::fprintf(stderr, "tide http: handler threw: %s\n", EscapeForLog(e.what()).c_str());
    } catch (...) {
      std::fprintf(stderr, "tide http: handler threw\n");
    }
  }
  StartRead();
  Publish();
}

void HttpConnection::OnComplete(uint64_t request_id, Response response) {
  if (!closed_) {
    for (Slot& slot : slots_) {
      if (slot.id != request_id) continue;
      if (slot.ready) break;  // cannot happen: a Responder fires once
      slot.bytes = SerializeResponse(response, slot.framing);
      slot.ready = true;
      slot.counted = true;
      TryWrite();
      return;
    }
  }
  core_->unwritten_responses.fetch_sub(1);  // dropped: its client is gone
}

void HttpConnection::TryWrite() {
  if (closed_ || writing_) return;
  write_buffer_.clear();
  bool close_after = false;
  while (!slots_.empty() && slots_.front().ready) {
    write_buffer_.append(slots_.front().bytes);
    close_after = slots_.front().close_after;
    if (slots_.front().counted) ++write_counted_;
    slots_.pop_front();
    if (close_after) break;
  }
  if (write_buffer_.empty()) return;
  writing_ = true;
  close_after_write_ = close_after;
  ArmWriteTimer();
  Publish();
  stream_.With([&](auto& stream) {
    net::async_write(stream, net::buffer(write_buffer_),
                     [self = shared_from_this()](error_code ec, size_t) { self->OnWrite(ec); });
  });
}

void HttpConnection::OnWrite(error_code ec) {
  core_->unwritten_responses.fetch_sub(write_counted_);
  write_counted_ = 0;
  if (closed_) return;
  writing_ = false;
  ++write_timer_gen_;
  write_timer_.cancel();
  if (ec) {
    OnPeerGone();
    Close();
    return;
  }
  if (close_after_write_) {
    LingeringClose();
    return;
  }
  if (read_closed_ && slots_.empty()) {  // the peer went away; nothing left to say
    Close();
    return;
  }
  if (paused_read_ && policy_.MayParse(slots_.size())) {
    // Resume parsing: end the read-ahead (no write is outstanding now, so cancel() only ends
    // that read); OnPausedRead starts a read with the parser.
    boost::system::error_code ignored;
    stream_.socket().cancel(ignored);
  }
  TryWrite();
  if (!reading_) {
    StartRead();
  } else if (policy_.phase() == ConnectionPhase::kIdle && slots_.empty() && !writing_) {
    ArmIdleTimer();
  }
  Publish();
}

void HttpConnection::LingeringClose() {
  read_closed_ = true;
  DiscardSlots();
  boost::system::error_code ignored;
  // With TLS no close_notify is sent: the response was framed (Content-Length) and clients treat
  // the end of the TCP stream after it as the close.
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  policy_.set_phase(ConnectionPhase::kLinger);
  ArmReadTimerAt(policy_.LingerDeadline());
  if (!reading_) DiscardRead();
  Publish();
}

void HttpConnection::DiscardRead() {
  reading_ = true;
  // Raw bytes of the socket, also under TLS: nothing read now is ever decrypted or parsed.
  stream_.socket().async_read_some(net::buffer(discard_buffer_), [self = shared_from_this()](error_code ec, size_t) {
    if (self->closed_) return;
    if (ec) {
      self->Close();
      return;
    }
    self->DiscardRead();
  });
}

void HttpConnection::ArmReadTimerAt(ConnectionPolicy::time_point deadline) {
  const uint64_t generation = ++read_timer_gen_;
  timed_out_ = false;
  read_timer_.expires_at(deadline);
  read_timer_.async_wait([self = shared_from_this(), generation](error_code ec) { self->OnReadTimer(ec, generation); });
}

void HttpConnection::CancelReadTimer() {
  ++read_timer_gen_;
  read_timer_.cancel();
}

void HttpConnection::OnReadTimer(error_code ec, uint64_t generation) {
  if (closed_ || ec || generation != read_timer_gen_) return;
  timed_out_ = true;
  if (policy_.OnReadTimeout() == ReadTimeoutAction::kClose) {
    Close();
    return;
  }
  // Header or body timeout: end the read (shutting down the receiving side completes it with EOF)
  // without disturbing a response write in flight; OnReadError answers 408.
  boost::system::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_receive, ignored);
}

void HttpConnection::ArmWriteTimer() {
  const uint64_t generation = ++write_timer_gen_;
  write_timer_.expires_at(policy_.WriteDeadline());
  write_timer_.async_wait([self = shared_from_this(), generation](error_code ec) {
    if (self->closed_ || ec || generation != self->write_timer_gen_) return;
    self->OnPeerGone();
    self->Close();  // the client stopped reading
  });
}

}  // namespace tide::http::internal
