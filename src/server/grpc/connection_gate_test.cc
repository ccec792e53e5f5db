// ConnectionGate over real loopback sockets, with the test standing in for gRPC: the handoff keeps
// the accepted descriptors open, as gRPC would, and reports calls as the interceptor does. Waits
// are for conditions (a handoff, an end of stream), bounded generously; nothing is timed.
#include "server/grpc/connection_gate.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace tide::grpc_edge {
namespace {

constexpr int kWaitMs = 10000;  // a bound for conditions, not an expectation

// Stands in for gRPC: owns the handed-over descriptors.
class FakeGrpc {
 public:
  ~FakeGrpc() {
    for (int fd : fds_) close(fd);
  }
  std::function<void(int)> Handoff() {
    return [this](int fd) {
      absl::MutexLock lock(&mu_);
      fds_.push_back(fd);
    };
  }
  // Waits until `n` connections were handed over; the descriptor of the n-th, or -1.
  int WaitFor(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return fds_.size() >= n; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Milliseconds(kWaitMs))) return -1;
    return fds_[n - 1];
  }

 private:
  absl::Mutex mu_;
  std::vector<int> fds_ ABSL_GUARDED_BY(mu_);
};

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends the 24-byte HTTP/2 client preface.
void SendPreface(int fd) {
  const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  ASSERT_EQ(send(fd, preface.data(), preface.size(), MSG_NOSIGNAL), static_cast<ssize_t>(preface.size()));
}

// Waits until the server's side of client socket `fd` is shut down (end of stream or reset).
bool WaitClosed(int fd, int timeout_ms = kWaitMs) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) != 1) return false;
  char c;
  return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

bool StillOpen(int fd) { return !WaitClosed(fd, 0); }

// What gRPC reports as the peer of a call from client socket `fd` ("ipv4:127.0.0.1:<port>").
std::string GrpcPeerOf(int fd) {
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return "";
  return "ipv4:" + PeerKey(reinterpret_cast<const sockaddr*>(&local), len);
}

struct Counted {
  absl::Mutex mu;
  std::vector<ConnectionEvent> events;
};

ConnectionGateOptions Options(size_t max_connections, Counted* counted) {
  ConnectionGateOptions o;
  o.port = 0;
  o.max_connections = max_connections;
  o.descriptor_reserve = 0;
  o.handshake_timeout = std::chrono::milliseconds(600000);
  o.on_event = [counted](ConnectionEvent e) {
    absl::MutexLock lock(&counted->mu);
    counted->events.push_back(e);
  };
  return o;
}

TEST(PeerKey, MatchesWhatGrpcReportsAsThePeer) {
  EXPECT_EQ(PeerKeyOfGrpcPeer("ipv4:127.0.0.1:5000"), "127.0.0.1:5000");
  EXPECT_EQ(PeerKeyOfGrpcPeer("ipv6:%5B::1%5D:5000"), "::1:5000");
  EXPECT_EQ(PeerKeyOfGrpcPeer("ipv6:[::ffff:127.0.0.1]:5000"), "::ffff:127.0.0.1:5000");
  EXPECT_EQ(PeerKeyOfGrpcPeer("unix:/tmp/socket"), "");
  EXPECT_EQ(PeerKeyOfGrpcPeer("fd:7"), "");
  EXPECT_EQ(PeerKeyOfGrpcPeer(""), "");
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  v6.sin6_addr = in6addr_loopback;
  v6.sin6_port = htons(5000);
  EXPECT_EQ(PeerKey(reinterpret_cast<const sockaddr*>(&v6), sizeof(v6)), "::1:5000");
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  v4.sin_port = htons(5000);
  EXPECT_EQ(PeerKey(reinterpret_cast<const sockaddr*>(&v4), sizeof(v4)), "127.0.0.1:5000");
  EXPECT_EQ(PeerKey(reinterpret_cast<const sockaddr*>(&v4), 2), "");
}

TEST(ConnectionGate, EvictsSilentConnectionsOldestFirstAndNeverBusyOnes) {
  Counted counted;
  auto gate = ConnectionGate::Create(Options(2, &counted));
  ASSERT_TRUE(gate.ok()) << gate.status();
  ASSERT_EQ((*gate)->max_connections(), 2u);
  FakeGrpc grpc;
  (*gate)->Start(grpc.Handoff());
  const int port = (*gate)->port();

  const int client = Connect(port);  // speaks gRPC
  ASSERT_GE(client, 0);
  SendPreface(client);
  const int client_server_fd = grpc.WaitFor(1);
  ASSERT_GE(client_server_fd, 0);
  const int silent1 = Connect(port);
  ASSERT_GE(grpc.WaitFor(2), 0);
  const int silent2 = Connect(port);  // at the cap: the silent one gives way, not the client
  ASSERT_GE(grpc.WaitFor(3), 0);
  EXPECT_TRUE(WaitClosed(silent1));
  EXPECT_TRUE(StillOpen(client));
  EXPECT_EQ((*gate)->evicted_connections(), 1u);

  // With the client's call in flight, a new connection evicts the silent one again...
  const uint64_t call = (*gate)->CallStarted(GrpcPeerOf(client));
  ASSERT_NE(call, 0u);
  const int silent3 = Connect(port);
  ASSERT_GE(grpc.WaitFor(4), 0);
  EXPECT_TRUE(WaitClosed(silent2));
  // ...then silent3 gives way to silent4; the busy client is never chosen.
  const int silent4 = Connect(port);
  ASSERT_GE(grpc.WaitFor(5), 0);
  EXPECT_TRUE(WaitClosed(silent3));
  EXPECT_TRUE(StillOpen(client));
  EXPECT_TRUE(StillOpen(silent4));

  // Once the call has ended the client is idle, and a silent connection still gives way first.
  // (Which idle connection goes first is ConnectionTable's test: TCP_INFO counts milliseconds.)
  (*gate)->CallFinished(call);
  const int late = Connect(port);
  ASSERT_GE(grpc.WaitFor(6), 0);
  EXPECT_TRUE(WaitClosed(silent4));
  EXPECT_TRUE(StillOpen(client));
  EXPECT_EQ((*gate)->evicted_connections(), 4u);
  EXPECT_EQ((*gate)->refused_connections(), 0u);
  EXPECT_EQ((*gate)->open_connections(), 2u);
  {
    absl::MutexLock lock(&counted.mu);
    EXPECT_EQ(counted.events, std::vector<ConnectionEvent>(4, ConnectionEvent::kEvicted));
  }
  for (int fd : {client, silent1, silent2, silent3, silent4, late}) close(fd);
}

TEST(ConnectionGate, RefusesWhenEveryConnectionHasACallInFlight) {
  Counted counted;
  auto gate = ConnectionGate::Create(Options(1, &counted));
  ASSERT_TRUE(gate.ok()) << gate.status();
  FakeGrpc grpc;
  (*gate)->Start(grpc.Handoff());
  const int client = Connect((*gate)->port());
  const int server_fd = grpc.WaitFor(1);
  ASSERT_GE(server_fd, 0);
  const uint64_t call = (*gate)->CallStarted(GrpcPeerOf(client));
  ASSERT_NE(call, 0u);
  const int refused = Connect((*gate)->port());  // the kernel completes the TCP handshake...
  EXPECT_TRUE(WaitClosed(refused));               // ...then the gate closes it
  EXPECT_TRUE(StillOpen(client));
  EXPECT_EQ((*gate)->refused_connections(), 1u);
  EXPECT_EQ((*gate)->evicted_connections(), 0u);
  // A peer that is not one of the gate's connections is not counted.
  EXPECT_EQ((*gate)->CallStarted("ipv4:127.0.0.1:1"), 0u);
  EXPECT_EQ((*gate)->CallStarted("unix:/tmp/x"), 0u);
  (*gate)->CallFinished(call);
  close(client);
  close(refused);
}

TEST(ConnectionGate, ClosesConnectionsThatDoNotSendThePrefaceInTime) {
  Counted counted;
  ConnectionGateOptions o = Options(16, &counted);
  o.handshake_timeout = std::chrono::milliseconds(100);
  auto gate = ConnectionGate::Create(o);
  ASSERT_TRUE(gate.ok()) << gate.status();
  FakeGrpc grpc;
  (*gate)->Start(grpc.Handoff());
  // The client connects first, so a sweep that wrongly timed it out would do so no later than
  // the silent one.
  const int client = Connect((*gate)->port());
  SendPreface(client);
  ASSERT_GE(grpc.WaitFor(1), 0);
  const int silent = Connect((*gate)->port());
  ASSERT_GE(grpc.WaitFor(2), 0);
  EXPECT_TRUE(WaitClosed(silent));
  EXPECT_TRUE(StillOpen(client));
  EXPECT_EQ((*gate)->handshake_timeouts(), 1u);
  EXPECT_EQ((*gate)->open_connections(), 1u);
  {
    absl::MutexLock lock(&counted.mu);
    EXPECT_EQ(counted.events, std::vector<ConnectionEvent>{ConnectionEvent::kHandshakeTimeout});
  }
  close(client);
  close(silent);
}

TEST(ConnectionGate, ForgetsConnectionsGrpcHasClosed) {
  Counted counted;
  auto gate = ConnectionGate::Create(Options(1, &counted));
  ASSERT_TRUE(gate.ok()) << gate.status();
  std::vector<int> handed;
  absl::Mutex mu;
  // This "gRPC" closes each connection at once: the cap must not fill up with them.
  (*gate)->Start([&](int fd) {
    close(fd);
    absl::MutexLock lock(&mu);
    handed.push_back(fd);
  });
  std::vector<int> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(Connect((*gate)->port()));
    absl::MutexLock lock(&mu);
    auto done = [&handed, i] { return handed.size() > static_cast<size_t>(i); };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&done), absl::Milliseconds(kWaitMs)));
  }
  EXPECT_EQ((*gate)->evicted_connections(), 0u);
  EXPECT_EQ((*gate)->refused_connections(), 0u);
  for (int fd : clients) close(fd);
}

TEST(ConnectionGate, LowersTheCapToKeepTheDescriptorReserve) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit lowered = saved;
  lowered.rlim_cur = 512;
  if (saved.rlim_max < lowered.rlim_cur) GTEST_SKIP() << "hard open-file limit below 512";
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  ConnectionGateOptions o;
  o.port = 0;
  o.max_connections = 100000;
  o.descriptor_reserve = 100;
  auto gate = ConnectionGate::Create(o);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_TRUE(gate.ok()) << gate.status();
  EXPECT_LE((*gate)->max_connections(), 512u - 100u);
  EXPECT_GE((*gate)->max_connections(), 1u);
}

TEST(ConnectionGate, RejectsBadOptionsAndATakenPort) {
  ConnectionGateOptions o;
  o.port = 0;
  o.max_connections = 0;
  EXPECT_EQ(ConnectionGate::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.max_connections = 4;
  o.handshake_timeout = std::chrono::milliseconds(0);
  EXPECT_EQ(ConnectionGate::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.handshake_timeout = std::chrono::milliseconds(1000);
  auto first = ConnectionGate::Create(o);
  ASSERT_TRUE(first.ok()) << first.status();
  o.port = (*first)->port();
  auto second = ConnectionGate::Create(o);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
}

}  // namespace
}  // namespace tide::grpc_edge
