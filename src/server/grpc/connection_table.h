// tide::grpc_edge::ConnectionTable — the bookkeeping behind the gRPC edge's connection cap: which
// open connection gives way to a new one, and which are past the handshake timeout.
//
// Contract:
//  - Pure bookkeeping: no sockets, no clock. Callers pass `now` and what the socket reported
//    (ConnectionGate reads it with getsockopt), so tests drive it with made-up times.
//  - A connection is identified by an id the caller chooses (the gate uses the socket's SO_COOKIE,
//    unique for the life of the system), carries the caller's descriptor number as `fd`, and can
//    be found by its peer ("address:port" of the client, as PeerKey in connection_gate.h makes it).
//  - Phases, in the order they give way (ChooseVictim): kClosing (the peer has closed its side;
//    gRPC will close it too), kHandshaking (fewer than kHandshakeBytes received: not even the
//    HTTP/2 client preface), kIdle (no call in flight), kBusy (a call in flight: never chosen).
//    Within a phase the oldest goes first: by accept time while handshaking or closing, by the
//    last byte sent or received (or the last call's end) while idle.
//  - Not thread-safe: the gate guards it with its mutex.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace tide::grpc_edge {

enum class ConnectionPhase : uint8_t { kClosing = 0, kHandshaking = 1, kIdle = 2, kBusy = 3 };

class ConnectionTable {
 public:
  using Clock = std::chrono::steady_clock;

  // The HTTP/2 client connection preface ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", RFC 9113 §3.4): a
  // connection that delivered fewer bytes has not started speaking gRPC.
  static constexpr uint64_t kHandshakeBytes = 24;

  // What the socket said at `now` (ConnectionGate: TCP_INFO).
  struct Sample {
    uint64_t bytes_received = 0;
    // The last byte sent or received (TCP_INFO's last_data_recv / last_data_sent).
    Clock::time_point last_data;
    bool peer_closed = false;  // the client sent FIN or RST
  };

  struct Entry {
    int fd = -1;
    std::string peer;
    Clock::time_point accepted_at;
    Clock::time_point last_active;  // last data or call end, whichever is later
    uint64_t bytes_received = 0;
    int calls_in_flight = 0;
    bool peer_closed = false;
  };

  // A new connection (replaces an entry with the same id). `peer` may be empty (not findable).
  void Add(uint64_t id, int fd, std::string peer, Clock::time_point now);
  void Remove(uint64_t id);
  bool Contains(uint64_t id) const { return entries_.count(id) > 0; }
  size_t size() const { return entries_.size(); }

  // Updates a connection from its socket; unknown ids are ignored.
  void Observe(uint64_t id, const Sample& sample);
  // A call started / ended on the connection; unknown ids are ignored (the connection was already
  // removed). The end of a call counts as activity.
  void CallStarted(uint64_t id);
  void CallFinished(uint64_t id, Clock::time_point now);

  ConnectionPhase Phase(const Entry& entry) const;
  const Entry* Find(uint64_t id) const;
  // The open connection from `peer`, if any.
  std::optional<uint64_t> FindByPeer(const std::string& peer) const;

  // The connection to close for a new one at the cap (see the contract), or nullopt when every
  // connection has a call in flight.
  std::optional<uint64_t> ChooseVictim() const;
  // Connections still handshaking (or closed by the peer) `timeout` or longer after accept.
  std::vector<uint64_t> HandshakeExpired(Clock::time_point now, Clock::duration timeout) const;
  // Every id with its descriptor (the gate re-reads their sockets).
  std::vector<std::pair<uint64_t, int>> Connections() const;

 private:
  std::unordered_map<uint64_t, Entry> entries_;
  std::unordered_map<std::string, uint64_t> by_peer_;
};

}  // namespace tide::grpc_edge
