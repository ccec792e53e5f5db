#include "server/routes/repository_routes.h"

#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/routes/route_util.h"
#include "api/admin_input.h"
#include "api/status_http.h"
#include "common/error.h"
#include "nlohmann/json.hpp"

namespace tide::server {
namespace {

using json = nlohmann::json;

// The request body as a JSON object; an empty body is an empty object. Bounded first (size,
// depth, strings: api/admin_input.h), before nlohmann's recursive parser sees it.
absl::StatusOr<json> BodyObject(const http::Request& request) {
  if (absl::Status s = api::CheckAdminBody(request.body); !s.ok()) return s;
  if (request.body.find_first_not_of(" \t\r\n") == std::string::npos) return json::object();
  json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return errors::MalformedRequest("the request body is not valid JSON");
  if (!body.is_object()) return errors::InvalidInput("the request body must be a JSON object");
  return body;
}

}  // namespace

RepositoryRoutes::RepositoryRoutes(serving::ModelRepositoryController* controller, RepositoryRoutesOptions options)
    : controller_(controller), options_(std::move(options)) {}

http::Response RepositoryRoutes::Index(const http::Request& request) const {
  auto body = BodyObject(request);
  if (!body.ok()) return ErrorResponse(body.status());
  bool ready_only = false;
  if (auto it = body->find("ready"); it != body->end()) {
    if (!it->is_boolean()) return ErrorResponse(errors::InvalidInput("ready must be a boolean"));
    ready_only = it->get<bool>();
  }
  json out = json::array();
  for (const serving::ModelStateEntry& e : controller_->Index(ready_only)) {
    out.push_back({{"name", e.name},
                   {"version", e.version.has_value() ? std::to_string(*e.version) : std::string()},
                   {"state", std::string(serving::ModelStateName(e.state))},
                   {"reason", e.reason}});
  }
  return JsonResponse(out.dump(-1, ' ', false, json::error_handler_t::replace));
}

void RepositoryRoutes::Load(const http::Request& request, std::string model, http::Responder respond) const {
  auto body = BodyObject(request);
  if (!body.ok()) return std::move(respond)(ErrorResponse(body.status()));
  std::optional<std::string> config;
  if (auto params = body->find("parameters"); params != body->end()) {
    if (!params->is_object()) return std::move(respond)(ErrorResponse(errors::InvalidInput("parameters must be an object")));
    for (const auto& [key, value] : params->items()) {
      if (key != "config") {
        return std::move(respond)(ErrorResponse(errors::InvalidInput(absl::StrCat(
            "parameters.", key.substr(0, 128), ": unsupported (tide takes parameters.config only; model files "
            "are read from the repository)"))));
      }
      if (!value.is_string()) {
        return std::move(respond)(
            ErrorResponse(errors::InvalidInput("parameters.config must be a string holding the JSON model configuration")));
      }
      config = value.get<std::string>();
    }
  }
  controller_->LoadAsync(std::move(model), std::move(config),
                         [respond = std::move(respond)](absl::Status status) mutable {
                           std::move(respond)(status.ok() ? JsonResponse("{}") : ErrorResponse(status));
                         });
}

void RepositoryRoutes::Unload(const http::Request& request, std::string model, http::Responder respond) const {
  auto body = BodyObject(request);
  if (!body.ok()) return std::move(respond)(ErrorResponse(body.status()));
  controller_->UnloadAsync(std::move(model), [respond = std::move(respond)](absl::Status status) mutable {
    std::move(respond)(status.ok() ? JsonResponse("{}") : ErrorResponse(status));
  });
}

http::RouteHandler RepositoryRouteHandler(const RepositoryRoutes* routes, Endpoint endpoint) {
  if (routes == nullptr) {
    return [](http::Request, http::PathParams, http::Responder respond) {
      std::move(respond)(ErrorResponse(errors::NotFound("the model repository extension is not enabled on this server")));
    };
  }
  switch (endpoint) {
    case Endpoint::kRepositoryIndex:
      return [routes](http::Request r, http::PathParams, http::Responder respond) {
        std::move(respond)(routes->Index(r));
      };
    case Endpoint::kRepositoryLoad:
      return [routes](http::Request r, http::PathParams p, http::Responder respond) {
        routes->Load(r, std::string(p.Get("model")), std::move(respond));
      };
    case Endpoint::kRepositoryUnload:
      return [routes](http::Request r, http::PathParams p, http::Responder respond) {
        routes->Unload(r, std::string(p.Get("model")), std::move(respond));
      };
    default:
      return nullptr;
  }
}

}  // namespace tide::server
