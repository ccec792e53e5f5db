// tide_echo_server: a test-only server built from tide::http::HttpServer. It prints the same
// "tide: listening on http://HOST:PORT" line as `tide serve`, answers GET /v2/health/ready with 200
// and echoes every other request as JSON; SIGTERM or SIGINT stops it gracefully (exit code 0).
// Used to test ServerProcess and HttpClient without a model.
//
// Flags: --host H (default 127.0.0.1), --port N (default 8000; 0 = ephemeral),
//        --ready-after-ms N (answer 503 on the ready path for the first N ms).
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "nlohmann/json.hpp"
#include "server/http/http_server.h"

namespace {

class EchoHandler final : public tide::http::Handler {
 public:
  explicit EchoHandler(std::chrono::steady_clock::time_point ready_at) : ready_at_(ready_at) {}

  void Handle(tide::http::Request request, tide::http::Responder respond) override {
    tide::http::Response response;
    if (request.path == "/v2/health/ready") {
      const bool ready = std::chrono::steady_clock::now() >= ready_at_;
      response.status = ready ? 200 : 503;
      response.body = nlohmann::json({{"ready", ready}}).dump();
    } else {
      nlohmann::json headers = nlohmann::json::object();
      for (const auto& [name, value] : request.headers) headers[name] = value;
      response.body = nlohmann::json({{"method", request.method},
                                      {"path", request.path},
                                      {"query", request.query},
                                      {"body", request.body},
                                      {"headers", headers}})
                          .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    std::move(respond)(std::move(response));
  }

 private:
  std::chrono::steady_clock::time_point ready_at_;
};

}  // namespace

int main(int argc, char** argv) {
  tide::http::HttpServerOptions options;
  long ready_after_ms = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "tide_echo_server: %s needs a value\n", flag.c_str());
      return 2;
    }
    const char* value = argv[++i];
    if (flag == "--host") {
      options.host = value;
    } else if (flag == "--port") {
      options.port = static_cast<uint16_t>(std::atoi(value));
    } else if (flag == "--ready-after-ms") {
      ready_after_ms = std::atol(value);
    } else {
      std::fprintf(stderr, "tide_echo_server: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }

  // Block the stop signals before any thread starts, so that only sigwait below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  EchoHandler handler(std::chrono::steady_clock::now() + std::chrono::milliseconds(ready_after_ms));
  auto server = tide::http::HttpServer::Create(options, &handler);
  if (!server.ok()) {
    std::fprintf(stderr, "tide_echo_server: %s\n", server.status().ToString().c_str());
    return 1;
  }
  if (absl::Status status = (*server)->Start(); !status.ok()) {
    std::fprintf(stderr, "tide_echo_server: %s\n", status.ToString().c_str());
    return 1;
  }
  std::printf("tide: listening on http://%s:%u\n", options.host.c_str(), static_cast<unsigned>((*server)->port()));
  std::fflush(stdout);

  int received = 0;
  sigwait(&stop_signals, &received);
  std::fprintf(stderr, "tide_echo_server: signal %d, stopping\n", received);
  (*server)->StopAccepting();
  (*server)->Stop();
  return 0;
}
