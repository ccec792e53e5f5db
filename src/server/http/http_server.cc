#include "server/http/http_server.h"

#include "absl/strings/match.h"
#include "server/http/content_encoding.h"
#include "server/http/error_response.h"

#include <atomic>
#include <deque>
#include <exception>
#include <future>
#include <optional>
#include <thread>
#include <unordered_map>
#include <variant>

#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "absl/base/thread_annotations.h"
#include "common/ascii.h"
#include "common/error_echo.h"
#include "common/this_thread.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "tls/tls_context.h"

namespace tide::http {
namespace {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr size_t kReadChunk = 4096;
// After the last response on a connection we stop sending and drain what the client still sends
// for this long before closing, so that closing with unread input does not turn into a TCP reset
// that destroys the response in flight.
constexpr std::chrono::milliseconds kLingerTime{1000};

std::string_view ToStd(boost::beast::string_view s) { return std::string_view(s.data(), s.size()); }

// A header field value as RFC 9110 allows it: control characters (CR and LF included, which would
// split the header; NUL, DEL, ...) are dropped, horizontal tab and obs-text bytes are kept.
void AppendSanitized(std::string_view text, std::string* out) {
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if ((u >= 0x20 && u != 0x7f) || c == '\t') out->push_back(c);
  }
}

// RFC 9110 token: a header field name.
bool IsToken(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    const unsigned char u = static_cast<unsigned char>(c);
    const bool alnum = (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z');
    if (!alnum && std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos) return false;
  }
  return true;
}

// The wire form of `response`. Framing headers set by the handler are ignored: the server owns them.
std::string Serialize(const Response& original, int version, bool keep_alive, bool head_request) {
  // A final response needs a status in 200..599 (1xx would leave the client waiting for another).
  const bool valid_status = original.status >= 200 && original.status <= 599;
  const Response replacement = valid_status ? Response{} : JsonError(ErrorKind::kInternal, absl::StrCat("internal: handler answered status ", original.status));
  const Response& response = valid_status ? original : replacement;
  const int status = response.status;
  const bhttp::status known = bhttp::int_to_status(static_cast<unsigned>(status));
  const std::string_view reason =
      known == bhttp::status::unknown ? std::string_view("Unknown") : ToStd(bhttp::obsolete_reason(known));
  const bool no_body = status == 204 || status == 304;
  std::string out;
  out.reserve(160 + response.body.size());
  absl::StrAppend(&out, version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ", status, " ");
  out.append(reason);
  out.append("\r\nServer: tide\r\n");
  if (!response.content_type.empty()) {
    out.append("Content-Type: ");
    AppendSanitized(response.content_type, &out);
    out.append("\r\n");
  }
  for (const auto& [name, value] : response.headers) {
    if (!IsToken(name) || AsciiEqualsIgnoreCase(name, "content-length") || AsciiEqualsIgnoreCase(name, "connection") ||
        AsciiEqualsIgnoreCase(name, "transfer-encoding") || AsciiEqualsIgnoreCase(name, "server")) {
      continue;
    }
    out.append(name);
    out.append(": ");
    AppendSanitized(value, &out);
    out.append("\r\n");
  }
  if (!no_body) absl::StrAppend(&out, "Content-Length: ", response.body.size(), "\r\n");
  if (version == 10 && keep_alive) out.append("Connection: keep-alive\r\n");
  if (version != 10 && !keep_alive) out.append("Connection: close\r\n");
  out.append("\r\n");
  if (!no_body && !head_request) out.append(response.body);
  return out;
}

// ---- Request validation (RFC 9112 framing, Host, absolute-form) -----------------------------------

// A request the server refuses once its headers are in: the kind (its status) and the message.
struct HeadError {
  ErrorKind kind = ErrorKind::kMalformedRequest;
  std::string message;
};

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// RFC 9110 §7.2 Host = uri-host [ ":" port ]: unreserved, sub-delims, pct-encoded, ':' and the
// brackets of an IP literal. Empty is allowed (a target without authority).
bool IsValidHost(std::string_view host) {
  for (char c : host) {
    const unsigned char u = static_cast<unsigned char>(c);
    const bool alnum = (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z');
    if (!alnum && std::string_view("-._~!$&'()*+,;=%:[]").find(c) == std::string_view::npos) return false;
  }
  return true;
}

// Why the request whose headers are `message` must not be served, or nullopt when it may be.
// Checked before any body byte is read: a body whose length the server and a proxy in front of it
// could disagree on must never be parsed as the next request (request smuggling).
std::optional<HeadError> CheckRequestHead(const bhttp::request<bhttp::string_body>& message) {
  int hosts = 0;
  int content_lengths = 0;
  bool content_length_list = false;
  bool transfer_encoding = false;
  std::string_view host;
  std::vector<std::string_view> codings;  // of every Transfer-Encoding field line, in order
  for (const auto& field : message) {
    const std::string_view value = ToStd(field.value());
    switch (field.name()) {
      case bhttp::field::host:
        ++hosts;
        host = value;
        break;
      case bhttp::field::content_length:
        ++content_lengths;
        if (value.find(',') != std::string_view::npos) content_length_list = true;
        break;
      case bhttp::field::transfer_encoding: {
        transfer_encoding = true;
        std::string_view rest = value;
        for (;;) {
          const size_t comma = rest.find(',');
          const std::string_view coding = TrimOws(rest.substr(0, comma));
          if (!coding.empty()) codings.push_back(coding);
          if (comma == std::string_view::npos) break;
          rest.remove_prefix(comma + 1);
        }
        break;
      }
      default:
        break;
    }
  }
  if (transfer_encoding) {
    if (content_lengths > 0) return HeadError{ErrorKind::kMalformedRequest, "request has both Transfer-Encoding and Content-Length"};
    if (message.version() < 11) return HeadError{ErrorKind::kMalformedRequest, "Transfer-Encoding is not allowed in an HTTP/1.0 request"};
    if (codings.empty() || !AsciiEqualsIgnoreCase(codings.back(), "chunked")) {
      return HeadError{ErrorKind::kMalformedRequest, absl::StrCat("request Transfer-Encoding must end with chunked, got '",
                                         EchoForError(codings.empty() ? "" : codings.back()), "'")};
    }
    for (size_t i = 0; i + 1 < codings.size(); ++i) {
      if (AsciiEqualsIgnoreCase(codings[i], "chunked")) return HeadError{ErrorKind::kMalformedRequest, "request Transfer-Encoding applies chunked twice"};
    }
    if (codings.size() > 1) {
      return HeadError{ErrorKind::kUnimplemented, absl::StrCat("transfer coding '", EchoForError(codings.front()),
                                         "' is not supported; send Transfer-Encoding: chunked alone")};
    }
  }
  if (content_lengths > 1 || content_length_list) return HeadError{ErrorKind::kMalformedRequest, "request has more than one Content-Length"};
  if (hosts > 1) return HeadError{ErrorKind::kMalformedRequest, "request has more than one Host header"};
  if (hosts == 0 && message.version() >= 11) return HeadError{ErrorKind::kMalformedRequest, "HTTP/1.1 request without a Host header"};
  if (!IsValidHost(host)) return HeadError{ErrorKind::kMalformedRequest, absl::StrCat("invalid Host header '", EchoForError(host), "'")};
  return std::nullopt;
}

// The origin form of a request-target: an absolute-form "http://host:port/p?q" becomes "/p?q"
// (RFC 9112 §3.2.2; "http://host" becomes "/"); any other target is returned as sent.
std::string OriginForm(std::string_view target) {
  size_t scheme_end = 0;
  if (target.size() >= 7 && AsciiEqualsIgnoreCase(target.substr(0, 7), "http://")) {
    scheme_end = 7;
  } else if (target.size() >= 8 && AsciiEqualsIgnoreCase(target.substr(0, 8), "https://")) {
    scheme_end = 8;
  } else {
    return std::string(target);
  }
  const size_t path = target.find_first_of("/?", scheme_end);
  if (path == std::string_view::npos) return "/";
  if (target[path] == '?') return "/" + std::string(target.substr(path));
  return std::string(target.substr(path));
}

class CallbackSink final : public internal::ResponseSink {
 public:
  explicit CallbackSink(absl::AnyInvocable<void(Response)> callback) : callback_(std::move(callback)) {}
  void Complete(uint64_t, Response response) override { callback_(std::move(response)); }

 private:
  absl::AnyInvocable<void(Response)> callback_;
};

class Connection;

// The byte stream of one connection: a TCP socket, or TLS over one (HttpServerOptions::tls). One
// type with one set of operations, so that Connection is written once for both; an operation costs
// a branch on the variant.
class ConnectionStream {
 public:
  explicit ConnectionStream(tcp::socket socket) : stream_(std::in_place_type<tcp::socket>, std::move(socket)) {}
  // `context` is the server's current TLS context, taken at accept: a certificate reloaded later
  // serves the connections accepted after the reload.
  ConnectionStream(tcp::socket socket, std::shared_ptr<ssl::context> context)
      : context_(std::move(context)), stream_(std::in_place_type<TlsStream>, std::move(socket), *context_) {}

  bool tls() const { return context_ != nullptr; }
  // The TCP socket underneath (shutdown, close, cancel, addresses).
  tcp::socket& socket() {
    if (TlsStream* tls = std::get_if<TlsStream>(&stream_)) return tls->next_layer();
    return std::get<tcp::socket>(stream_);
  }
  // Runs fn(stream) on the stream itself (tcp::socket& or ssl::stream<tcp::socket>&), to start a read
  // or a write on it.
  template <typename Fn>
  void With(Fn&& fn) {
    std::visit(std::forward<Fn>(fn), stream_);
  }
  // TLS only: the server side of the handshake.
  template <typename Handler>
  void AsyncHandshake(Handler&& handler) {
    std::get<TlsStream>(stream_).async_handshake(ssl::stream_base::server, std::forward<Handler>(handler));
  }

 private:
  using TlsStream = ssl::stream<tcp::socket>;
  std::shared_ptr<ssl::context> context_;  // before stream_: outlives it
  std::variant<tcp::socket, TlsStream> stream_;
};

}  // namespace

// ---- Request, Response, Responder ----------------------------------------------------------------

std::string_view Request::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (AsciiEqualsIgnoreCase(key, name)) return value;
  }
  return {};
}

Responder& Responder::operator=(Responder&& other) noexcept {
  if (this != &other) {
    if (sink_) std::move(*this)(JsonError(ErrorKind::kInternal, "internal: request dropped"));
    sink_ = std::move(other.sink_);
    request_id_ = other.request_id_;
  }
  return *this;
}

Responder::~Responder() {
  if (sink_) std::move(*this)(JsonError(ErrorKind::kInternal, "internal: request dropped"));
}

void Responder::operator()(Response response) && {
  std::shared_ptr<internal::ResponseSink> sink = std::move(sink_);
  if (sink) sink->Complete(request_id_, std::move(response));
}

Responder Responder::FromCallback(absl::AnyInvocable<void(Response)> callback) {
  return Responder(std::make_shared<CallbackSink>(std::move(callback)), 0);
}

// ---- Core -----------------------------------------------------------------------------------------

struct HttpServer::Core {
  Core(const HttpServerOptions& opts, Handler* h)
      : options(opts), handler(h), accept_strand(net::make_strand(ioc)), acceptor(accept_strand) {}

  HttpServerOptions options;
  Handler* handler;
  net::io_context ioc;
  net::strand<net::io_context::executor_type> accept_strand;
  tcp::acceptor acceptor;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  bool started = false;  // controlling thread only
  bool stopped = false;  // controlling thread only
  std::atomic<uint16_t> port{0};
  std::atomic<size_t> active_requests{0};
  std::atomic<size_t> active_connections{0};
  // Responses handed over by Responders and not yet written or dropped (HttpServer::WaitIdle).
  std::atomic<size_t> unwritten_responses{0};
  std::atomic<uint64_t> evicted_connections{0};
  std::atomic<uint64_t> refused_connections{0};

  absl::Mutex mu;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections ABSL_GUARDED_BY(mu);
};

namespace {

// How readily a connection gives way to a new one at max_connections (lower: sooner). Published
// by the connection's strand, read by the acceptor under Core::mu.
enum class EvictionTier : uint8_t {
  kIdle = 0,    // no request in flight and no partial request (also: never sent a byte, lingering)
  kHeader = 1,  // reading a request's headers, nothing in flight
  kBody = 2,    // reading a request's body, nothing in flight
  kBusy = 3,    // a request in flight or a response being written: never evicted
  kClosed = 4,
};

// One client connection. Every method except Complete() and the eviction accessors runs on the
// connection's strand.
class Connection final : public internal::ResponseSink, public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<HttpServer::Core> core, tcp::socket socket)
      : core_(std::move(core)),
        stream_(core_->options.tls ? ConnectionStream(std::move(socket), core_->options.tls->current())
                                   : ConnectionStream(std::move(socket))),
        read_timer_(stream_.socket().get_executor()),
        write_timer_(stream_.socket().get_executor()),
        accepted_at_(Clock::now()) {
    tier_since_ns_.store(accepted_at_.time_since_epoch().count());
    boost::system::error_code ec;
    const tcp::endpoint remote = stream_.socket().remote_endpoint(ec);
    // A socketpair end (internal::ServeConnectedSocket) has no IP peer address.
    const int family = ec ? AF_UNSPEC : remote.data()->sa_family;
    if (family == AF_INET || family == AF_INET6) remote_address_ = absl::StrCat(remote.address().to_string(), ":", remote.port());
    core_->active_connections.fetch_add(1);
  }

  ~Connection() override {
    if (!closed_) core_->active_connections.fetch_sub(1);
    absl::MutexLock lock(&core_->mu);
    core_->connections.erase(this);
  }

  net::any_io_executor executor() { return stream_.socket().get_executor(); }

  // Eviction state, for the acceptor (any thread, under Core::mu).
  EvictionTier tier() const { return tier_.load(std::memory_order_acquire); }
  int64_t tier_since_ns() const { return tier_since_ns_.load(std::memory_order_relaxed); }
  // Whether it was chosen for eviction (and Evict has not declined yet).
  bool evicting() const { return evicting_.load(); }
  void MarkEvicting() { evicting_.store(true); }

  void Start() {
    if (closed_) return;
    if (stream_.tls()) {
      // The handshake counts against the first request's header_read_timeout (from accept), and
      // the connection ranks as idle for eviction until it completes: a client that connects and
      // never finishes its handshake is closed like a silent plaintext one.
      phase_ = Phase::kHandshake;
      ArmReadTimerAt(accepted_at_ + options().header_read_timeout);
      stream_.AsyncHandshake([self = shared_from_this()](boost::system::error_code ec) { self->OnHandshake(ec); });
      Publish();
      return;
    }
    StartRead();
    Publish();
  }

  // Closes the connection to make room for a new one, unless it got a request in flight since it
  // was chosen (then it stays, and the server is over its cap by one until a connection closes).
  void Evict() {
    if (closed_) return;
    if (CurrentTier() == EvictionTier::kBusy) {
      evicting_.store(false);
      return;
    }
    Close();
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    tier_.store(EvictionTier::kClosed, std::memory_order_release);
    core_->active_connections.fetch_sub(1);
    DiscardSlots();
    boost::system::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
    read_timer_.cancel();
    write_timer_.cancel();
  }

  // Any thread.
  void Complete(uint64_t request_id, Response response) override {
    core_->unwritten_responses.fetch_add(1);  // before active_requests drops: WaitIdle sees one
    core_->active_requests.fetch_sub(1);
    absl::ReaderMutexLock lock(&core_->mu);
    if (core_->stopping) {  // the I/O threads may already be gone
      core_->unwritten_responses.fetch_sub(1);
      return;
    }
    net::post(executor(),
              [self = shared_from_this(), request_id, response = std::move(response)]() mutable {
                self->OnComplete(request_id, std::move(response));
              });
  }

 private:
  // kPaused: parsing paused by kMaxPipelinedRequests, reading on into buffer_ (see StartRead).
  // kHandshake: TLS handshake in progress (before the first read).
  enum class Phase { kNone, kHandshake, kIdle, kHeader, kBody, kLinger, kPaused };

  // One response position on this connection, in request order.
  struct Slot {
    uint64_t id = 0;
    bool ready = false;
    bool close_after = false;
    bool keep_alive = true;
    bool head_request = false;
    int version = 11;
    std::string bytes;
    std::shared_ptr<CancellationFlag> client_gone;
    bool counted = false;  // a Responder's response, counted in Core::unwritten_responses
  };

  const HttpServerOptions& options() const { return core_->options; }

  EvictionTier CurrentTier() const {
    if (closed_) return EvictionTier::kClosed;
    if (phase_ == Phase::kLinger) return EvictionTier::kIdle;
    if (!slots_.empty() || writing_) return EvictionTier::kBusy;
    if (phase_ == Phase::kHeader) return EvictionTier::kHeader;
    if (phase_ == Phase::kBody) return EvictionTier::kBody;
    return EvictionTier::kIdle;
  }

  // Publishes the eviction tier (and since when it holds) for the acceptor. Called after every
  // state change on the strand.
  void Publish() {
    const EvictionTier tier = CurrentTier();
    if (tier == tier_.load(std::memory_order_relaxed)) return;
    tier_since_ns_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    tier_.store(tier, std::memory_order_release);
  }

  // Drops every response position (the connection closes): their clients are gone.
  void DiscardSlots() {
    for (Slot& slot : slots_) {
      if (slot.client_gone) slot.client_gone->Cancel();
      if (slot.counted) core_->unwritten_responses.fetch_sub(1);
    }
    slots_.clear();
  }

  // The idle timer: before the first request the header deadline counts from accept; between
  // requests of a keep-alive connection, idle_timeout.
  void ArmIdleTimer() {
    if (requests_read_ == 0) {
      ArmReadTimerAt(accepted_at_ + options().header_read_timeout);
    } else {
      ArmReadTimer(options().idle_timeout);
    }
  }

  void OnHandshake(boost::system::error_code ec) {
    if (closed_) return;
    CancelReadTimer();
    phase_ = Phase::kNone;
    if (ec) {  // not TLS (plaintext HTTP), no acceptable certificate (mTLS), timeout: nothing to answer
      Close();
      return;
    }
    StartRead();
    Publish();
  }

  void StartRead() {
    if (closed_ || read_closed_ || reading_) return;
    if (slots_.size() >= kMaxPipelinedRequests) {  // parsing resumes when responses drain
      PausedRead();
      return;
    }
    reading_ = true;
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(
        std::min<size_t>(options().max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
    parser_->body_limit(static_cast<std::uint64_t>(options().max_body_bytes));
    if (buffer_.size() > 0) {  // a pipelined request is already here
      received_at_ = Clock::now();
      ReadHeader();
      return;
    }
    phase_ = Phase::kIdle;
    if (slots_.empty() && !writing_) ArmIdleTimer();
    stream_.With([&](auto& stream) {
      stream.async_read_some(buffer_.prepare(kReadChunk), [self = shared_from_this()](boost::system::error_code ec, size_t n) {
        self->OnIdleRead(ec, n);
      });
    });
  }

  void OnIdleRead(boost::system::error_code ec, size_t n) {
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
    received_at_ = Clock::now();
    ReadHeader();
  }

  // While parsing is paused at kMaxPipelinedRequests, reads on without parsing (up to
  // kPausedReadBytes in buffer_), so that the client closing the connection is seen at once and its
  // requests' client_gone set. OnWrite cancels this read when a slot frees up, and parsing resumes.
  void PausedRead() {
    if (buffer_.size() >= kPausedReadBytes) return;  // a disconnect is seen at the next write
    reading_ = true;
    paused_read_ = true;
    phase_ = Phase::kPaused;
    stream_.With([&](auto& stream) {
      stream.async_read_some(buffer_.prepare(std::min(kReadChunk, kPausedReadBytes - buffer_.size())),
                             [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                               self->OnPausedRead(ec, n);
                             });
    });
  }

  void OnPausedRead(boost::system::error_code ec, size_t n) {
    if (closed_) return;
    reading_ = false;
    paused_read_ = false;
    if (phase_ == Phase::kLinger) {  // the last response went out meanwhile
      if (ec && ec != net::error::operation_aborted) {
        Close();
      } else {
        DiscardRead();
      }
      return;
    }
    phase_ = Phase::kNone;
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

  void ReadHeader() {
    phase_ = Phase::kHeader;
    // A connection's first request has header_read_timeout from accept, later ones from their first byte.
    ArmReadTimerAt((requests_read_ == 0 ? accepted_at_ : Clock::now()) + options().header_read_timeout);
    Publish();
    stream_.With([&](auto& stream) {
      bhttp::async_read_header(stream, buffer_, *parser_, [self = shared_from_this()](boost::system::error_code ec, size_t) {
        self->OnHeader(ec);
      });
    });
  }

  void OnHeader(boost::system::error_code ec) {
    if (closed_) return;
    CancelReadTimer();
    if (ec) {
      OnReadError(ec);
      return;
    }
    if (std::optional<HeadError> refused = CheckRequestHead(parser_->get())) {
      reading_ = false;
      RespondAndClose(refused->kind, std::move(refused->message));
      return;
    }
    if (parser_->is_done()) {
      Dispatch();
      return;
    }
    const auto& message = parser_->get();
    if (message.version() >= 11 && AsciiEqualsIgnoreCase(ToStd(message[bhttp::field::expect]), "100-continue")) {
      Slot interim;
      interim.id = next_id_++;
      interim.ready = true;
      interim.bytes = "HTTP/1.1 100 Continue\r\n\r\n";
      slots_.push_back(std::move(interim));
      TryWrite();
    }
    phase_ = Phase::kBody;
    ArmReadTimer(options().body_read_timeout);
    Publish();
    stream_.With([&](auto& stream) {
      bhttp::async_read(stream, buffer_, *parser_, [self = shared_from_this()](boost::system::error_code ec, size_t) {
        self->OnBody(ec);
      });
    });
  }

  void OnBody(boost::system::error_code ec) {
    if (closed_) return;
    CancelReadTimer();
    if (ec) {
      OnReadError(ec);
      return;
    }
    Dispatch();
  }

  void OnReadError(boost::system::error_code ec) {
    reading_ = false;
    if (timed_out_ && (phase_ == Phase::kHeader || phase_ == Phase::kBody)) {
      const bool header = phase_ == Phase::kHeader;
      RespondAndClose(ErrorKind::kRequestTimeout, absl::StrCat("request ", header ? "header" : "body", " not received within ",
                                        (header ? options().header_read_timeout : options().body_read_timeout).count(),
                                        " ms"));
      return;
    }
    if (ec == bhttp::error::header_limit) {
      RespondAndClose(ErrorKind::kHeadersTooLarge, absl::StrCat("request header exceeds ", options().max_header_bytes, " bytes"));
      return;
    }
    if (ec == bhttp::error::body_limit) {
      RespondAndClose(ErrorKind::kPayloadTooLarge, absl::StrCat("request body exceeds ", options().max_body_bytes, " bytes"));
      return;
    }
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
        ec.category() != bhttp::make_error_code(bhttp::error::bad_method).category()) {
      OnPeerGone();
      return;
    }
    RespondAndClose(ErrorKind::kMalformedRequest, absl::StrCat("malformed HTTP request: ", ec.message()));
  }

  // The server's own answer; the connection closes after it.
  void RespondAndClose(ErrorKind kind, std::string message) {
    read_closed_ = true;
    Slot slot;
    slot.id = next_id_++;
    slot.ready = true;
    slot.close_after = true;
    slot.keep_alive = false;
    slot.bytes = Serialize(JsonError(kind, message), 11, /*keep_alive=*/false, /*head_request=*/false);
    slots_.push_back(std::move(slot));
    TryWrite();
  }

  void OnPeerGone() {
    read_closed_ = true;
    for (Slot& slot : slots_) {
      if (slot.client_gone) slot.client_gone->Cancel();
    }
    if (slots_.empty() && !writing_) Close();
  }

  void Dispatch() {
    reading_ = false;
    phase_ = Phase::kNone;
    ++requests_read_;
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
    slot.keep_alive = message.keep_alive();
    slot.close_after = !slot.keep_alive;
    slot.version = request.version == 10 ? 10 : 11;
    slot.head_request = message.method() == bhttp::verb::head;
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
        decoded = DecodeContentEncoding(coding, &request.body, options().max_body_bytes);
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

  void OnComplete(uint64_t request_id, Response response) {
    if (!closed_) {
      for (Slot& slot : slots_) {
        if (slot.id != request_id) continue;
        if (slot.ready) break;  // cannot happen: a Responder fires once
        slot.bytes = Serialize(response, slot.version, slot.keep_alive, slot.head_request);
        slot.ready = true;
        slot.counted = true;
        TryWrite();
        return;
      }
    }
    core_->unwritten_responses.fetch_sub(1);  // dropped: its client is gone
  }

  void TryWrite() {
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
                       [self = shared_from_this()](boost::system::error_code ec, size_t) { self->OnWrite(ec); });
    });
  }

  void OnWrite(boost::system::error_code ec) {
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
    if (paused_read_ && slots_.size() < kMaxPipelinedRequests) {
      // Resume parsing: end the read-ahead (no write is outstanding now, so cancel() only ends
      // that read); OnPausedRead restarts reading with the parser.
      boost::system::error_code ignored;
      stream_.socket().cancel(ignored);
    }
    TryWrite();
    if (!reading_) {
      StartRead();
    } else if (phase_ == Phase::kIdle && slots_.empty() && !writing_) {
      ArmIdleTimer();
    }
    Publish();
  }

  void LingeringClose() {
    read_closed_ = true;
    DiscardSlots();
    boost::system::error_code ignored;
    // With TLS no close_notify is sent: the response was framed (Content-Length) and clients treat
    // the end of the TCP stream after it as the close.
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    phase_ = Phase::kLinger;
    ArmReadTimer(kLingerTime);
    if (!reading_) DiscardRead();
    Publish();
  }

  void DiscardRead() {
    reading_ = true;
    // Raw bytes of the socket, also under TLS: nothing read now is ever decrypted or parsed.
    stream_.socket().async_read_some(net::buffer(discard_buffer_),
                            [self = shared_from_this()](boost::system::error_code ec, size_t) {
                              if (self->closed_) return;
                              if (ec) {
                                self->Close();
                                return;
                              }
                              self->DiscardRead();
                            });
  }

  void ArmReadTimer(std::chrono::milliseconds timeout) { ArmReadTimerAt(Clock::now() + timeout); }

  void ArmReadTimerAt(Clock::time_point deadline) {
    const uint64_t generation = ++read_timer_gen_;
    timed_out_ = false;
    read_timer_.expires_at(deadline);
    read_timer_.async_wait([self = shared_from_this(), generation](boost::system::error_code ec) {
      self->OnReadTimer(ec, generation);
    });
  }

  void CancelReadTimer() {
    ++read_timer_gen_;
    read_timer_.cancel();
  }

  void OnReadTimer(boost::system::error_code ec, uint64_t generation) {
    if (closed_ || ec || generation != read_timer_gen_) return;
    if (phase_ == Phase::kIdle || phase_ == Phase::kLinger || phase_ == Phase::kHandshake) {
      timed_out_ = true;
      Close();
      return;
    }
    // Header or body timeout: end the read (shutting down the receiving side completes it with
    // EOF) without disturbing a response write in flight; OnReadError answers 408.
    timed_out_ = true;
    boost::system::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_receive, ignored);
  }

  void ArmWriteTimer() {
    const uint64_t generation = ++write_timer_gen_;
    write_timer_.expires_after(options().idle_timeout);
    write_timer_.async_wait([self = shared_from_this(), generation](boost::system::error_code ec) {
      if (self->closed_ || ec || generation != self->write_timer_gen_) return;
      self->OnPeerGone();
      self->Close();  // the client stopped reading
    });
  }

  std::shared_ptr<HttpServer::Core> core_;
  ConnectionStream stream_;
  net::steady_timer read_timer_;
  net::steady_timer write_timer_;
  boost::beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::deque<Slot> slots_;
  std::string write_buffer_;
  std::array<char, kReadChunk> discard_buffer_;
  std::string remote_address_;
  Clock::time_point received_at_;
  const Clock::time_point accepted_at_;
  std::atomic<EvictionTier> tier_{EvictionTier::kIdle};
  std::atomic<int64_t> tier_since_ns_{0};
  std::atomic<bool> evicting_{false};
  uint64_t requests_read_ = 0;  // requests handed to the handler
  size_t write_counted_ = 0;    // counted responses in the write in flight
  uint64_t next_id_ = 0;
  uint64_t read_timer_gen_ = 0;
  uint64_t write_timer_gen_ = 0;
  Phase phase_ = Phase::kNone;
  bool reading_ = false;     // a read of ours is outstanding
  bool paused_read_ = false;  // that read is PausedRead's read-ahead
  bool writing_ = false;     // a write of ours is outstanding
  bool read_closed_ = false;  // no further requests will be read on this connection
  bool close_after_write_ = false;
  bool timed_out_ = false;
  bool closed_ = false;
};

// At max_connections: picks the connection to close for a new one (idle the longest, else reading
// headers the longest, else reading a body the longest) and marks it as being evicted. False when
// every connection has a request in flight (or is already being evicted). O(open connections),
// only when the cap is reached.
bool ChooseEvictionVictim(HttpServer::Core& core, std::shared_ptr<Connection>* victim) {
  absl::MutexLock lock(&core.mu);
  Connection* best = nullptr;
  std::weak_ptr<Connection>* best_weak = nullptr;
  std::pair<EvictionTier, int64_t> best_key{EvictionTier::kBusy, 0};
  for (auto& [raw, weak] : core.connections) {
    // An entry is erased (under mu) by the destructor, so `raw` is alive while listed.
    const EvictionTier tier = raw->tier();
    if (tier >= EvictionTier::kBusy || raw->evicting()) continue;
    const std::pair<EvictionTier, int64_t> key{tier, raw->tier_since_ns()};
    if (best == nullptr || key < best_key) {
      best = raw;
      best_weak = &weak;
      best_key = key;
    }
  }
  if (best == nullptr) return false;
  *victim = best_weak->lock();  // null: being destroyed, its slot is free already
  if (*victim != nullptr) (*victim)->MarkEvicting();
  return true;
}

// Answers a connection refused at max_connections with a short 503 and closes it. Best effort:
// the answer is sent without waiting (it fits any socket buffer). A TLS listener closes without
// an answer: a plaintext 503 means nothing to a client that is about to start a handshake.
void RefuseConnection(tcp::socket& socket, bool tls) {
  static const std::string* const kRefused = [] {
    const Response response = JsonError(ErrorKind::kUnavailable, "server at connection limit: every connection has a request in flight");
    return new std::string(Serialize(response, 11, /*keep_alive=*/false, /*head_request=*/false));
  }();
  if (!tls) (void)::send(socket.native_handle(), kRefused->data(), kRefused->size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  boost::system::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_send, ignored);
  socket.close(ignored);
}

void DoAccept(std::shared_ptr<HttpServer::Core> core) {
  HttpServer::Core* raw = core.get();
  raw->acceptor.async_accept(
      net::make_strand(raw->ioc), [core = std::move(core)](boost::system::error_code ec, tcp::socket socket) mutable {
        if (!core->acceptor.is_open()) return;
        if (ec) {
          if (ec == net::error::operation_aborted) return;
          // E.g. EMFILE: retrying at once would spin while no descriptor is free.
          auto timer = std::make_shared<net::steady_timer>(core->accept_strand, std::chrono::milliseconds(10));
          timer->async_wait([timer, core = std::move(core)](boost::system::error_code) mutable {
            if (core->acceptor.is_open()) DoAccept(std::move(core));
          });
          return;
        }
        if (core->active_connections.load() >= core->options.max_connections) {
          std::shared_ptr<Connection> victim;
          if (ChooseEvictionVictim(*core, &victim)) {
            core->evicted_connections.fetch_add(1);
            if (core->options.on_connection_limit) core->options.on_connection_limit(ConnectionLimitAction::kEvicted);
            if (victim != nullptr) net::post(victim->executor(), [victim] { victim->Evict(); });
          } else {
            core->refused_connections.fetch_add(1);
            if (core->options.on_connection_limit) core->options.on_connection_limit(ConnectionLimitAction::kRefused);
            RefuseConnection(socket, core->options.tls != nullptr);
            DoAccept(std::move(core));
            return;
          }
        }
        boost::system::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        auto connection = std::make_shared<Connection>(core, std::move(socket));
        {
          absl::MutexLock lock(&core->mu);
          if (core->stopping) return;
          core->connections.emplace(connection.get(), connection);
        }
        net::post(connection->executor(), [connection] { connection->Start(); });
        DoAccept(std::move(core));
      });
}

}  // namespace

// ---- HttpServer -----------------------------------------------------------------------------------

HttpServer::HttpServer(std::shared_ptr<Core> core) : core_(std::move(core)) {}

HttpServer::~HttpServer() { Stop(); }

namespace {

absl::Status ValidateOptions(const HttpServerOptions& options, const Handler* handler) {
  if (handler == nullptr) return absl::InvalidArgumentError("http server needs a handler");
  if (options.io_threads < 1) return absl::InvalidArgumentError("io_threads must be at least 1");
  if (options.max_header_bytes < 64) return absl::InvalidArgumentError("max_header_bytes must be at least 64");
  if (options.max_connections < 1) return absl::InvalidArgumentError("max_connections must be at least 1");
  if (options.header_read_timeout.count() <= 0 || options.body_read_timeout.count() <= 0 ||
      options.idle_timeout.count() <= 0) {
    return absl::InvalidArgumentError("http timeouts must be positive");
  }
  boost::system::error_code ec;
  net::ip::make_address(options.host == "localhost" ? "127.0.0.1" : options.host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("invalid listen address '", options.host, "'"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Create(const HttpServerOptions& options,
                                                               Handler* handler) {
  TIDE_RETURN_IF_ERROR(ValidateOptions(options, handler));
  return std::unique_ptr<HttpServer>(new HttpServer(std::make_shared<Core>(options, handler)));
}

absl::Status internal::ServeConnectedSocket(const HttpServerOptions& options, Handler* handler, int fd) {
  if (absl::Status status = ValidateOptions(options, handler); !status.ok()) {
    if (fd >= 0) ::close(fd);
    return status;
  }
  auto core = std::make_shared<HttpServer::Core>(options, handler);
  tcp::socket socket(net::make_strand(core->ioc));
  boost::system::error_code ec;
  socket.assign(tcp::v4(), fd, ec);
  if (ec) {
    if (fd >= 0) ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("cannot serve descriptor ", fd, ": ", ec.message()));
  }
  auto connection = std::make_shared<Connection>(core, std::move(socket));
  const std::weak_ptr<Connection> alive = connection;
  {
    absl::MutexLock lock(&core->mu);
    core->connections.emplace(connection.get(), connection);
  }
  const net::any_io_executor executor = connection->executor();
  net::post(executor, [connection = std::move(connection)] { connection->Start(); });
  // The work guard keeps the loop waiting for Responders completed from other threads; the
  // connection is gone once it closed and nothing (handler, timer, Responder) refers to it.
  auto work = net::make_work_guard(core->ioc);
  while (!alive.expired()) {
    try {
      core->ioc.run_one_for(std::chrono::milliseconds(50));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tide http: I/O loop caught: %s\n", EscapeForLog(e.what()).c_str());
    }
  }
  return absl::OkStatus();
}

absl::Status HttpServer::Start() {
  Core& core = *core_;
  if (core.started) return absl::FailedPreconditionError("http server already started");
  boost::system::error_code ec;
  const net::ip::address address =
      net::ip::make_address(core.options.host == "localhost" ? "127.0.0.1" : core.options.host, ec);
  const tcp::endpoint endpoint(address, core.options.port);
  auto fail = [&](const char* what) {
    boost::system::error_code ignored;
    core.acceptor.close(ignored);
    return absl::UnavailableError(absl::StrCat("cannot ", what, " ", core.options.host, ":", core.options.port,
                                               ": ", ec.message()));
  };
  core.acceptor.open(endpoint.protocol(), ec);
  if (ec) return fail("open socket for");
  core.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (ec) return fail("set SO_REUSEADDR on");
  core.acceptor.bind(endpoint, ec);
  if (ec) return fail("bind");
  core.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return fail("listen on");
  core.port.store(core.acceptor.local_endpoint().port());
  core.started = true;
  core.work.emplace(net::make_work_guard(core.ioc));
  DoAccept(core_);
  for (int i = 0; i < core.options.io_threads; ++i) {
    core.threads.emplace_back([&core, i] {
      this_thread::SetCurrentThreadName("tide-http-" + std::to_string(i));
      // Woken by a client, an I/O thread should preempt a GEMM at once, not after its slice.
      if (core.options.io_time_slice.count() > 0) this_thread::RequestShortTimeSlice(core.options.io_time_slice);
      for (;;) {
        try {
          core.ioc.run();
          return;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "tide http: I/O thread caught: %s\n", EscapeForLog(e.what()).c_str());
        }
      }
    });
  }
  return absl::OkStatus();
}

uint16_t HttpServer::port() const { return core_->port.load(); }

void HttpServer::StopAccepting() {
  Core& core = *core_;
  if (!core.started || core.stopped) return;
  std::promise<void> closed;
  net::post(core.accept_strand, [&core, &closed] {
    boost::system::error_code ignored;
    core.acceptor.close(ignored);
    closed.set_value();
  });
  closed.get_future().wait();
}

void HttpServer::Stop() {
  Core& core = *core_;
  if (!core.started || core.stopped) return;
  core.stopped = true;
  std::vector<std::shared_ptr<Connection>> open;
  {
    absl::MutexLock lock(&core.mu);
    core.stopping = true;
    for (auto& [raw, weak] : core.connections) {
      if (auto connection = weak.lock()) open.push_back(std::move(connection));
    }
  }
  net::post(core.accept_strand, [&core] {
    boost::system::error_code ignored;
    core.acceptor.close(ignored);
  });
  for (auto& connection : open) {
    net::post(connection->executor(), [connection] { connection->Close(); });
  }
  open.clear();
  core.work.reset();
  for (std::thread& thread : core.threads) thread.join();
  core.threads.clear();
}

size_t HttpServer::active_requests() const { return core_->active_requests.load(); }
size_t HttpServer::active_connections() const { return core_->active_connections.load(); }
uint64_t HttpServer::evicted_connections() const { return core_->evicted_connections.load(); }
uint64_t HttpServer::refused_connections() const { return core_->refused_connections.load(); }

bool HttpServer::WaitIdle(std::chrono::steady_clock::time_point deadline) const {
  for (;;) {
    if (core_->active_requests.load() == 0 && core_->unwritten_responses.load() == 0) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace tide::http
