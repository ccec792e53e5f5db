// tide::serving::AccessLog — the structured access log (`--access-log PATH|-`): one JSON line per
// answered request, from every edge (HTTP and gRPC), written off the request path.
//
// Contract:
//  - Log(record) never blocks on I/O and never waits for the writer: it takes a mutex for a
//    push onto a bounded queue (options.max_pending records) and returns. A record that finds
//    the queue full is dropped and counted (dropped(), and tide_access_log_dropped_total when a
//    counter is given) rather than slowing the request down.
//  - One writer thread formats the queued records (FormatAccessRecord) and hands them to the sink
//    in one Write per wake-up, in the order Log was called. A failed Write drops that batch,
//    counts its records as dropped and is logged (at most once a minute).
//  - Reopen() asks the writer to reopen the sink before its next write (SIGHUP, for logrotate:
//    the file was renamed, the log continues in a new file at the same path); it returns at once.
//  - Flush() waits until every record logged before the call has been written (or dropped); for
//    tests and shutdown. The destructor flushes, then stops the writer.
//  - The record holds the API key's name, never the key. Strings are escaped as JSON (invalid
//    UTF-8 replaced), so a client-chosen request id or model name cannot break a line.
//  - Thread-safe. The sink is used only by the writer thread (and by Create, to open it).
//
// AccessLogSink is the one plug-in point: FileAccessLogSink appends to a path (O_APPEND, created
// 0644) or writes to stdout for "-" (Reopen is a no-op there); tests use a fake.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "metrics/metric.h"

namespace tide::serving {

// What one answered request leaves in the access log.
struct AccessRecord {
  std::chrono::system_clock::time_point time;  // when the answer was sent
  const char* protocol = "http";               // "http" | "grpc"
  std::string route;                           // the endpoint (tide_requests_total's `endpoint`)
  std::string model;                           // "" when answered before a model was chosen
  std::string version;
  int status = 0;          // HTTP status; gRPC: the HTTP status of the answer's error kind (200 OK)
  std::string error_type;  // the error kind's name ("" on success)
  std::string key;         // the API key's name (--api-keys / "default"); "" when none
  int64_t pairs = 0;       // pairs (documents, windows, rows) charged to the call
  int64_t cache_hits = 0;  // of those, answered from the score cache
  bool degraded = false;   // answered by a fallback (breaker open)
  std::optional<double> queue_ms;      // time in the model's queue; unknown: null
  std::optional<double> inference_ms;  // time running the model; unknown: null
  double total_ms = 0;                 // arrival to answer
  std::string request_id;              // the client's x-request-id, else one tide made
  std::string trace_id;                // the request's trace (32 hex) and server span (16 hex); "": not traced
  std::string span_id;
};

// {"time":"2026-12-01T12:00:00.123Z","protocol":"http","route":"rerank",...}, without a newline.
std::string FormatAccessRecord(const AccessRecord& record);

class AccessLogSink {
 public:
  virtual ~AccessLogSink() = default;
  // Writes `lines` (whole lines, each ending in '\n') at once.
  virtual absl::Status Write(std::string_view lines) = 0;
  // Closes and reopens the destination (logrotate).
  virtual absl::Status Reopen() = 0;
};

class FileAccessLogSink final : public AccessLogSink {
 public:
  // "-": stdout. Otherwise the file is opened (created) for appending; an error names the path.
  static absl::StatusOr<std::unique_ptr<FileAccessLogSink>> Open(std::string path);
  ~FileAccessLogSink() override;
  absl::Status Write(std::string_view lines) override;
  absl::Status Reopen() override;

 private:
  explicit FileAccessLogSink(std::string path) : path_(std::move(path)) {}
  absl::Status OpenFile();
  std::string path_;
  int fd_ = -1;
};

struct AccessLogOptions {
  size_t max_pending = 16384;  // records queued for the writer beyond which new ones are dropped
  metrics::Counter* dropped = nullptr;  // tide_access_log_dropped_total; may be null
};

class AccessLog {
 public:
  static absl::StatusOr<std::unique_ptr<AccessLog>> Create(std::unique_ptr<AccessLogSink> sink,
                                                           const AccessLogOptions& options);
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  void Log(AccessRecord record);
  void Reopen();
  void Flush();
  uint64_t dropped() const {
    absl::MutexLock lock(&mu_);
    return dropped_;
  }

 private:
  // Implementation details follow.
  AccessLog(std::unique_ptr<AccessLogSink> sink, const AccessLogOptions& options);
  void WriterLoop();
  void CountDropped(uint64_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<AccessLogSink> sink_;
  const AccessLogOptions options_;
  mutable absl::Mutex mu_;
  std::deque<AccessRecord> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t logged_ ABSL_GUARDED_BY(mu_) = 0;   // records Log accepted or dropped, in order
  uint64_t written_ ABSL_GUARDED_BY(mu_) = 0;  // of those, written or dropped (Flush waits for logged_)
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  bool reopen_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point last_error_log_;  // writer thread only
  std::thread writer_;
};

}  // namespace tide::serving
