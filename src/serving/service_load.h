// tide::serving::ServiceLoad — what a load balancer needs (GET /load), as the service core reports
// it: readiness, calls in flight against their limit, and every served version's queue. A plain
// value; the edges turn it into their report (server/routes/load_report.h) without the batcher.
#pragma once

#include <cstdint>
#include <vector>

namespace tide::serving {

// One served version's batcher queue.
struct QueueLoad {
  uint64_t queued_tasks = 0;   // rows waiting
  uint64_t queued_tokens = 0;  // their tokens
};

struct ServiceLoad {
  bool ready = false;
  int64_t in_flight = 0;
  int64_t max_concurrent_requests = 0;  // <= 0: no limit
  std::vector<QueueLoad> queues;        // one per served version
};

}  // namespace tide::serving
