// tide::http::HttpServer::Core — what the accept loop, the connections and the HttpServer facade
// share: the options and handler, the I/O context and listening socket, the counters behind
// HttpServer's accessors, and the table of open connections (for eviction and Stop()).
//
// Contract: internal to server/http (Boost.Asio types; included by .cc files of this folder only).
//  - Owned through shared_ptr by the HttpServer and by every connection and accept handler, so it
//    outlives the last I/O callback.
//  - `options`, `handler`, `clock` are fixed after construction; the counters are atomics, read
//    from any thread; `stopping` and `connections` are guarded by `mu`. A connection erases itself
//    from `connections` (under mu) in its destructor, so a listed raw pointer is alive under mu.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio.hpp>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "server/http/http_server.h"

namespace tide::http {

namespace internal {
class HttpConnection;
}  // namespace internal

struct HttpServer::Core {
  Core(const HttpServerOptions& opts, Handler* h)
      : options(opts),
        handler(h),
        accept_strand(boost::asio::make_strand(ioc)),
        acceptor(accept_strand) {}

  HttpServerOptions options;
  Handler* handler;
  // The connections' time source (deadlines and eviction ranking). Timers wait on the steady clock
  // it reads.
  const Clock* clock = SteadyClock::Get();
  boost::asio::io_context ioc;
  boost::asio::strand<boost::asio::io_context::executor_type> accept_strand;
  boost::asio::ip::tcp::acceptor acceptor;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  bool started = false;  // controlling thread only
  bool stopped = false;  // controlling thread only
  std::atomic<uint16_t> port{0};
  std::atomic<size_t> active_requests{0};
  std::atomic<size_t> active_connections{0};
  // Responses handed over by Responders and not yet written or dropped (HttpServer::WaitIdle).
  std::atomic<size_t> unwritten_responses{0};
  std::atomic<uint64_t> evicted_connections{0};
  std::atomic<uint64_t> refused_connections{0};

  absl::Mutex mu;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  std::unordered_map<internal::HttpConnection*, std::weak_ptr<internal::HttpConnection>> connections
      ABSL_GUARDED_BY(mu);
};

}  // namespace tide::http
