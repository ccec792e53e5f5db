#include "server/grpc/connection_gate.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/tcp.h>  // struct tcp_info with tcpi_bytes_received (glibc's is older)
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace tide::grpc_edge {

namespace {

using Clock = ConnectionTable::Clock;

// TCP states (the kernel's include/net/tcp_states.h; not in the UAPI headers).
constexpr uint8_t kTcpClose = 7;
constexpr uint8_t kTcpCloseWait = 8;
// Connections accepted per wake-up before the gate sweeps again.
constexpr int kAcceptBatch = 64;
// Candidates re-read at the cap before the gate evicts its current choice without re-reading more.
constexpr int kMaxRechecks = 8;

// The socket's SO_COOKIE (unique while the system runs), or 0 when `fd` is not an open socket.
uint64_t SocketCookie(int fd) {
  uint64_t cookie = 0;
  socklen_t len = sizeof(cookie);
  if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len) != 0) return 0;
  return cookie;
}

// Reads connection `id`'s socket at descriptor `fd`. False when `fd` is no longer that socket.
bool ReadSample(uint64_t id, int fd, Clock::time_point now, ConnectionTable::Sample* sample) {
  if (SocketCookie(fd) != id) return false;
  tcp_info info{};
  socklen_t len = sizeof(info);
  const bool read = getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0;
  // Read again: if `fd` still is socket `id`, it was that socket in between too (a closed socket
  // never comes back), so TCP_INFO describes it.
  if (SocketCookie(fd) != id) return false;
  if (!read) return true;  // keep what the table knows
  const bool has_bytes = len >= offsetof(tcp_info, tcpi_bytes_received) + sizeof(info.tcpi_bytes_received);
  sample->bytes_received = has_bytes ? info.tcpi_bytes_received : ConnectionTable::kHandshakeBytes;
  sample->last_data = now - std::chrono::milliseconds(std::min(info.tcpi_last_data_recv, info.tcpi_last_data_sent));
  sample->peer_closed = info.tcpi_state == kTcpCloseWait || info.tcpi_state == kTcpClose;
  return true;
}

size_t OpenDescriptors() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  size_t n = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n > 0 ? n - 1 : 0;  // not the directory's own descriptor
}

}  // namespace

std::string PeerKey(const sockaddr* address, size_t length) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address->sa_family == AF_INET && length >= sizeof(sockaddr_in)) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(address);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) == nullptr) return "";
    return absl::StrCat(text, ":", ntohs(in->sin_port));
  }
  if (address->sa_family == AF_INET6 && length >= sizeof(sockaddr_in6)) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(address);
    if (inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text)) == nullptr) return "";
    return absl::StrCat(text, ":", ntohs(in6->sin6_port));
  }
  return "";
}

std::string PeerKeyOfGrpcPeer(std::string_view grpc_peer) {
  const size_t colon = grpc_peer.find(':');
  if (colon == std::string_view::npos) return "";
  const std::string_view scheme = grpc_peer.substr(0, colon);
  if (scheme != "ipv4" && scheme != "ipv6") return "";
  std::string key;
  for (size_t i = colon + 1; i < grpc_peer.size(); ++i) {
    const std::string_view rest = grpc_peer.substr(i);
    if (rest.size() >= 3 && rest[0] == '%' && (rest.substr(0, 3) == "%5B" || rest.substr(0, 3) == "%5b" ||
                                               rest.substr(0, 3) == "%5D" || rest.substr(0, 3) == "%5d")) {
      i += 2;
      continue;
    }
    if (rest[0] == '[' || rest[0] == ']') continue;
    key.push_back(rest[0]);
  }
  return key;
}

absl::StatusOr<std::unique_ptr<ConnectionGate>> ConnectionGate::Create(const ConnectionGateOptions& options) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("gRPC port ", options.port, " is out of range"));
  }
  if (options.max_connections < 1) return absl::InvalidArgumentError("--grpc-max-connections must be at least 1");
  if (options.handshake_timeout.count() <= 0) {
    return absl::InvalidArgumentError("--grpc-handshake-timeout-ms must be positive");
  }
  std::unique_ptr<ConnectionGate> gate(new ConnectionGate());
  gate->options_ = options;

  // Fit the cap under the open-file limit, with the reserve spare.
  gate->max_connections_ = options.max_connections;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    const size_t soft = static_cast<size_t>(limit.rlim_cur);
    const size_t open_now = OpenDescriptors();
    const size_t used = open_now + options.descriptor_reserve + 3;  // + listener, eventfd, spare
    const size_t budget = soft > used ? soft - used : 1;
    if (budget < gate->max_connections_) {
      spdlog::warn("gRPC: --grpc-max-connections {} lowered to {} (open-file limit {}: {} open, {} reserved)",
                   options.max_connections, budget, soft, open_now, options.descriptor_reserve);
      gate->max_connections_ = budget;
    }
  }

  const std::string address = absl::StrCat(options.host, ":", options.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(options.port);
  if (const int rc = getaddrinfo(options.host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat("gRPC: cannot resolve ", address, ": ", gai_strerror(rc)));
  }
  int fd = -1;
  std::string error = "no address";
  for (addrinfo* ai = found; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
      error = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("gRPC: cannot listen on ", address, " (", error, ")"));
  gate->listen_fd_ = fd;
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
    gate->port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                    : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  gate->wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  gate->spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (gate->wake_fd_ < 0 || gate->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("gRPC: cannot listen on ", address, " (", std::strerror(errno), ")"));
  }
  return gate;
}

ConnectionGate::~ConnectionGate() {
  Stop();
  for (int fd : {listen_fd_, wake_fd_, spare_fd_}) {
    if (fd >= 0) close(fd);
  }
}

void ConnectionGate::Start(std::function<void(int fd)> handoff) {
  if (thread_.joinable() || stopping_.load()) return;
  handoff_ = std::move(handoff);
  thread_ = std::thread([this] { Run(); });
}

void ConnectionGate::Stop() {
  stopping_.store(true);
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    listen_fd_ = -1;
  }
}

void ConnectionGate::Run() {
  const auto period = std::clamp<std::chrono::milliseconds>(options_.handshake_timeout / 4, std::chrono::milliseconds(50),
                                                            std::chrono::milliseconds(250));
  auto next_sweep = Clock::now() + period;
  while (!stopping_.load()) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_sweep - Clock::now());
    const int ready = poll(fds, 2, static_cast<int>(std::max<int64_t>(wait.count(), 0)));
    if (stopping_.load()) break;
    if (ready > 0 && (fds[0].revents & POLLIN) != 0) AcceptReady();
    if (Clock::now() < next_sweep) continue;
    next_sweep = Clock::now() + period;
    Refresh();
    std::vector<std::pair<uint64_t, int>> expired;
    {
      absl::MutexLock lock(&mu_);
      for (uint64_t id : table_.HandshakeExpired(Clock::now(), options_.handshake_timeout)) {
        expired.emplace_back(id, table_.Find(id)->fd);
        table_.Remove(id);
      }
    }
    // Counted before the close, so that whoever sees the close sees the count.
    for (const auto& [id, fd] : expired) {
      handshake_timeouts_.fetch_add(1);
      Emit(ConnectionEvent::kHandshakeTimeout);
      Close(id, fd);
    }
  }
}

void ConnectionGate::AcceptReady() {
  for (int i = 0; i < kAcceptBatch; ++i) {
    sockaddr_storage peer{};
    socklen_t peer_length = sizeof(peer);
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &peer_length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      Admit(fd, PeerKey(reinterpret_cast<const sockaddr*>(&peer), peer_length));
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if ((errno == EMFILE || errno == ENFILE) && spare_fd_ >= 0) {
      // Out of descriptors: take the waiting connection with the spare one and close it, so that
      // its client is told at once instead of hanging in the backlog.
      close(spare_fd_);
      const int refused = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (refused >= 0) {
        refused_.fetch_add(1);
        Emit(ConnectionEvent::kRefused);
        close(refused);
      }
      spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (refused >= 0) continue;
    }
    return;  // EAGAIN, or an error the next wake-up retries
  }
}

void ConnectionGate::Admit(int fd, std::string peer) {
  const uint64_t id = SocketCookie(fd);
  if (id == 0) {  // SO_COOKIE needs Linux 4.12; without it the gate cannot tell sockets apart
    refused_.fetch_add(1);
    Emit(ConnectionEvent::kRefused);
    close(fd);
    return;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  // At the cap: the table's choice is re-read first (it may have spoken, or gRPC may have closed it
  // since the last sweep) and chosen again until the choice holds. Re-reading only candidates
  // keeps an admission at a few system calls however many connections are open, so a flood
  // drains from the backlog at accept speed and a new client behind it is not kept waiting.
  for (int attempt = 0;; ++attempt) {
    std::optional<uint64_t> victim;
    int victim_fd = -1;
    {
      absl::MutexLock lock(&mu_);
      if (table_.size() < max_connections_) break;
      victim = table_.ChooseVictim();
      if (victim) victim_fd = table_.Find(*victim)->fd;
    }
    if (!victim) {  // every connection has a call in flight
      refused_.fetch_add(1);
      Emit(ConnectionEvent::kRefused);
      close(fd);
      return;
    }
    const Clock::time_point now = Clock::now();
    ConnectionTable::Sample sample{.last_data = now - std::chrono::hours(24)};
    const bool alive = ReadSample(*victim, victim_fd, now, &sample);
    bool evict = false;
    {
      absl::MutexLock lock(&mu_);
      if (!alive) {
        table_.Remove(*victim);  // gRPC closed it: room without evicting
        continue;
      }
      table_.Observe(*victim, sample);
      if (attempt >= kMaxRechecks || table_.ChooseVictim() == victim) {
        table_.Remove(*victim);
        evict = true;
      }
    }
    if (evict) {
      evicted_.fetch_add(1);
      Emit(ConnectionEvent::kEvicted);
      Close(*victim, victim_fd);
      break;
    }
  }
  {
    absl::MutexLock lock(&mu_);
    table_.Add(id, fd, std::move(peer), Clock::now());
  }
  handoff_(fd);
}

void ConnectionGate::Refresh() {
  std::vector<std::pair<uint64_t, int>> connections;
  {
    absl::MutexLock lock(&mu_);
    connections = table_.Connections();
  }
  // Read the sockets outside the lock (calls starting on gRPC's threads take it).
  const Clock::time_point now = Clock::now();
  std::vector<std::pair<uint64_t, ConnectionTable::Sample>> samples;
  std::vector<uint64_t> gone;
  samples.reserve(connections.size());
  for (const auto& [id, fd] : connections) {
    ConnectionTable::Sample sample{.last_data = now - std::chrono::hours(24)};
    if (ReadSample(id, fd, now, &sample)) {
      samples.emplace_back(id, sample);
    } else {
      gone.push_back(id);
    }
  }
  absl::MutexLock lock(&mu_);
  for (const auto& [id, sample] : samples) table_.Observe(id, sample);
  for (uint64_t id : gone) table_.Remove(id);
}

void ConnectionGate::Close(uint64_t id, int fd) {
  // Shut the socket down through a duplicate that is checked to be socket `id`: between the check
  // and the shutdown gRPC may close `fd`, and the number may be reused, but the duplicate still
  // refers to the socket checked. gRPC sees end of stream and closes its descriptor.
  const int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup >= 0) {
    if (SocketCookie(dup) == id) shutdown(dup, SHUT_RDWR);
    close(dup);
  } else if (SocketCookie(fd) == id) {
    shutdown(fd, SHUT_RDWR);  // out of descriptors for the duplicate
  }
}

void ConnectionGate::Emit(ConnectionEvent event) {
  if (options_.on_event) options_.on_event(event);
}

uint64_t ConnectionGate::CallStarted(std::string_view grpc_peer) {
  const std::string key = PeerKeyOfGrpcPeer(grpc_peer);
  if (key.empty()) return 0;
  absl::MutexLock lock(&mu_);
  const std::optional<uint64_t> id = table_.FindByPeer(key);
  if (!id) return 0;
  table_.CallStarted(*id);
  return *id;
}

void ConnectionGate::CallFinished(uint64_t id) {
  if (id == 0) return;
  absl::MutexLock lock(&mu_);
  table_.CallFinished(id, Clock::now());
}

size_t ConnectionGate::open_connections() const {
  absl::MutexLock lock(&mu_);
  return table_.size();
}

}  // namespace tide::grpc_edge
