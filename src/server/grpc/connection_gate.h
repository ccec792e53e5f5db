// tide::grpc_edge::ConnectionGate — accepts the gRPC port's TCP connections in tide, caps them and
// hands each admitted socket to gRPC. gRPC 1.51 (Debian 12) has no cap on incoming connections:
// a flood of silent connections takes every descriptor and new clients (and Kubernetes' gRPC
// probes) cannot connect. The gate holds the gRPC edge to the HTTP edge's rules.
//
// Contract:
//  - Create binds and listens on host:port (port 0: a free one; port() tells which); UNAVAILABLE
//    naming the address when it cannot (e.g. the port is taken), INVALID_ARGUMENT for options out
//    of range. Start(handoff) starts one thread that accepts and sweeps; each admitted socket is
//    non-blocking, close-on-exec, TCP_NODELAY, and passed to `handoff`, which takes ownership of the
//    descriptor (GrpcServer: gRPC's ExternalConnectionAcceptor, which runs gRPC's own handshake
//    with the server's credentials on it, as for a connection gRPC accepted). Stop() closes the listener and joins
//    the thread; connections already handed over stay with gRPC. Idempotent; the destructor stops.
//  - Cap: at max_connections() open connections a new one first evicts (shutdown(2); gRPC then
//    closes it) the connection that gives way first in ConnectionTable's order: the peer closed,
//    else still handshaking (fewer than 24 bytes: not even the HTTP/2 preface) the longest, else
//    idle (no call in flight) the longest. Only when every connection has a call in flight is the
//    new one refused (closed at once: gRPC clients see UNAVAILABLE and retry).
//    max_connections() is options.max_connections lowered, when needed, so that the open-file
//    limit keeps options.descriptor_reserve descriptors spare beyond the cap (for the HTTP and
//    admin listeners, model files, logs).
//  - Handshake timeout: a connection that has not delivered the HTTP/2 preface within
//    handshake_timeout of accept is closed (swept every handshake_timeout / 4, 50..250 ms).
//  - What the gate knows of a socket it reads with getsockopt (SO_COOKIE identifies it, TCP_INFO
//    gives bytes received and time since the last data), and what it knows of calls the gRPC
//    server tells it (CallStarted / CallFinished by the call's peer, from a server interceptor). Every descriptor is
//    checked against its cookie before it is read or shut down, so a number gRPC has closed and
//    the process reused is never touched.
//  - Out of descriptors (EMFILE/ENFILE at accept): the gate closes a spare descriptor it keeps,
//    accepts the waiting connection, closes it and reopens the spare, so the backlog does not hang
//    clients; such connections count as refused.
//  - on_event runs on the gate's thread for each eviction, refusal and handshake timeout; it must
//    be quick and thread-safe. CallStarted / CallFinished and the counters are thread-safe.
//  - TLS: the gate only moves TCP connections; gRPC's handshake (plaintext or TLS) runs after the
//    handoff. With TLS a silent client is still "handshaking" (under 24 bytes), but one that sent
//    a ClientHello and stalls counts as idle here; gRPC's own handshake timeout closes it.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/grpc/connection_table.h"

namespace tide::grpc_edge {

enum class ConnectionEvent { kEvicted, kRefused, kHandshakeTimeout };

// The key ConnectionTable finds a connection by: "address:port" of the client, without brackets
// ("127.0.0.1:5000", "::1:5000"). PeerKey(address) makes it from an accepted socket's peer
// address; PeerKeyOfGrpcPeer from what gRPC reports as a call's peer ("ipv4:127.0.0.1:5000",
// "ipv6:%5B::1%5D:5000", brackets percent-encoded or not). Empty when there is none.
std::string PeerKey(const sockaddr* address, size_t length);
std::string PeerKeyOfGrpcPeer(std::string_view grpc_peer);

struct ConnectionGateOptions {
  std::string host = "127.0.0.1";
  int port = 8001;  // 0: a free one
  // Open gRPC connections (tide serve --grpc-max-connections); see the contract for eviction.
  size_t max_connections = 1024;
  // From accept to the HTTP/2 client preface (--grpc-handshake-timeout-ms). gRPC's own default
  // is 120 s; the HTTP edge's header timeout is 10 s.
  std::chrono::milliseconds handshake_timeout{10000};
  // Descriptors kept spare beyond the cap (--grpc-descriptor-reserve).
  size_t descriptor_reserve = 256;
  std::function<void(ConnectionEvent)> on_event;
};

class ConnectionGate {
 public:
  static absl::StatusOr<std::unique_ptr<ConnectionGate>> Create(const ConnectionGateOptions& options);
  ~ConnectionGate();
  ConnectionGate(const ConnectionGate&) = delete;
  ConnectionGate& operator=(const ConnectionGate&) = delete;

  int port() const { return port_; }
  int listener_fd() const { return listen_fd_; }
  // The cap in force (options.max_connections, lowered to fit the open-file limit).
  size_t max_connections() const { return max_connections_; }

  void Start(std::function<void(int fd)> handoff);
  void Stop();

  // A call started on the connection from `grpc_peer` (ServerContext::peer()); returns the
  // connection's id for CallFinished, or 0 when it is not an open connection of this gate.
  uint64_t CallStarted(std::string_view grpc_peer);
  void CallFinished(uint64_t id);

  size_t open_connections() const;
  uint64_t evicted_connections() const { return evicted_.load(); }
  uint64_t refused_connections() const { return refused_.load(); }
  uint64_t handshake_timeouts() const { return handshake_timeouts_.load(); }

 private:
  ConnectionGate() = default;
  void Run();
  void AcceptReady();
  void Admit(int fd, std::string peer);
  // Re-reads every connection's socket; drops the ones gRPC has closed.
  void Refresh();
  // Shuts down connection `id` (descriptor `fd`) if that descriptor still is that socket.
  void Close(uint64_t id, int fd);
  void Emit(ConnectionEvent event);

  ConnectionGateOptions options_;
  size_t max_connections_ = 0;
  int port_ = 0;
  int listen_fd_ = -1;
  int wake_fd_ = -1;   // eventfd: Stop() wakes the thread
  int spare_fd_ = -1;  // given up for one accept when the process is out of descriptors
  std::function<void(int)> handoff_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;

  mutable absl::Mutex mu_;
  ConnectionTable table_ ABSL_GUARDED_BY(mu_);

  std::atomic<uint64_t> evicted_{0};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> handshake_timeouts_{0};
};

}  // namespace tide::grpc_edge
