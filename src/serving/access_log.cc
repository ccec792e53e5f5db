#include "serving/access_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace tide::serving {

namespace {

std::string Rfc3339Millis(std::chrono::system_clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  return absl::StrFormat("%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                         tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
}

// Milliseconds with microsecond resolution (a stable, short rendering).
double Round3(double ms) { return static_cast<double>(static_cast<int64_t>(ms * 1000 + 0.5)) / 1000; }

}  // namespace

std::string FormatAccessRecord(const AccessRecord& r) {
  // nlohmann keeps insertion order with ordered_json: the fields read in the documented order.
  nlohmann::ordered_json j;
  j["time"] = Rfc3339Millis(r.time);
  j["protocol"] = r.protocol;
  j["route"] = r.route;
  j["model"] = r.model;
  j["version"] = r.version;
  j["status"] = r.status;
  j["error_type"] = r.error_type;
  j["key"] = r.key;
  j["pairs"] = r.pairs;
  j["cache_hits"] = r.cache_hits;
  j["degraded"] = r.degraded;
  j["queue_ms"] = r.queue_ms.has_value() ? nlohmann::ordered_json(Round3(*r.queue_ms)) : nullptr;
  j["inference_ms"] = r.inference_ms.has_value() ? nlohmann::ordered_json(Round3(*r.inference_ms)) : nullptr;
  j["total_ms"] = Round3(r.total_ms);
  j["request_id"] = r.request_id;
  if (!r.trace_id.empty()) {  // traced requests only (tracing on: --otlp-endpoint / OTEL_*)
    j["trace_id"] = r.trace_id;
    j["span_id"] = r.span_id;
  }
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// ---- FileAccessLogSink ---------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<FileAccessLogSink>> FileAccessLogSink::Open(std::string path) {
  if (path.empty()) return absl::InvalidArgumentError("--access-log: empty path (use - for stdout)");
  std::unique_ptr<FileAccessLogSink> sink(new FileAccessLogSink(std::move(path)));
  if (absl::Status s = sink->OpenFile(); !s.ok()) return s;
  return sink;
}

FileAccessLogSink::~FileAccessLogSink() {
  if (fd_ >= 0 && fd_ != STDOUT_FILENO) ::close(fd_);
}

absl::Status FileAccessLogSink::OpenFile() {
  if (path_ == "-") {
    fd_ = STDOUT_FILENO;
    return absl::OkStatus();
  }
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("--access-log ", path_, ": ", std::strerror(errno)));
  fd_ = fd;
  return absl::OkStatus();
}

absl::Status FileAccessLogSink::Write(std::string_view lines) {
  while (!lines.empty()) {
    const ssize_t n = ::write(fd_, lines.data(), lines.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(absl::StrCat("writing ", path_, ": ", std::strerror(errno)));
    }
    lines.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status FileAccessLogSink::Reopen() {
  if (path_ == "-") return absl::OkStatus();
  const int old = fd_;
  // The new file first: if it cannot be opened, the log goes on in the old one.
  if (absl::Status s = OpenFile(); !s.ok()) return s;
  if (old >= 0) ::close(old);
  return absl::OkStatus();
}

// ---- AccessLog -----------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<AccessLog>> AccessLog::Create(std::unique_ptr<AccessLogSink> sink,
                                                             const AccessLogOptions& options) {
  if (sink == nullptr) return absl::InvalidArgumentError("the access log needs a sink");
  if (options.max_pending == 0) return absl::InvalidArgumentError("access log max_pending must be at least 1");
  return std::unique_ptr<AccessLog>(new AccessLog(std::move(sink), options));
}

AccessLog::AccessLog(std::unique_ptr<AccessLogSink> sink, const AccessLogOptions& options)
    : sink_(std::move(sink)), options_(options) {
  writer_ = std::thread([this] { WriterLoop(); });
}

AccessLog::~AccessLog() {
  Flush();
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  writer_.join();
}

void AccessLog::CountDropped(uint64_t n) {
  dropped_ += n;
  if (options_.dropped != nullptr) options_.dropped->Increment(static_cast<double>(n));
}

void AccessLog::Log(AccessRecord record) {
  absl::MutexLock lock(&mu_);
  ++logged_;
  if (pending_.size() >= options_.max_pending) {
    ++written_;  // done with it: dropped
    CountDropped(1);
    return;
  }
  pending_.push_back(std::move(record));
}

void AccessLog::Reopen() {
  absl::MutexLock lock(&mu_);
  reopen_ = true;
}

void AccessLog::Flush() {
  absl::MutexLock lock(&mu_);
  struct Written {
    const AccessLog* log;
    uint64_t target;
    bool Done() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return log->written_ >= target; }
  };
  const Written written{this, logged_};
  mu_.Await(absl::Condition(&written, &Written::Done));
}

void AccessLog::WriterLoop() {
  struct Work {
    const AccessLog* log;
    bool Ready() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return !log->pending_.empty() || log->reopen_ || log->stop_;
    }
  };
  const Work work{this};
  std::vector<AccessRecord> batch;
  std::string lines;
  for (;;) {
    bool reopen = false;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&work, &Work::Ready));
      if (stop_ && pending_.empty()) return;
      batch.assign(std::make_move_iterator(pending_.begin()), std::make_move_iterator(pending_.end()));
      pending_.clear();
      reopen = std::exchange(reopen_, false);
    }
    // Formatting and I/O outside the lock: Log only ever waits for a push.
    if (reopen) {
      if (absl::Status s = sink_->Reopen(); !s.ok()) spdlog::error("access log: reopen: {}", std::string(s.message()));
    }
    lines.clear();
    for (const AccessRecord& r : batch) {
      lines += FormatAccessRecord(r);
      lines += '\n';
    }
    absl::Status s = lines.empty() ? absl::OkStatus() : sink_->Write(lines);
    if (!s.ok()) {
      const auto now = std::chrono::steady_clock::now();
      if (now - last_error_log_ >= std::chrono::minutes(1)) {
        spdlog::error("access log: {} ({} record(s) dropped)", std::string(s.message()), batch.size());
        last_error_log_ = now;
      }
    }
    absl::MutexLock lock(&mu_);
    if (!s.ok()) CountDropped(batch.size());
    written_ += batch.size();
    batch.clear();
  }
}

}  // namespace tide::serving
