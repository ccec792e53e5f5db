#include "server/http/http_server.h"

#include <cstdio>
#include <exception>
#include <future>
#include <string>
#include <thread>
#include <utility>

#include <unistd.h>

#include <boost/asio.hpp>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/error_echo.h"
#include "common/status_macros.h"
#include "common/this_thread.h"
#include "server/http/accept_loop.h"
#include "server/http/error_response.h"
#include "server/http/http_connection.h"
#include "server/http/server_core.h"

namespace tide::http {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

}  // namespace

// ---- HttpServer -----------------------------------------------------------------------------------

HttpServer::HttpServer(std::shared_ptr<Core> core) : core_(std::move(core)) {}

HttpServer::~HttpServer() { Stop(); }

namespace {

absl::Status ValidateOptions(const HttpServerOptions& options, const Handler* handler) {
  if (handler == nullptr) return absl::InvalidArgumentError("http server needs a handler");
  if (options.io_threads < 1) return absl::InvalidArgumentError("io_threads must be at least 1");
  if (options.max_header_bytes < 64) return absl::InvalidArgumentError("max_header_bytes must be at least 64");
  if (options.max_connections < 1) return absl::InvalidArgumentError("max_connections must be at least 1");
  if (options.header_read_timeout.count() <= 0 || options.body_read_timeout.count() <= 0 ||
      options.idle_timeout.count() <= 0) {
    return absl::InvalidArgumentError("http timeouts must be positive");
  }
  boost::system::error_code ec;
  net::ip::make_address(options.host == "localhost" ? "127.0.0.1" : options.host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("invalid listen address '", options.host, "'"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Create(const HttpServerOptions& options,
                                                               Handler* handler) {
  TIDE_RETURN_IF_ERROR(ValidateOptions(options, handler));
  return std::unique_ptr<HttpServer>(new HttpServer(std::make_shared<Core>(options, handler)));
}

absl::Status internal::ServeConnectedSocket(const HttpServerOptions& options, Handler* handler, int fd) {
  if (absl::Status status = ValidateOptions(options, handler); !status.ok()) {
    if (fd >= 0) ::close(fd);
    return status;
  }
  auto core = std::make_shared<HttpServer::Core>(options, handler);
  tcp::socket socket(net::make_strand(core->ioc));
  boost::system::error_code ec;
  socket.assign(tcp::v4(), fd, ec);
  if (ec) {
    if (fd >= 0) ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("cannot serve descriptor ", fd, ": ", ec.message()));
  }
  auto connection = std::make_shared<internal::HttpConnection>(core, std::move(socket));
  const std::weak_ptr<internal::HttpConnection> alive = connection;
  {
    absl::MutexLock lock(&core->mu);
    core->connections.emplace(connection.get(), connection);
  }
  const net::any_io_executor executor = connection->executor();
  net::post(executor, [connection = std::move(connection)] { connection->Start(); });
  // The work guard keeps the loop waiting for Responders completed from other threads; the
  // connection is gone once it closed and nothing (handler, timer, Responder) refers to it.
  auto work = net::make_work_guard(core->ioc);
  while (!alive.expired()) {
    try {
      core->ioc.run_one_for(std::chrono::milliseconds(50));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tide http: I/O loop caught: %s\n", EscapeForLog(e.what()).c_str());
    }
  }
  return absl::OkStatus();
}

absl::Status HttpServer::Start() {
  Core& core = *core_;
  if (core.started) return absl::FailedPreconditionError("http server already started");
  boost::system::error_code ec;
  const net::ip::address address =
      net::ip::make_address(core.options.host == "localhost" ? "127.0.0.1" : core.options.host, ec);
  const tcp::endpoint endpoint(address, core.options.port);
  auto fail = [&](const char* what) {
    boost::system::error_code ignored;
    core.acceptor.close(ignored);
    return absl::UnavailableError(absl::StrCat("cannot ", what, " ", core.options.host, ":", core.options.port,
                                               ": ", ec.message()));
  };
  core.acceptor.open(endpoint.protocol(), ec);
  if (ec) return fail("open socket for");
  core.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (ec) return fail("set SO_REUSEADDR on");
  core.acceptor.bind(endpoint, ec);
  if (ec) return fail("bind");
  core.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return fail("listen on");
  core.port.store(core.acceptor.local_endpoint().port());
  core.started = true;
  core.work.emplace(net::make_work_guard(core.ioc));
  internal::StartAccepting(core_);
  for (int i = 0; i < core.options.io_threads; ++i) {
    core.threads.emplace_back([&core, i] {
      this_thread::SetCurrentThreadName("tide-http-" + std::to_string(i));
      // Woken by a client, an I/O thread should preempt a GEMM at once, not after its slice.
      if (core.options.io_time_slice.count() > 0) this_thread::RequestShortTimeSlice(core.options.io_time_slice);
      for (;;) {
        try {
          core.ioc.run();
          return;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "tide http: I/O thread caught: %s\n", EscapeForLog(e.what()).c_str());
        }
      }
    });
  }
  return absl::OkStatus();
}

uint16_t HttpServer::port() const { return core_->port.load(); }

void HttpServer::StopAccepting() {
  Core& core = *core_;
  if (!core.started || core.stopped) return;
  std::promise<void> closed;
  net::post(core.accept_strand, [&core, &closed] {
    boost::system::error_code ignored;
    core.acceptor.close(ignored);
    closed.set_value();
  });
  closed.get_future().wait();
}

void HttpServer::Stop() {
  Core& core = *core_;
  if (!core.started || core.stopped) return;
  core.stopped = true;
  std::vector<std::shared_ptr<internal::HttpConnection>> open;
  {
    absl::MutexLock lock(&core.mu);
    core.stopping = true;
    for (auto& [raw, weak] : core.connections) {
      if (auto connection = weak.lock()) open.push_back(std::move(connection));
    }
  }
  net::post(core.accept_strand, [&core] {
    boost::system::error_code ignored;
    core.acceptor.close(ignored);
  });
  for (auto& connection : open) {
    net::post(connection->executor(), [connection] { connection->Close(); });
  }
  open.clear();
  core.work.reset();
  for (std::thread& thread : core.threads) thread.join();
  core.threads.clear();
}

size_t HttpServer::active_requests() const { return core_->active_requests.load(); }
size_t HttpServer::active_connections() const { return core_->active_connections.load(); }
uint64_t HttpServer::evicted_connections() const { return core_->evicted_connections.load(); }
uint64_t HttpServer::refused_connections() const { return core_->refused_connections.load(); }

bool HttpServer::WaitIdle(std::chrono::steady_clock::time_point deadline) const {
  for (;;) {
    if (core_->active_requests.load() == 0 && core_->unwritten_responses.load() == 0) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace tide::http
