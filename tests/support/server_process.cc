#include "server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "http_client.h"
#include "wait_for.h"

extern char** environ;

namespace tide::testing {
namespace {

constexpr char kListeningPrefix[] = "tide: listening on http://";
constexpr char kListeningPrefixTls[] = "tide: listening on https://";

// Parses "HOST:PORT" after the prefix (http:// or https://) on a complete line of `text`.
bool FindListeningLine(const std::string& text, std::string* host, uint16_t* port) {
  size_t start = text.find(kListeningPrefix);
  size_t begin = start + std::strlen(kListeningPrefix);
  if (start == std::string::npos) {
    start = text.find(kListeningPrefixTls);
    if (start == std::string::npos) return false;
    begin = start + std::strlen(kListeningPrefixTls);
  }
  const size_t end = text.find('\n', begin);
  if (end == std::string::npos) return false;
  std::string address = text.substr(begin, end - begin);
  while (!address.empty() && (address.back() == '\r' || address.back() == '/')) address.pop_back();
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  const int value = std::atoi(address.c_str() + colon + 1);
  if (value <= 0 || value > 65535) return false;
  *host = address.substr(0, colon);
  if (host->size() > 2 && host->front() == '[') *host = host->substr(1, host->size() - 2);
  *port = static_cast<uint16_t>(value);
  return true;
}

}  // namespace

struct ServerProcess::Output {
  absl::Mutex mu;
  std::string text ABSL_GUARDED_BY(mu);
  bool eof ABSL_GUARDED_BY(mu) = false;
  std::thread reader;
};

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(const ServerProcessOptions& options) {
  if (options.binary.empty()) return absl::InvalidArgumentError("ServerProcess needs a binary");
  if (access(options.binary.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("not an executable: ", options.binary));
  }
  std::unique_ptr<ServerProcess> process(new ServerProcess());
  process->options_ = options;

  std::string stderr_template =
      (std::filesystem::temp_directory_path() / "tide-server-XXXXXX.stderr").string();
  const int stderr_fd = mkstemps(stderr_template.data(), 7);
  if (stderr_fd < 0) return absl::InternalError(absl::StrCat("mkstemps: ", std::strerror(errno)));
  process->stderr_path_ = stderr_template;

  int out_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    close(stderr_fd);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }

  std::vector<std::string> argv_storage;
  argv_storage.push_back(options.binary);
  argv_storage.insert(argv_storage.end(), options.args.begin(), options.args.end());
  if (options.append_port_zero) {
    argv_storage.push_back("--port");
    argv_storage.push_back("0");
  }
  std::vector<char*> argv;
  for (std::string& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);

  std::vector<std::string> env_storage;
  for (char** entry = environ; *entry != nullptr; ++entry) env_storage.emplace_back(*entry);
  env_storage.insert(env_storage.end(), options.extra_env.begin(), options.extra_env.end());
  std::vector<char*> envp;
  for (std::string& entry : env_storage) envp.push_back(entry.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, stderr_fd, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  // The child starts with default signal dispositions and an empty mask, whatever the test runner set.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t empty_mask, default_signals;
  sigemptyset(&empty_mask);
  sigemptyset(&default_signals);
  sigaddset(&default_signals, SIGTERM);
  sigaddset(&default_signals, SIGINT);
  sigaddset(&default_signals, SIGPIPE);
  posix_spawnattr_setsigmask(&attributes, &empty_mask);
  posix_spawnattr_setsigdefault(&attributes, &default_signals);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int spawn_error = posix_spawn(&pid, options.binary.c_str(), &actions, &attributes, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(out_pipe[1]);
  close(stderr_fd);
  if (spawn_error != 0) {
    close(out_pipe[0]);
    return absl::InternalError(absl::StrCat("posix_spawn ", options.binary, ": ", std::strerror(spawn_error)));
  }
  process->pid_ = pid;

  auto output = std::make_shared<Output>();
  process->output_ = output;
  const int read_fd = out_pipe[0];
  output->reader = std::thread([output_raw = output.get(), read_fd] {
    char chunk[4096];
    for (;;) {
      const ssize_t n = read(read_fd, chunk, sizeof(chunk));
      if (n < 0 && errno == EINTR) continue;
      absl::MutexLock lock(&output_raw->mu);
      if (n <= 0) {
        output_raw->eof = true;
        break;
      }
      output_raw->text.append(chunk, static_cast<size_t>(n));
    }
    close(read_fd);
  });

  std::string host;
  uint16_t port = 0;
  bool found = false;
  bool eof = false;
  {
    absl::MutexLock lock(&output->mu);
    auto listening_or_eof = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(output->mu) {
      return FindListeningLine(output->text, &host, &port) || output->eof;
    };
    output->mu.AwaitWithTimeout(absl::Condition(&listening_or_eof),
                                absl::Milliseconds(options.startup_timeout.count()));
    found = FindListeningLine(output->text, &host, &port);
    eof = output->eof;
  }
  if (!found) {
    const bool exited = eof || !process->IsRunning();
    if (exited) process->Reap(/*block=*/true);
    std::string message = exited
        ? absl::StrCat(options.binary, " exited (code ", process->exit_code_, ") before listening")
        : absl::StrCat(options.binary, " did not print '", kListeningPrefix, "HOST:PORT' within ",
                       options.startup_timeout.count(), " ms");
    message = absl::StrCat(message, "\n", process->Diagnostics());
    return exited ? absl::UnavailableError(message) : absl::DeadlineExceededError(message);
  }
  process->host_ = host;
  process->port_ = port;
  return process;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) (void)Stop();
  if (output_ && output_->reader.joinable()) output_->reader.join();
  if (!options_.keep_stderr_file && !stderr_path_.empty()) {
    std::error_code ignored;
    std::filesystem::remove(stderr_path_, ignored);
  }
}

bool ServerProcess::Reap(bool block) {
  if (exited_) return true;
  if (pid_ <= 0) return false;
  int status = 0;
  pid_t result;
  do {
    result = waitpid(pid_, &status, block ? 0 : WNOHANG);
  } while (result < 0 && errno == EINTR);
  if (result != pid_) return false;
  exited_ = true;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
  return true;
}

bool ServerProcess::IsRunning() { return pid_ > 0 && !Reap(/*block=*/false); }

absl::Status ServerProcess::Signal(int signal) {
  if (pid_ <= 0 || exited_) return absl::FailedPreconditionError("server process is not running");
  if (kill(pid_, signal) != 0) return absl::InternalError(absl::StrCat("kill: ", std::strerror(errno)));
  return absl::OkStatus();
}

absl::StatusOr<int> ServerProcess::WaitExit(std::chrono::milliseconds timeout) {
  // waitpid has no timeout: poll it.
  if (!test_support::WaitFor([this] { return Reap(/*block=*/false); }, timeout)) {
    return absl::DeadlineExceededError(absl::StrCat("server process ", pid_, " still running after ",
                                                    timeout.count(), " ms"));
  }
  return exit_code_;
}

absl::StatusOr<int> ServerProcess::Stop() {
  if (pid_ <= 0) return absl::FailedPreconditionError("no server process");
  if (exited_) return exit_code_;
  kill(pid_, SIGTERM);
  absl::StatusOr<int> code = WaitExit(options_.stop_grace);
  if (code.ok()) return code;
  kill(pid_, SIGKILL);
  Reap(/*block=*/true);
  return exit_code_;
}

absl::Status ServerProcess::WaitReady(std::string_view path, std::chrono::milliseconds timeout) {
  std::string last;
  absl::Status result;
  const bool answered = test_support::WaitFor(
      [&] {
        if (!IsRunning()) {
          result = absl::UnavailableError(absl::StrCat("server exited (code ", exit_code_, ") while waiting for ",
                                                       std::string(path), "\n", Diagnostics()));
          return true;
        }
        HttpClient client(host_, port_, std::chrono::milliseconds(2000));
        if (options_.tls.has_value()) {
          if (absl::Status s = client.UseTls(*options_.tls); !s.ok()) {
            result = s;
            return true;
          }
        }
        const ClientResponse response = client.Get(path);
        if (response.status == 200) return true;
        last = response.status == 0 ? response.error : absl::StrCat(response.status, " ", response.body);
        return false;
      },
      timeout);
  if (!answered) {
    return absl::DeadlineExceededError(absl::StrCat(std::string(path), " not ready after ", timeout.count(),
                                                    " ms; last answer: ", last, "\n", Diagnostics()));
  }
  return result;
}

std::string ServerProcess::Stdout() const {
  if (!output_) return "";
  absl::MutexLock lock(&output_->mu);
  return output_->text;
}

std::string ServerProcess::Stderr() const {
  std::ifstream in(stderr_path_, std::ios::binary);
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

std::string ServerProcess::Diagnostics() const {
  std::string err = Stderr();
  if (err.size() > 4000) err = "..." + err.substr(err.size() - 4000);
  return absl::StrCat("stderr (", stderr_path_, "):\n", err);
}

}  // namespace tide::testing
