// tide::loadgen::EventLoop and Transport — the two seams of the load driver.
//
// Contract:
//  - EventLoop: a single-threaded loop. Now() is monotonic nanoseconds since the loop started;
//    RunAt(t, fn) runs fn on the loop thread at (or, when the loop is behind, after) time t;
//    Run() processes events until Stop() is called. Everything else in this folder that touches
//    a loop runs on its thread, so nothing needs a lock.
//  - Transport: Send(i, done) sends request body number i (modulo the bodies it holds) and calls
//    done exactly once on the loop thread with the outcome. A transport may hold requests back
//    (all connections busy); the driver measures from the intended time, so that wait counts.
//  - SimulatedEventLoop: virtual time for tests; RunAt events run in time order (FIFO for equal
//    times) and Now() jumps to each event's time. No sleeps, deterministic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>

namespace tide::loadgen {

class EventLoop {
 public:
  virtual ~EventLoop() = default;
  virtual int64_t Now() = 0;  // ns since the loop started
  virtual void RunAt(int64_t time_ns, std::function<void()> fn) = 0;
  virtual void Run() = 0;
  virtual void Stop() = 0;
};

struct TransportResult {
  int http_status = 0;   // 0 when no HTTP response arrived
  int grpc_status = -1;  // a gRPC transport's status code (0 = OK); -1 for HTTP
  std::string error;     // "timeout", "connect", "io: ..." when http_status == 0; "grpc <CODE>"
  size_t response_bytes = 0;
  bool ok() const { return grpc_status >= 0 ? grpc_status == 0 : http_status >= 200 && http_status < 300; }
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual void Send(size_t request_index, std::function<void(const TransportResult&)> done) = 0;
};

class SimulatedEventLoop final : public EventLoop {
 public:
  int64_t Now() override { return now_; }
  void RunAt(int64_t time_ns, std::function<void()> fn) override {
    events_.emplace(std::make_pair(std::max(time_ns, now_), seq_++), std::move(fn));
  }
  void Run() override {
    stopped_ = false;
    while (!stopped_ && !events_.empty()) {
      auto it = events_.begin();
      now_ = it->first.first;
      std::function<void()> fn = std::move(it->second);
      events_.erase(it);
      fn();
    }
  }
  void Stop() override { stopped_ = true; }

 private:
  int64_t now_ = 0;
  uint64_t seq_ = 0;
  bool stopped_ = false;
  std::map<std::pair<int64_t, uint64_t>, std::function<void()>> events_;
};

}  // namespace tide::loadgen
