// tide::loadgen::RunLoad — drives one measurement (one concurrency or one request rate) on an
// EventLoop through a Transport, perf_analyzer style.
//
// Modes:
//  - closed loop: `concurrency` requests are always outstanding; each completion sends the next.
//    Latency = completion - send.
//  - open loop: requests are issued at the ArrivalSchedule's intended times whatever the server
//    does. Latency = completion - intended send time (coordinated omission cannot hide queueing
//    in the client or the server).
// Measurement: completions during `warmup` are discarded. Then measurement windows of `window`
// follow; the run is stable when the last `stable_windows` windows each have throughput and p99
// within ±stability of those windows' mean; it ends when stable or after `max_windows` windows
// (then stable=false). The result aggregates the last `stable_windows` windows (all of them when
// fewer ran). With `duration` > 0 there is instead a single window of that length.
// Completions are assigned to the window in which they complete; errors are counted by kind
// ("http 503", "grpc UNAVAILABLE", "timeout", ...), and only successful requests contribute latencies.
// Open loop only: requests already issued when measurement ends (queued in the client or the
// server) are drained for up to `drain_ns`; their latencies join the aggregate (`drained`), so
// the slowest requests of an overloaded run are not silently dropped. Throughput counts only
// completions inside the windows.
// Contract: runs to completion on the calling thread (calls loop->Run()); requests still
// outstanding after that are reported in `outstanding_at_end` and their completions ignored.
// kInvalidArgument for inconsistent options.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loadgen/arrival_schedule.h"
#include "loadgen/event_loop.h"
#include "loadgen/latency_recorder.h"

namespace tide::loadgen {

struct LoadOptions {
  int concurrency = 1;          // closed loop when request_rate == 0
  double request_rate = 0;      // requests/s; > 0 selects the open loop
  Arrivals arrivals = Arrivals::kConstant;
  uint64_t seed = 42;           // Poisson schedule seed
  int64_t warmup_ns = 5'000'000'000;
  int64_t window_ns = 5'000'000'000;
  double stability = 0.10;      // ±10%
  int stable_windows = 3;
  int max_windows = 10;
  int64_t duration_ns = 0;      // > 0: one fixed window instead of the stability search
  int64_t drain_ns = 30'000'000'000;  // open loop: wait this long for issued requests at the end
};

struct WindowStats {
  size_t completed = 0;  // successful requests
  size_t errors = 0;
  double throughput = 0;  // successful requests per second
  double p99_ms = 0;
};

struct LoadResult {
  LatencyRecorder latency;               // successes in the aggregated windows
  LatencyRecorder shed_latency;          // 429 / 503 (gRPC RESOURCE_EXHAUSTED / UNAVAILABLE) answers in the aggregated windows
  std::map<std::string, size_t> errors;  // by kind, aggregated windows
  size_t completed = 0;                  // successes in the aggregated windows
  double measured_seconds = 0;           // length of the aggregated windows
  std::vector<WindowStats> windows;      // every window, in order
  bool stable = false;
  size_t sent = 0;                       // requests issued during the whole run (warm-up too)
  size_t outstanding_at_end = 0;
  size_t drained = 0;                    // open loop: completed after the last window
  bool fixed_duration = false;           // one --duration window, no stability search
  double throughput() const { return measured_seconds > 0 ? completed / measured_seconds : 0; }
};

absl::StatusOr<LoadResult> RunLoad(EventLoop* loop, Transport* transport,
                                   const LoadOptions& options);

// Whether the last `n` windows agree within ±stability on throughput and p99.
bool WindowsStable(const std::vector<WindowStats>& windows, int n, double stability);

}  // namespace tide::loadgen
