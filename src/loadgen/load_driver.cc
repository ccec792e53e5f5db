#include "loadgen/load_driver.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"

namespace tide::loadgen {
namespace {

std::string ErrorKind(const TransportResult& r) {
  if (r.http_status != 0) return absl::StrCat("http ", r.http_status);
  return r.error.empty() ? std::string("no response") : r.error;
}

// 429 / 503, or gRPC's RESOURCE_EXHAUSTED (8) / UNAVAILABLE (14): the codes tide sheds with.
bool IsShedAnswer(const TransportResult& r) {
  return r.http_status == 429 || r.http_status == 503 || r.grpc_status == 8 || r.grpc_status == 14;
}

struct Window {
  LatencyRecorder latency;
  LatencyRecorder shed_latency;
  std::map<std::string, size_t> errors;
  size_t error_count = 0;
};

struct DriverState : std::enable_shared_from_this<DriverState> {
  EventLoop* loop = nullptr;
  Transport* transport = nullptr;
  LoadOptions options;
  std::optional<ArrivalSchedule> schedule;
  int64_t start = 0;
  int64_t measure_start = 0;
  int64_t window_ns = 0;
  int max_windows = 0;
  int stable_windows = 0;
  std::vector<Window> windows;  // grows on demand: a completion may precede its window's timer
  LoadResult result;
  size_t outstanding = 0;
  size_t next_request = 0;
  bool finished = false;
  bool draining = false;
  bool stopped = false;

  Window& WindowAt(size_t index) {
    if (windows.size() <= index) windows.resize(index + 1);
    return windows[index];
  }

  void OnComplete(int64_t intended, const TransportResult& r) {
    --outstanding;
    if (draining) {
      const int64_t now = loop->Now();
      ++result.drained;
      if (r.ok()) {
        result.latency.Record(static_cast<double>(now - intended) / 1e6);
      } else {
        ++result.errors[ErrorKind(r)];
        if (IsShedAnswer(r)) result.shed_latency.Record(static_cast<double>(now - intended) / 1e6);
      }
      if (outstanding == 0) EndDrain();
      return;
    }
    if (finished) return;
    const int64_t now = loop->Now();
    if (now < measure_start) return;  // warm-up
    Window& w = WindowAt(static_cast<size_t>((now - measure_start) / window_ns));
    if (r.ok()) {
      w.latency.Record(static_cast<double>(now - intended) / 1e6);
    } else {
      ++w.errors[ErrorKind(r)];
      ++w.error_count;
      if (IsShedAnswer(r)) w.shed_latency.Record(static_cast<double>(now - intended) / 1e6);
    }
  }

  void Send(int64_t intended, const std::shared_ptr<DriverState>& self, bool closed_loop) {
    ++outstanding;
    ++result.sent;
    transport->Send(next_request++, [self, intended, closed_loop](const TransportResult& r) {
      self->OnComplete(intended, r);
      if (closed_loop && !self->finished) self->Send(self->loop->Now(), self, true);
    });
  }

  void ScheduleNextArrival(const std::shared_ptr<DriverState>& self) {
    const int64_t intended = start + schedule->Next().count();
    loop->RunAt(intended, [self, intended] {
      if (self->finished) return;
      self->Send(intended, self, false);
      self->ScheduleNextArrival(self);
    });
  }

  void CloseWindow(size_t index, const std::shared_ptr<DriverState>& self) {
    if (finished) return;
    Window& w = WindowAt(index);
    WindowStats stats;
    stats.completed = w.latency.count();
    stats.errors = w.error_count;
    stats.throughput = static_cast<double>(stats.completed) / (static_cast<double>(window_ns) / 1e9);
    stats.p99_ms = w.latency.Percentile(99);
    result.windows.push_back(stats);
    const int closed = static_cast<int>(result.windows.size());
    const bool stable = closed >= stable_windows &&
                        WindowsStable(result.windows, stable_windows, options.stability);
    if (stable || closed >= max_windows) {
      Finish(stable);
      return;
    }
    loop->RunAt(measure_start + (static_cast<int64_t>(index) + 2) * window_ns,
                [self, index] { self->CloseWindow(index + 1, self); });
  }

  void Finish(bool stable) {
    finished = true;
    result.stable = stable;
    const size_t closed = result.windows.size();
    const size_t take = std::min<size_t>(closed, static_cast<size_t>(stable_windows));
    for (size_t i = closed - take; i < closed; ++i) {
      result.latency.Merge(windows[i].latency);
      result.shed_latency.Merge(windows[i].shed_latency);
      for (const auto& [kind, n] : windows[i].errors) result.errors[kind] += n;
    }
    result.completed = result.latency.count();
    result.measured_seconds = static_cast<double>(take) * static_cast<double>(window_ns) / 1e9;
    result.fixed_duration = options.duration_ns > 0;
    if (schedule && outstanding > 0 && options.drain_ns > 0) {
      draining = true;
      loop->RunAt(loop->Now() + options.drain_ns, [self = shared_from_this()] { self->EndDrain(); });
      return;
    }
    EndDrain();
  }

  void EndDrain() {
    if (stopped) return;
    stopped = true;
    draining = false;
    result.outstanding_at_end = outstanding;
    loop->Stop();
  }
};

}  // namespace

bool WindowsStable(const std::vector<WindowStats>& windows, int n, double stability) {
  if (n < 1 || windows.size() < static_cast<size_t>(n)) return false;
  auto within = [&](auto field) {
    double mean = 0;
    for (size_t i = windows.size() - n; i < windows.size(); ++i) mean += field(windows[i]);
    mean /= n;
    if (mean <= 0) return false;  // no traffic is not a stable measurement
    for (size_t i = windows.size() - n; i < windows.size(); ++i)
      if (std::abs(field(windows[i]) - mean) > stability * mean) return false;
    return true;
  };
  return within([](const WindowStats& w) { return w.throughput; }) &&
         within([](const WindowStats& w) { return w.p99_ms; });
}

absl::StatusOr<LoadResult> RunLoad(EventLoop* loop, Transport* transport,
                                   const LoadOptions& options) {
  const bool open_loop = options.request_rate > 0;
  if (!open_loop && options.concurrency < 1)
    return absl::InvalidArgumentError("concurrency must be at least 1");
  if (options.warmup_ns < 0) return absl::InvalidArgumentError("warm-up must not be negative");
  if (options.duration_ns <= 0 &&
      (options.window_ns <= 0 || options.stable_windows < 1 ||
       options.max_windows < options.stable_windows || !(options.stability > 0)))
    return absl::InvalidArgumentError(
        "need window > 0, stability > 0 and max_windows >= stable_windows >= 1");
  auto state = std::make_shared<DriverState>();
  state->loop = loop;
  state->transport = transport;
  state->options = options;
  if (open_loop) {
    auto schedule = ArrivalSchedule::Create(options.request_rate, options.arrivals, options.seed);
    if (!schedule.ok()) return schedule.status();
    state->schedule = *std::move(schedule);
  }
  if (options.duration_ns > 0) {
    state->window_ns = options.duration_ns;
    state->max_windows = 1;
    state->stable_windows = 1;
  } else {
    state->window_ns = options.window_ns;
    state->max_windows = options.max_windows;
    state->stable_windows = options.stable_windows;
  }
  state->start = loop->Now();
  state->measure_start = state->start + options.warmup_ns;
  // Start the load from inside the loop so that a transport can rely on running on it.
  loop->RunAt(state->start, [state, open_loop] {
    if (open_loop) {
      state->ScheduleNextArrival(state);
    } else {
      for (int i = 0; i < state->options.concurrency; ++i) state->Send(state->loop->Now(), state, true);
    }
  });
  loop->RunAt(state->measure_start + state->window_ns, [state] { state->CloseWindow(0, state); });
  loop->Run();
  if (!state->finished) return absl::InternalError("the event loop stopped before the run ended");
  LoadResult result = std::move(state->result);
  return result;
}

}  // namespace tide::loadgen
