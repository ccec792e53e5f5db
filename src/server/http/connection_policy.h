// tide::http connection policy — what one HTTP connection may do and when it must end: the read
// deadlines (header, body, idle, TLS handshake, linger) and the write deadline, what a deadline or
// a failed read means (close silently, or answer 408/413/431/400 and close), how many pipelined
// requests are parsed ahead, and how readily the connection gives way to a new one at
// max_connections (its eviction tier, and the ranking the accept loop picks a victim with).
//
// Contract:
//  - Pure: no sockets, no timers, no threads. Time comes from the injected tide::Clock (common/
//    clock.h); the policy reads it only when asked for a deadline or told of a state change.
//  - ConnectionPolicy is driven by one connection's state machine (http_connection.h) and is not
//    thread-safe; the clock must outlive it. EvictionChooser and AtConnectionCap are values.
//  - The policy (HttpServerOptions holds the numbers):
//    * A new connection has header_read_timeout from accept to deliver its first request's headers
//      (including a TLS handshake); one that never sends a byte is closed silently then.
//    * A later request has header_read_timeout from its first byte; every body has
//      body_read_timeout from the end of its headers; over either: 408 and close.
//    * Between requests of a keep-alive connection that completed one: idle_timeout, then closed
//      silently. One response write may take idle_timeout (then the client is gone).
//    * After its last response a connection drains what the client still sends for kLingerTime.
//    * Up to kMaxPipelinedRequests requests are in flight per connection; then parsing pauses and
//      up to kPausedReadBytes are read ahead unparsed (so a client's close is still seen).
//    * Eviction tiers, soonest first: idle (no request in flight and no partial request: between
//      requests, never sent a byte, handshaking, lingering), then reading headers, then reading a
//      body; within a tier the one in it the longest. A connection with a request in flight or a
//      response being written is never evicted: when every one is, the new one is refused.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/error.h"
#include "server/http/http_server.h"

namespace tide::http {

// Bytes asked of the socket per read.
inline constexpr size_t kReadChunk = 4096;
// After the last response on a connection the server stops sending and drains what the client
// still sends for this long before closing, so that closing with unread input does not turn into
// a TCP reset that destroys the response in flight.
inline constexpr std::chrono::milliseconds kLingerTime{1000};

// The numbers a connection runs under.
struct ConnectionLimits {
  std::chrono::milliseconds header_read_timeout{10000};
  std::chrono::milliseconds body_read_timeout{30000};
  std::chrono::milliseconds idle_timeout{60000};
  std::chrono::milliseconds linger_time = kLingerTime;
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 8 * 1024 * 1024;
  size_t max_pipelined_requests = kMaxPipelinedRequests;
  size_t paused_read_bytes = kPausedReadBytes;

  static ConnectionLimits Of(const HttpServerOptions& options);
};

// What the connection is doing, as far as the policy cares.
enum class ConnectionPhase : uint8_t {
  kNone,       // between steps (handing a request to the handler, a read just ended)
  kHandshake,  // TLS handshake in progress, before the first read
  kIdle,       // waiting for a request's first byte
  kHeader,     // reading a request's headers
  kBody,       // reading a request's body
  kPaused,     // parsing paused at max_pipelined_requests, reading ahead unparsed
  kLinger,     // after the last response: draining the client's input before closing
};

// How readily a connection gives way to a new one at max_connections (lower: sooner).
enum class EvictionTier : uint8_t {
  kIdle = 0,    // no request in flight and no partial request (also: never sent a byte, lingering)
  kHeader = 1,  // reading a request's headers, nothing in flight
  kBody = 2,    // reading a request's body, nothing in flight
  kBusy = 3,    // a request in flight or a response being written: never evicted
  kClosed = 4,
};

// What a read deadline that passed means.
enum class ReadTimeoutAction {
  kClose,      // waiting, handshaking or lingering: close without an answer
  kAnswer408,  // in the middle of a request: end the read, answer 408, close
};

// Why a read of a request failed (the state machine maps its transport's errors to these).
enum class ReadFailure {
  kClosedByPeer,  // end of stream, a reset, a transport error: nobody to answer
  kHeaderLimit,   // the head grew past max_header_bytes
  kBodyLimit,     // the body grew past max_body_bytes
  kMalformed,     // not HTTP/1.x
};

// An answer the server gives by itself before closing the connection.
struct ServerAnswer {
  ErrorKind kind;
  std::string message;
};

class ConnectionPolicy {
 public:
  using time_point = Clock::time_point;

  // The connection was accepted now (clock->Now()).
  ConnectionPolicy(const ConnectionLimits& limits, const Clock* clock);

  const ConnectionLimits& limits() const { return limits_; }
  time_point accepted_at() const { return accepted_at_; }
  ConnectionPhase phase() const { return phase_; }
  void set_phase(ConnectionPhase phase) { phase_ = phase; }
  // A request was read whole and handed to the handler.
  void RequestDispatched() { ++requests_read_; }
  uint64_t requests_read() const { return requests_read_; }

  // ---- Deadlines (on the injected clock) ----
  // The TLS handshake counts against the first request's header deadline.
  time_point HandshakeDeadline() const;
  // Waiting for a request's first byte: header_read_timeout from accept before the first request,
  // idle_timeout from now after one.
  time_point IdleDeadline() const;
  // A request's headers began arriving now: the first request's deadline counts from accept.
  time_point HeaderDeadline() const;
  // A request's headers are in: its body has body_read_timeout from now.
  time_point BodyDeadline() const;
  time_point LingerDeadline() const;
  // A response write starts now.
  time_point WriteDeadline() const;

  // ---- What an event means ----
  // The read deadline of the current phase passed.
  ReadTimeoutAction OnReadTimeout() const;
  // The answer to a failed read in the current phase (`timed_out`: the read was ended because its
  // deadline passed; `detail`: the parser's words for a kMalformed request). nullopt: the client is
  // gone and the connection just closes.
  std::optional<ServerAnswer> AnswerReadFailure(ReadFailure failure, bool timed_out,
                                                std::string_view detail) const;

  // ---- Pipelining ----
  // Whether another request may be parsed while `open_responses` responses are still owed.
  bool MayParse(size_t open_responses) const { return open_responses < limits_.max_pipelined_requests; }
  // While parsing is paused, with `buffered` unparsed bytes: how many more to read ahead (0: stop
  // reading; the client's close is then seen at the next write).
  size_t ReadAheadBytes(size_t buffered) const;

  // ---- Eviction ----
  // The tier of the connection in its current phase with `open_responses` responses owed and a
  // write in flight or not.
  EvictionTier Tier(bool closed, size_t open_responses, bool writing) const;
  // Records the connection's tier; true when it changed (tier_since() is now then).
  bool UpdateTier(EvictionTier tier);
  EvictionTier tier() const { return tier_; }
  time_point tier_since() const { return tier_since_; }
  // A connection chosen for eviction still gives way only if it is not busy by the time it hears.
  static bool GivesWay(EvictionTier current) { return current < EvictionTier::kBusy; }

 private:
  ConnectionLimits limits_;
  const Clock* clock_;
  time_point accepted_at_;
  uint64_t requests_read_ = 0;
  ConnectionPhase phase_ = ConnectionPhase::kNone;
  EvictionTier tier_ = EvictionTier::kIdle;
  time_point tier_since_;
};

// One connection as the accept loop sees it at max_connections.
struct EvictionCandidate {
  EvictionTier tier = EvictionTier::kIdle;
  Clock::time_point tier_since;
  bool evicting = false;  // already chosen for an earlier new connection
};

// Picks the connection to close for a new one at max_connections: lowest tier first, within a
// tier the one in it the longest (earliest tier_since; ties go to the first offered). Busy,
// closed and already-evicting connections are never picked.
class EvictionChooser {
 public:
  // Offers one open connection; true when it is now the choice (the caller remembers which).
  bool Offer(const EvictionCandidate& candidate);
  // Whether any offered connection may be evicted; false: the new connection is refused.
  bool found() const { return found_; }

 private:
  bool found_ = false;
  EvictionCandidate best_;
};

// Whether a new connection, with `open` connections already open, is over max_connections (then
// one is evicted for it, or it is refused).
inline bool AtConnectionCap(size_t open, size_t max_connections) { return open >= max_connections; }

}  // namespace tide::http
