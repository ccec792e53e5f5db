// tide::server::LoadReport — what a load balancer needs to route by load: GET /load.
//
// Contract:
//  - MakeLoadReport is pure: it adds up the batcher queues of every served model and computes the
//    free capacity from the requests in flight against --max-concurrent-requests.
//  - free_percent: 100 * (1 - in_flight / max_concurrent_requests), clamped to [0, 100]; 0 when
//    not ready (loading or draining). Without a limit (max <= 0) it is 100 / (1 + in_flight).
//    Queued tokens are reported as they are, for balancers that weigh request sizes themselves
//    (bench/replicas/load_agent.py turns both into an haproxy agent-check weight).
//  - RenderLoadJson: {"ready":..,"in_flight":..,"max_concurrent_requests":..,"queued_tasks":..,
//    "queued_tokens":..,"free_percent":..}. Reading it takes the batchers' locks briefly and runs
//    no model code, so it is cheap enough to poll every 100 ms.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "serving/service_load.h"

namespace tide::server {

struct LoadReport {
  bool ready = false;
  int64_t in_flight = 0;
  int64_t max_concurrent_requests = 0;  // <= 0: no limit
  uint64_t queued_tasks = 0;            // rows waiting in every model's batcher
  uint64_t queued_tokens = 0;           // their tokens
  int free_percent = 0;
};

LoadReport MakeLoadReport(bool ready, int64_t in_flight, int64_t max_concurrent_requests,
                          std::span<const serving::QueueLoad> queues);

std::string RenderLoadJson(const LoadReport& report);

}  // namespace tide::server
