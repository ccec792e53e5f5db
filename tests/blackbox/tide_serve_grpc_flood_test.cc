// Black-box test of the gRPC edge's connection cap: `tide serve` limited to
// 1024 open files (prlimit) gets 1500 silent TCP connections on its gRPC port. Without a cap they
// took every descriptor and gRPC kept them for its 120 s handshake timeout, so a new client (and a
// Kubernetes gRPC probe) could not connect. With the gate, the silent ones give way: a new client's
// ServerReady and health check answer within a 1 s deadline, a tei.v1 Rerank succeeds, and the
// HTTP edge answers too. Loopback only; bounded in connections and time.
// Skips (with the reason) when tide was built without gRPC or prlimit(1) is missing.
#include "gtest/gtest.h"

#ifndef TIDE_HAVE_GRPC

TEST(ServeGrpcFloodTest, Skipped) {
  GTEST_SKIP() << "tide was built without gRPC (libgrpc++-dev / grpc_cpp_plugin missing; run scripts/bootstrap.sh)";
}

#else

#include <netinet/in.h>
#include <sys/resource.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "blackbox_support.h"
#include "raw_socket.h"
#include "gmock/gmock.h"
#include "grpc_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "health.grpc.pb.h"
#include "server_process.h"
#include "http_client.h"
#include "tei.grpc.pb.h"

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int kServerFileLimit = 1024;
constexpr int kFlood = 1500;
constexpr char kPrlimit[] = "/usr/bin/prlimit";

// A TCP connection that never sends a byte; -1 when connect fails.
int SilentConnection(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
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

// Whether the server has closed silent connection `fd`: gRPC may have sent its SETTINGS frame
// first, so read what arrived until the end of the stream (closed), a reset (closed) or nothing
// more for now (open).
bool ClosedByServer(int fd) {
  char buffer[4096];
  for (;;) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n > 0) continue;
    return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
  }
}

std::unique_ptr<grpc::ClientContext> Within(std::chrono::milliseconds timeout) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + timeout);
  return ctx;
}

TEST(ServeGrpcFloodTest, NewClientsAreServedWhileSilentConnectionsFloodTheGrpcPort) {
  if (access(kPrlimit, X_OK) != 0) GTEST_SKIP() << kPrlimit << " (util-linux) is missing";
  // This process holds the flood: raise its own open-file limit for it.
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_max < static_cast<rlim_t>(kFlood + 512)) {
    GTEST_SKIP() << "hard open-file limit " << limit.rlim_max << " is below " << kFlood + 512;
  }
  const rlimit saved = limit;
  limit.rlim_cur = limit.rlim_max;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &limit), 0);

  TempDir scratch;
  const fs::path repository = scratch.path() / "repo";
  ASSERT_TRUE(AddTinyBert(repository, "m", TinyBertConfig()).ok());
  const int grpc_port = FreePort();
  ASSERT_NE(grpc_port, 0);
  tide::testing::ServerProcessOptions options;
  options.binary = kPrlimit;
  // The handshake timeout is long, so that only the cap removes the silent connections here.
  options.args = {"--nofile=" + std::to_string(kServerFileLimit) + ":" + std::to_string(kServerFileLimit),
                  TideBinary().string(), "serve", "--model-repository", repository.string(),
                  "--grpc-port", std::to_string(grpc_port), "--grpc-handshake-timeout-ms", "120000",
                  "--log-level", "warn"};
  options.startup_timeout = std::chrono::milliseconds(120000);
  auto started = tide::testing::ServerProcess::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  tide::testing::ServerProcess& server = **started;
  ASSERT_THAT(server.Stdout(), HasSubstr("tide: grpc listening on 127.0.0.1:" + std::to_string(grpc_port)));
  tide::testing::HttpClient http(server.host(), server.port(), std::chrono::milliseconds(30000));
  const std::string metrics = http.Get("/metrics").body;
  const double cap = MetricSum(metrics, "tide_grpc_max_connections", {});
  // Lowered under the 1024-file limit, with the descriptor reserve spare.
  ASSERT_GT(cap, 0) << metrics;
  ASSERT_LT(cap, kServerFileLimit - 256 + 1);

  std::vector<int> flood;
  flood.reserve(kFlood);
  for (int i = 0; i < kFlood; ++i) {
    const int fd = SilentConnection(grpc_port);
    ASSERT_GE(fd, 0) << "connection " << i << ": " << std::strerror(errno);
    flood.push_back(fd);
  }
  // Every flood connection accepted: all but `cap` evicted (the HTTP edge answers meanwhile).
  const double expected_evictions = kFlood - cap;
  double evicted = 0;
  WaitFor(
      [&] {
        evicted = MetricSum(http.Get("/metrics").body, "tide_http_connection_limit_total",
                            {R"(listener="grpc")", R"(action="evicted")"});
        return evicted >= expected_evictions;
      },
      std::chrono::seconds(60));
  ASSERT_EQ(evicted, expected_evictions) << server.Diagnostics();

  // A new client, with the port full of silent connections: answered within 1 s.
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port), grpc::InsecureChannelCredentials());
  {
    auto kserve = inference::GRPCInferenceService::NewStub(channel);
    inference::ServerReadyResponse ready;
    auto ctx = Within(std::chrono::milliseconds(1000));
    const grpc::Status s = kserve->ServerReady(ctx.get(), {}, &ready);
    ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
    EXPECT_TRUE(ready.ready());
  }
  {
    auto health = grpc::health::v1::Health::NewStub(channel);
    grpc::health::v1::HealthCheckRequest req;
    req.set_service("liveness");
    grpc::health::v1::HealthCheckResponse r;
    auto ctx = Within(std::chrono::milliseconds(1000));
    const grpc::Status s = health->Check(ctx.get(), req, &r);
    ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
    EXPECT_EQ(r.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }
  {
    auto rerank = tei::v1::Rerank::NewStub(channel);
    tei::v1::RerankRequest req;
    req.set_query("what is a reranker");
    req.add_texts("a reranker orders documents by relevance");
    req.add_texts("bananas are yellow");
    tei::v1::RerankResponse r;
    auto ctx = Within(std::chrono::milliseconds(30000));  // inference on a loaded test machine
    const grpc::Status s = rerank->Rerank(ctx.get(), req, &r);
    ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
    EXPECT_EQ(r.ranks_size(), 2);
  }
  // The HTTP edge still answers.
  EXPECT_EQ(http.Get("/v2/health/ready").status, 200);
  // The silent connections the cap closed see the end of the stream; the server kept `cap` of
  // them (at most: the new client took one place).
  int closed = 0;
  for (int fd : flood) {
    if (ClosedByServer(fd)) ++closed;
  }
  EXPECT_GE(closed, expected_evictions);
  EXPECT_LE(closed, expected_evictions + 1);
  for (int fd : flood) close(fd);
  EXPECT_TRUE(server.Stop().ok());
  setrlimit(RLIMIT_NOFILE, &saved);
}

// The gate learns from gRPC which connections have a call in flight (a server interceptor, by the
// call's peer): at --grpc-max-connections 1, with a health Watch stream open on the one
// connection, a new connection is refused instead of evicting it, and the stream still gets the
// NOT_SERVING that draining sends.
TEST(ServeGrpcFloodTest, AConnectionWithACallInFlightIsNeverEvicted) {
  TempDir scratch;
  const fs::path repository = scratch.path() / "repo";
  ASSERT_TRUE(AddTinyBert(repository, "m", TinyBertConfig()).ok());
  const int grpc_port = FreePort();
  ASSERT_NE(grpc_port, 0);
  auto started = StartTideServe(repository, {"--grpc-port", std::to_string(grpc_port), "--grpc-max-connections", "1",
                                             "--log-level", "warn"});
  ASSERT_TRUE(started.ok()) << started.status();
  tide::testing::ServerProcess& server = **started;
  tide::testing::HttpClient http(server.host(), server.port(), std::chrono::milliseconds(30000));
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port), grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext watch_ctx;
  grpc::health::v1::HealthCheckRequest req;
  req.set_service("readiness");
  auto watch = health->Watch(&watch_ctx, req);
  grpc::health::v1::HealthCheckResponse r;
  ASSERT_TRUE(watch->Read(&r));
  EXPECT_EQ(r.status(), grpc::health::v1::HealthCheckResponse::SERVING);

  const int silent = SilentConnection(grpc_port);
  ASSERT_GE(silent, 0);
  double refused = 0;
  WaitFor(
      [&] {
        refused = MetricSum(http.Get("/metrics").body, "tide_http_connection_limit_total",
                            {R"(listener="grpc")", R"(action="refused")"});
        return refused >= 1;
      },
      std::chrono::seconds(30));
  EXPECT_EQ(refused, 1) << server.Diagnostics();
  EXPECT_EQ(MetricSum(http.Get("/metrics").body, "tide_http_connection_limit_total",
                      {R"(listener="grpc")", R"(action="evicted")"}),
            0);
  // The stream is still there: draining reaches it.
  ASSERT_TRUE(server.Signal(SIGTERM).ok());
  ASSERT_TRUE(watch->Read(&r));
  EXPECT_EQ(r.status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  watch_ctx.TryCancel();
  close(silent);
}

// The per-connection limits reach connections the gate hands to gRPC: a silent connection is
// closed at --grpc-handshake-timeout-ms, and a client connection without calls gets GOAWAY at
// --grpc-max-connection-idle-ms (its channel leaves READY). Both are waits for an event, bounded
// at 10 s; with gRPC's defaults (120 s, never) neither would come.
TEST(ServeGrpcFloodTest, HandshakeTimeoutAndMaxConnectionIdleApply) {
  TempDir scratch;
  const fs::path repository = scratch.path() / "repo";
  ASSERT_TRUE(AddTinyBert(repository, "m", TinyBertConfig()).ok());
  const int grpc_port = FreePort();
  ASSERT_NE(grpc_port, 0);
  auto started = StartTideServe(repository, {"--grpc-port", std::to_string(grpc_port), "--grpc-handshake-timeout-ms",
                                             "300", "--grpc-max-connection-idle-ms", "300", "--log-level", "warn"});
  ASSERT_TRUE(started.ok()) << started.status();
  const int silent = SilentConnection(grpc_port);
  ASSERT_GE(silent, 0);
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port), grpc::InsecureChannelCredentials());
  auto kserve = inference::GRPCInferenceService::NewStub(channel);
  inference::ServerLiveResponse live;
  auto ctx = Within(std::chrono::milliseconds(10000));
  ASSERT_TRUE(kserve->ServerLive(ctx.get(), {}, &live).ok());
  ASSERT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);
  EXPECT_TRUE(channel->WaitForStateChange(GRPC_CHANNEL_READY, std::chrono::system_clock::now() + std::chrono::seconds(10)))
      << "no GOAWAY after 300 ms without calls";
  pollfd p{silent, POLLIN, 0};
  bool closed = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!closed && std::chrono::steady_clock::now() < until) {
    if (poll(&p, 1, 1000) == 1) closed = ClosedByServer(silent);
  }
  EXPECT_TRUE(closed) << "a silent connection outlived the 300 ms handshake timeout";
  close(silent);
}

}  // namespace
}  // namespace tide::blackbox

#endif
