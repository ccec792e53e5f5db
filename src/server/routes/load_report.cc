#include "server/routes/load_report.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace tide::server {

LoadReport MakeLoadReport(bool ready, int64_t in_flight, int64_t max_concurrent_requests,
                          std::span<const serving::QueueLoad> queues) {
  LoadReport r;
  r.ready = ready;
  r.in_flight = std::max<int64_t>(0, in_flight);
  r.max_concurrent_requests = max_concurrent_requests;
  for (const serving::QueueLoad& q : queues) {
    r.queued_tasks += q.queued_tasks;
    r.queued_tokens += q.queued_tokens;
  }
  if (!ready) {
    r.free_percent = 0;
  } else if (max_concurrent_requests > 0) {
    const int64_t free = std::max<int64_t>(0, max_concurrent_requests - r.in_flight);
    r.free_percent = static_cast<int>(free * 100 / max_concurrent_requests);
  } else {
    r.free_percent = static_cast<int>(100 / (1 + r.in_flight));
  }
  return r;
}

std::string RenderLoadJson(const LoadReport& r) {
  return absl::StrFormat(
      R"({"ready":%s,"in_flight":%d,"max_concurrent_requests":%d,"queued_tasks":%d,"queued_tokens":%d,"free_percent":%d})",
      r.ready ? "true" : "false", r.in_flight, r.max_concurrent_requests, r.queued_tasks, r.queued_tokens,
      r.free_percent);
}

}  // namespace tide::server
