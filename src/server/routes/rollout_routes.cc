#include "server/routes/rollout_routes.h"

#include <algorithm>
#include <charconv>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/routes/route_util.h"
#include "api/admin_input.h"
#include "api/status_http.h"
#include "common/error.h"
#include "common/ascii.h"
#include "nlohmann/json.hpp"
#include "pipeline/request_pipeline.h"
#include "serving/rollout_json.h"

namespace tide::server {
namespace {

using json = nlohmann::json;

}  // namespace

RolloutRoutes::RolloutRoutes(serving::ServiceCore* core, RolloutRoutesOptions options)
    : core_(core), options_(std::move(options)) {}

http::Response RolloutRoutes::Render(const std::string& model) const {
  auto newest = core_->FindModel(model);
  if (!newest.ok()) return ErrorResponse(newest.status());
  std::optional<serving::RolloutStatus> status = pipeline::RolloutStatusOf(*core_, model);
  json out;
  if (!status.has_value()) {
    out = {{"stable", std::to_string((*newest)->version())},
           {"candidate", ""},
           {"mode", "none"},
           {"percent", 0},
           {"state", "idle"},
           {"reason", ""},
           {"stats", json::object()},
           {"agreement", {{"pairs", 0}, {"spearman", nullptr}, {"top1", nullptr}, {"ndcg10", nullptr}, {"cosine", nullptr}}}};
    return JsonResponse(out.dump());
  }
  const serving::RolloutSpec& spec = status->spec;
  out = serving::RolloutSpecToJson(spec);
  out["state"] = std::string(serving::RolloutStateName(status->state));
  out["reason"] = status->reason;
  json stats = json::object();
  for (const auto& v : status->stats) {
    stats[std::to_string(v.version)] = {
        {"requests", v.requests}, {"errors", v.errors}, {"p50_ms", v.p50_ms}, {"p99_ms", v.p99_ms}};
  }
  out["stats"] = std::move(stats);
  json agreement = {{"pairs", status->pairs}};
  if (status->pairs > 0) {
    agreement["spearman"] = status->agreement.spearman;
    agreement["top1"] = status->agreement.top1;
    agreement["ndcg10"] = status->agreement.ndcg10;
    agreement["cosine"] = status->agreement.cosine;
  } else {
    agreement["spearman"] = agreement["top1"] = agreement["ndcg10"] = agreement["cosine"] = nullptr;
  }
  out["agreement"] = std::move(agreement);
  return JsonResponse(out.dump(-1, ' ', false, json::error_handler_t::replace));
}

http::Response RolloutRoutes::Get(const http::Request& request, const std::string& model) const {
  return Render(model);
}

http::Response RolloutRoutes::Put(const http::Request& request, const std::string& model) const {
  if (auto found = core_->FindModel(model); !found.ok()) return ErrorResponse(found.status());
  if (absl::Status s = api::CheckAdminBody(request.body); !s.ok()) return ErrorResponse(s);
  auto put = serving::ParseRolloutJson(request.body);
  if (!put.ok()) return ErrorResponse(put.status());
  if (absl::Status s = core_->StartRollout(model, *put); !s.ok()) return ErrorResponse(s);
  return Render(model);
}

http::Response RolloutRoutes::Promote(const http::Request& request, const std::string& model) const {
  if (absl::Status s = core_->PromoteRollout(model); !s.ok()) return ErrorResponse(s);
  return Render(model);
}

http::Response RolloutRoutes::Rollback(const http::Request& request, const std::string& model) const {
  if (absl::Status s = core_->RollbackRollout(model, "manual rollback (POST /v2/models/{m}/rollout/rollback)");
      !s.ok()) {
    return ErrorResponse(s);
  }
  return Render(model);
}

http::RouteHandler RolloutRouteHandler(const RolloutRoutes* routes, Endpoint endpoint) {
  if (routes == nullptr) {
    return [](http::Request, http::PathParams, http::Responder respond) {
      std::move(respond)(ErrorResponse(errors::NotFound("the rollout API is not enabled on this server")));
    };
  }
  using Method = http::Response (RolloutRoutes::*)(const http::Request&, const std::string&) const;
  Method method = nullptr;
  switch (endpoint) {
    case Endpoint::kRolloutGet: method = &RolloutRoutes::Get; break;
    case Endpoint::kRolloutPut: method = &RolloutRoutes::Put; break;
    case Endpoint::kRolloutPromote: method = &RolloutRoutes::Promote; break;
    case Endpoint::kRolloutRollback: method = &RolloutRoutes::Rollback; break;
    default: return nullptr;
  }
  return [routes, method](http::Request r, http::PathParams p, http::Responder respond) {
    std::move(respond)((routes->*method)(r, std::string(p.Get("model"))));
  };
}

}  // namespace tide::server
