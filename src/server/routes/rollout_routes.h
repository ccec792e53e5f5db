// tide::server::RolloutRoutes — gray release of a model over HTTP (serving/rollout.h):
//
//   GET  /v2/models/{m}/rollout            {"stable", "candidate", "mode", "percent", "sticky_header",
//                                           "state", "reason", "guard": {...},
//                                           "stats": {"<version>": {"requests", "errors", "p50_ms", "p99_ms"}},
//                                           "agreement": {"pairs", "spearman", "top1", "ndcg10", "cosine"}}
//   PUT  /v2/models/{m}/rollout            {"candidate": "2", "mode": "canary"|"shadow"|"none",
//                                           "percent": 10, "sticky_header": "x-user-id", "stable": "1",
//                                           "window": 1000, "guard": {"min_requests", "max_error_rate",
//                                           "max_p99_ratio", "min_spearman", "min_top1", "min_ndcg10",
//                                           "min_cosine"}}
//   POST /v2/models/{m}/rollout/promote    the candidate becomes the stable version
//   POST /v2/models/{m}/rollout/rollback   every request that names no version goes to the stable one
//
// Contract:
//  - Admin endpoints, guarded like the repository API: with an admin key (--admin-api-key, else
//    --api-key) a request without `Authorization: Bearer <key>` gets 401 before anything else.
//  - PUT: the body as serving::ParseRolloutJson reads it (a bad field is 422 naming it, bad JSON
//    400), started by ServiceCore::StartRollout (both versions must be loaded: 404 otherwise). A
//    PUT replaces the model's rollout and clears its windows. It answers the new GET body.
//  - GET of a model without a rollout: mode "none", state "idle", the newest version as stable.
//  - promote / rollback: 200 with the GET body; 404 without a rollout, 422 when it is not running.
//  - Answers on the calling thread; thread-safe; the core must outlive the routes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/http/http_server.h"
#include "server/http/router.h"
#include "server/access/access_table.h"
#include "serving/rollout.h"
#include "serving/service_core.h"

namespace tide::server {

struct RolloutRoutesOptions {
};

class RolloutRoutes {
 public:
  RolloutRoutes(serving::ServiceCore* core, RolloutRoutesOptions options);

  http::Response Get(const http::Request& request, const std::string& model) const;
  http::Response Put(const http::Request& request, const std::string& model) const;
  http::Response Promote(const http::Request& request, const std::string& model) const;
  http::Response Rollback(const http::Request& request, const std::string& model) const;

 private:
  http::Response Render(const std::string& model) const;

  serving::ServiceCore* const core_;
  const RolloutRoutesOptions options_;
};

// The route handler of one rollout endpoint (kRolloutGet, kRolloutPut, kRolloutPromote,
// kRolloutRollback). `routes` null: every rollout path answers 404.
http::RouteHandler RolloutRouteHandler(const RolloutRoutes* routes, Endpoint endpoint);

}  // namespace tide::server
