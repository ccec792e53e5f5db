// tide::tracing WallClock: where span timestamps come from (Unix epoch nanoseconds, as OTLP wants).
//
// Contract:
//  - NowUnixNanos() is thread-safe. SystemWallClock reads std::chrono::system_clock (its Get() is a
//    process-wide instance never destroyed). FakeWallClock (tests) returns what was Set/Advanced.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace tide::tracing {

class WallClock {
 public:
  virtual ~WallClock() = default;
  virtual int64_t NowUnixNanos() const = 0;
};

class SystemWallClock final : public WallClock {
 public:
  static const SystemWallClock* Get() {
    static const SystemWallClock* clock = new SystemWallClock();
    return clock;
  }
  int64_t NowUnixNanos() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

class FakeWallClock final : public WallClock {
 public:
  explicit FakeWallClock(int64_t start_unix_nanos = 1'700'000'000'000'000'000) : now_(start_unix_nanos) {}
  int64_t NowUnixNanos() const override { return now_.load(); }
  void Set(int64_t unix_nanos) { now_.store(unix_nanos); }
  void Advance(int64_t nanos) { now_.fetch_add(nanos); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace tide::tracing
