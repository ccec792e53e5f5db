#include "server/routes/rollout_routes.h"

#include <algorithm>
#include <charconv>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/status_http.h"
#include "common/error.h"
#include "common/ascii.h"
#include "guard/api_key.h"
#include "nlohmann/json.hpp"

namespace tide::server {
namespace {

using json = nlohmann::json;

http::Response Json(std::string body, int status = 200) {
  http::Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

http::Response Error(const absl::Status& status) {
  http::Response r = Json(api::ErrorBody(status), api::HttpStatusFor(status));
  if (r.status == 503 || r.status == 429) r.headers.emplace_back("Retry-After", "1");
  return r;
}

// A version number given as "2" or 2.
absl::StatusOr<int64_t> VersionField(const json& v, const char* field) {
  if (v.is_number_integer() && v.get<int64_t>() > 0) return v.get<int64_t>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    int64_t n = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec == std::errc() && ptr == s.data() + s.size() && n > 0) return n;
  }
  return errors::InvalidInput(absl::StrCat(field, " must be a version number (\"2\" or 2)"));
}

absl::Status NumberField(const json& obj, const char* field, double lo, double hi, double* out) {
  auto it = obj.find(field);
  if (it == obj.end()) return absl::OkStatus();
  if (!it->is_number() || it->get<double>() < lo || it->get<double>() > hi) {
    return errors::InvalidInput(absl::StrCat(field, " must be a number within ", lo, "..", hi));
  }
  *out = it->get<double>();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RolloutPut> ParseRolloutPut(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return errors::MalformedRequest("the rollout is not valid JSON");
  if (!j.is_object()) return errors::InvalidInput("the rollout must be a JSON object");
  static const char* const kFields[] = {"candidate", "stable", "mode", "percent", "sticky_header", "guard", "window"};
  for (const auto& [key, value] : j.items()) {
    if (std::find_if(std::begin(kFields), std::end(kFields), [&](const char* f) { return key == f; }) ==
        std::end(kFields)) {
      return errors::InvalidInput(absl::StrCat("unknown rollout field '", key.substr(0, 64), "'"));
    }
  }
  RolloutPut out;
  serving::RolloutSpec& spec = out.spec;
  auto cand = j.find("candidate");
  if (cand == j.end()) return errors::InvalidInput("candidate is required");
  auto c = VersionField(*cand, "candidate");
  if (!c.ok()) return c.status();
  spec.candidate = *c;
  if (auto it = j.find("stable"); it != j.end()) {
    auto s = VersionField(*it, "stable");
    if (!s.ok()) return s.status();
    out.stable = *s;
    spec.stable = *s;
  }
  if (auto it = j.find("mode"); it != j.end()) {
    auto mode = it->is_string() ? serving::ParseRolloutMode(it->get<std::string>()) : std::nullopt;
    if (!mode.has_value()) return errors::InvalidInput("mode must be \"canary\", \"shadow\" or \"none\"");
    spec.mode = *mode;
  }
  spec.percent = spec.mode == serving::RolloutMode::kShadow ? 100 : 10;
  if (absl::Status s = NumberField(j, "percent", 0, 100, &spec.percent); !s.ok()) return s;
  if (auto it = j.find("sticky_header"); it != j.end()) {
    if (!it->is_string() || it->get<std::string>().size() > 128) {
      return errors::InvalidInput("sticky_header must be a header name (a string)");
    }
    spec.sticky_header = it->get<std::string>();
    for (char& ch : spec.sticky_header) ch = AsciiToLower(ch);
  }
  if (auto it = j.find("window"); it != j.end()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 1000000) {
      return errors::InvalidInput("window must be an integer within 1..1000000");
    }
    spec.window = static_cast<size_t>(it->get<int64_t>());
  }
  if (auto it = j.find("guard"); it != j.end()) {
    if (!it->is_object()) return errors::InvalidInput("guard must be an object");
    serving::RolloutGuard& g = spec.guard;
    static const char* const kGuard[] = {"min_requests", "max_error_rate", "max_p99_ratio",
                                         "min_spearman", "min_top1",       "min_ndcg10"};
    for (const auto& [key, value] : it->items()) {
      if (std::find_if(std::begin(kGuard), std::end(kGuard), [&](const char* f) { return key == f; }) ==
          std::end(kGuard)) {
        return errors::InvalidInput(absl::StrCat("unknown guard field '", key.substr(0, 64), "'"));
      }
    }
    if (auto m = it->find("min_requests"); m != it->end()) {
      if (!m->is_number_integer() || m->get<int64_t>() < 1 || m->get<int64_t>() > 1000000) {
        return errors::InvalidInput("guard.min_requests must be an integer within 1..1000000");
      }
      g.min_requests = m->get<int64_t>();
    }
    for (auto [field, lo, hi, out] : {std::tuple{"max_error_rate", 0.0, 1.0, &g.max_error_rate},
                                      std::tuple{"max_p99_ratio", 0.0, 1e6, &g.max_p99_ratio},
                                      std::tuple{"min_spearman", -1.0, 1.0, &g.min_spearman},
                                      std::tuple{"min_top1", 0.0, 1.0, &g.min_top1},
                                      std::tuple{"min_ndcg10", 0.0, 1.0, &g.min_ndcg10}}) {
      if (absl::Status s = NumberField(*it, field, lo, hi, out); !s.ok()) {
        return errors::InvalidInput(absl::StrCat("guard.", s.message()));
      }
    }
  }
  return out;
}

RolloutRoutes::RolloutRoutes(serving::ServiceCore* core, RolloutRoutesOptions options)
    : core_(core), options_(std::move(options)) {}

std::optional<http::Response> RolloutRoutes::Unauthorized(const http::Request& request) const {
  if (options_.admin_api_key.empty() || guard::ApiKeyMatches(request.header("authorization"), options_.admin_api_key)) {
    return std::nullopt;
  }
  http::Response r = Error(errors::Unauthenticated(
      "the rollout API needs the admin key (Authorization: Bearer <--admin-api-key, else --api-key>)"));
  r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

http::Response RolloutRoutes::Render(const std::string& model) const {
  auto newest = core_->FindModel(model);
  if (!newest.ok()) return Error(newest.status());
  std::optional<serving::RolloutStatus> status = core_->rollouts().Get(model);
  json out;
  if (!status.has_value()) {
    out = {{"stable", std::to_string((*newest)->version())},
           {"candidate", ""},
           {"mode", "none"},
           {"percent", 0},
           {"state", "idle"},
           {"reason", ""},
           {"stats", json::object()},
           {"agreement", {{"pairs", 0}, {"spearman", nullptr}, {"top1", nullptr}, {"ndcg10", nullptr}}}};
    return Json(out.dump());
  }
  const serving::RolloutSpec& spec = status->spec;
  const serving::RolloutGuard& g = spec.guard;
  out = {{"stable", std::to_string(spec.stable)},
         {"candidate", std::to_string(spec.candidate)},
         {"mode", std::string(serving::RolloutModeName(spec.mode))},
         {"percent", spec.percent},
         {"sticky_header", spec.sticky_header},
         {"window", spec.window},
         {"state", std::string(serving::RolloutStateName(status->state))},
         {"reason", status->reason},
         {"guard",
          {{"min_requests", g.min_requests},
           {"max_error_rate", g.max_error_rate},
           {"max_p99_ratio", g.max_p99_ratio},
           {"min_spearman", g.min_spearman},
           {"min_top1", g.min_top1},
           {"min_ndcg10", g.min_ndcg10}}}};
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
  } else {
    agreement["spearman"] = agreement["top1"] = agreement["ndcg10"] = nullptr;
  }
  out["agreement"] = std::move(agreement);
  return Json(out.dump(-1, ' ', false, json::error_handler_t::replace));
}

http::Response RolloutRoutes::Get(const http::Request& request, const std::string& model) const {
  if (auto denied = Unauthorized(request)) return *std::move(denied);
  return Render(model);
}

http::Response RolloutRoutes::Put(const http::Request& request, const std::string& model) const {
  if (auto denied = Unauthorized(request)) return *std::move(denied);
  auto newest = core_->FindModel(model);
  if (!newest.ok()) return Error(newest.status());
  auto put = ParseRolloutPut(request.body);
  if (!put.ok()) return Error(put.status());
  serving::RolloutSpec spec = put->spec;
  if (!put->stable.has_value()) {
    // The version that answers now.
    std::optional<serving::RolloutStatus> current = core_->rollouts().Get(model);
    if (current.has_value() && current->state != serving::RolloutState::kIdle) {
      spec.stable = current->spec.stable;
    }
    if (spec.stable == 0 || spec.stable == spec.candidate) {
      spec.stable = 0;
      for (int64_t v : core_->models().Versions(model)) {
        if (v != spec.candidate) spec.stable = std::max(spec.stable, v);
      }
    }
    if (spec.stable == 0) {
      return Error(errors::InvalidInput(
          absl::StrCat("model ", model, " has no loaded version besides the candidate ", spec.candidate)));
    }
  }
  for (int64_t v : {spec.stable, spec.candidate}) {
    if (auto found = core_->models().Find(model, std::to_string(v)); !found.ok()) return Error(found.status());
  }
  if (absl::Status s = core_->rollouts().Start(model, spec); !s.ok()) return Error(s);
  return Render(model);
}

http::Response RolloutRoutes::Promote(const http::Request& request, const std::string& model) const {
  if (auto denied = Unauthorized(request)) return *std::move(denied);
  if (absl::Status s = core_->rollouts().Promote(model); !s.ok()) return Error(s);
  return Render(model);
}

http::Response RolloutRoutes::Rollback(const http::Request& request, const std::string& model) const {
  if (auto denied = Unauthorized(request)) return *std::move(denied);
  if (absl::Status s = core_->rollouts().Rollback(model, "manual rollback (POST /v2/models/{m}/rollout/rollback)");
      !s.ok()) {
    return Error(s);
  }
  return Render(model);
}

http::RouteHandler RolloutRouteHandler(const RolloutRoutes* routes, Endpoint endpoint) {
  if (routes == nullptr) {
    return [](http::Request, http::PathParams, http::Responder respond) {
      std::move(respond)(Error(errors::NotFound("the rollout API is not enabled on this server")));
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
