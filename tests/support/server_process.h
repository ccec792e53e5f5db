// tide::testing::ServerProcess — runs a server binary as a child process for black-box tests.
//
// Contract:
//  - Start() spawns `binary args... [--port 0]`, reads its stdout until the line
//    "tide: listening on http://HOST:PORT" or "https://HOST:PORT" (what `tide serve` prints once it accepts connections)
//    and returns. It fails with DEADLINE_EXCEEDED when the line does not come within
//    startup_timeout, and with UNAVAILABLE when the process exits first; both messages carry the
//    tail of the child's stderr.
//  - The child's stderr goes to a temporary file (kept after the run when keep_stderr_file is true,
//    so a failing CI log can point at it); its stdout keeps being drained by a reader thread, so the
//    child never blocks on a full pipe.
//  - Destruction stops the child: SIGTERM, then SIGKILL if it is still alive after stop_grace.
//  - Not thread-safe: drive one ServerProcess from one test thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tls/tls_context.h"

namespace tide::testing {

struct ServerProcessOptions {
  std::string binary;                 // path of the executable
  std::vector<std::string> args;      // e.g. {"serve", "--model-repository", "..."}
  bool append_port_zero = true;       // append "--port 0" to args
  std::vector<std::string> extra_env; // "NAME=value" entries added to the inherited environment
  std::chrono::milliseconds startup_timeout{30000};
  std::chrono::milliseconds stop_grace{10000};  // SIGTERM -> SIGKILL
  bool keep_stderr_file = false;      // leave the stderr capture file on disk
  std::optional<tls::ClientTlsOptions> tls;  // set: WaitReady speaks HTTPS with these
};

class ServerProcess {
 public:
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(const ServerProcessOptions& options);
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  uint16_t port() const { return port_; }
  const std::string& host() const { return host_; }
  pid_t pid() const { return pid_; }

  // Polls GET `path` until it answers 200. DEADLINE_EXCEEDED (with the last answer) after
  // `timeout`; UNAVAILABLE as soon as the process has exited.
  absl::Status WaitReady(std::string_view path = "/v2/health/ready",
                         std::chrono::milliseconds timeout = std::chrono::milliseconds(30000));

  // Sends `signal` to the child (e.g. SIGTERM to test graceful shutdown).
  absl::Status Signal(int signal);
  // Waits up to `timeout` for the child to exit; returns its exit code, or 128+N when killed by
  // signal N. DEADLINE_EXCEEDED when it is still running.
  absl::StatusOr<int> WaitExit(std::chrono::milliseconds timeout);
  // SIGTERM, wait stop_grace, then SIGKILL; returns the exit code as WaitExit. Idempotent.
  absl::StatusOr<int> Stop();
  bool IsRunning();

  std::string Stdout() const;           // captured so far
  std::string Stderr() const;           // captured so far
  const std::string& stderr_path() const { return stderr_path_; }
  // "stderr (last 4000 bytes): ..." for assertion messages.
  std::string Diagnostics() const;

  struct Output;  // stdout reader state, defined in server_process.cc

 private:
  ServerProcess() = default;
  bool Reap(bool block);

  ServerProcessOptions options_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int exit_code_ = -1;
  uint16_t port_ = 0;
  std::string host_;
  std::string stderr_path_;
  std::shared_ptr<Output> output_;
};

}  // namespace tide::testing
