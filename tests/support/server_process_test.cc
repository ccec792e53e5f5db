#include "server_process.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http_client.h"

namespace tide::testing {
namespace {

using ::testing::HasSubstr;

ServerProcessOptions EchoServer(std::vector<std::string> args = {}) {
  ServerProcessOptions options;
  options.binary = TIDE_ECHO_SERVER_PATH;
  options.args = std::move(args);
  options.startup_timeout = std::chrono::milliseconds(20000);
  return options;
}

TEST(ServerProcessTest, StartsOnEphemeralPortAndServesKeepAlive) {
  auto server = ServerProcess::Start(EchoServer());
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_GT((*server)->port(), 0);
  EXPECT_EQ((*server)->host(), "127.0.0.1");
  ASSERT_TRUE((*server)->WaitReady().ok());

  HttpClient client((*server)->host(), (*server)->port());
  const ClientResponse first = client.Post("/v1/rerank?x=1", R"({"query":"q"})", {{"X-Test", "yes"}});
  ASSERT_EQ(first.status, 200) << first.error;
  EXPECT_THAT(first.body, HasSubstr(R"("body":"{\"query\":\"q\"}")"));
  EXPECT_THAT(first.body, HasSubstr(R"("query":"x=1")"));
  EXPECT_THAT(first.body, HasSubstr(R"("X-Test":"yes")"));
  EXPECT_EQ(first.header("server"), "tide");
  EXPECT_TRUE(client.connected());
  const ClientResponse second = client.Get("/again");
  ASSERT_EQ(second.status, 200) << second.error;
  EXPECT_THAT(second.body, HasSubstr(R"("path":"/again")"));
  EXPECT_TRUE(client.connected());
}

TEST(ServerProcessTest, StopSendsSigtermAndReportsExitCode) {
  auto server = ServerProcess::Start(EchoServer());
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<int> code = (*server)->Stop();
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << (*server)->Diagnostics();  // the echo server exits 0 on SIGTERM
  EXPECT_FALSE((*server)->IsRunning());
  EXPECT_THAT((*server)->Stderr(), HasSubstr("signal 15, stopping"));
  EXPECT_EQ((*server)->WaitReady("/v2/health/ready", std::chrono::milliseconds(100)).code(),
            absl::StatusCode::kUnavailable);
}

TEST(ServerProcessTest, WaitReadyPollsUntilReady) {
  auto server = ServerProcess::Start(EchoServer({"--ready-after-ms", "300"}));
  ASSERT_TRUE(server.ok()) << server.status();
  HttpClient client((*server)->host(), (*server)->port());
  EXPECT_EQ(client.Get("/v2/health/ready").status, 503);
  EXPECT_TRUE((*server)->WaitReady("/v2/health/ready", std::chrono::milliseconds(20000)).ok());
}

TEST(ServerProcessTest, WaitReadyTimesOutWithLastAnswer) {
  auto server = ServerProcess::Start(EchoServer({"--ready-after-ms", "600000"}));
  ASSERT_TRUE(server.ok()) << server.status();
  const absl::Status status = (*server)->WaitReady("/v2/health/ready", std::chrono::milliseconds(100));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(status.message()), HasSubstr("503"));
}

TEST(ServerProcessTest, ProcessExitingBeforeListeningIsUnavailableWithStderr) {
  auto server = ServerProcess::Start(EchoServer({"--no-such-flag", "1"}));
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("exited (code 2)"));
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("unknown flag --no-such-flag"));
}

TEST(ServerProcessTest, SilentProcessTimesOutAndIsKilled) {
  // A child that writes its pid, then sleeps 30 s without a word.
  const std::string pid_file =
      (std::filesystem::temp_directory_path() / ("tide_silent_" + std::to_string(getpid()) + ".pid")).string();
  std::filesystem::remove(pid_file);
  ServerProcessOptions options;
  options.binary = "/bin/sh";
  options.args = {"-c", "echo $$ > '" + pid_file + "'; exec sleep 30"};
  options.append_port_zero = false;
  options.startup_timeout = std::chrono::milliseconds(1000);
  auto server = ServerProcess::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kDeadlineExceeded);
  // Start killed and reaped the child: its pid names no process (not even a zombie) any more.
  std::ifstream in(pid_file);
  pid_t pid = 0;
  ASSERT_TRUE(in >> pid) << "the child did not write " << pid_file << " before the startup timeout";
  std::filesystem::remove(pid_file);
  EXPECT_EQ(kill(pid, 0), -1) << "process " << pid << " is still there";
  EXPECT_EQ(errno, ESRCH);
}

TEST(ServerProcessTest, MissingBinaryIsNotFound) {
  ServerProcessOptions options;
  options.binary = "does/not/exist";
  EXPECT_EQ(ServerProcess::Start(options).status().code(), absl::StatusCode::kNotFound);
}

TEST(HttpClientTest, RawMalformedRequestGets400AndClose) {
  auto server = ServerProcess::Start(EchoServer());
  ASSERT_TRUE(server.ok()) << server.status();
  HttpClient client((*server)->host(), (*server)->port());
  ASSERT_TRUE(client.SendRaw("THIS IS NOT HTTP\r\n\r\n").ok());
  const ClientResponse response = client.ReadResponse();
  EXPECT_EQ(response.status, 400) << response.error;
  EXPECT_THAT(response.body, HasSubstr("malformed HTTP request"));
  EXPECT_EQ(response.header("connection"), "close");
  EXPECT_FALSE(client.connected());
}

TEST(HttpClientTest, ConnectionRefusedIsStatusZero) {
  uint16_t port = 0;
  {
    auto server = ServerProcess::Start(EchoServer());
    ASSERT_TRUE(server.ok()) << server.status();
    port = (*server)->port();
  }
  HttpClient client("127.0.0.1", port, std::chrono::milliseconds(1000));
  const ClientResponse response = client.Get("/");
  EXPECT_EQ(response.status, 0);
  EXPECT_THAT(response.error, HasSubstr("connect"));
}

}  // namespace
}  // namespace tide::testing
