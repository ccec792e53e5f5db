// tide::server::RepositoryRoutes — Triton's model repository extension over HTTP:
//
//   POST /v2/repository/index                  [{"name", "version", "state", "reason"}]
//                                              body optional: {"ready": true} lists READY only
//   POST /v2/repository/models/{m}/load        body optional: {"parameters": {"config": "<JSON ModelConfig>"}}
//   POST /v2/repository/models/{m}/unload      body optional: {} (Triton's unload_dependents is refused)
//
// Contract:
//  - Admin endpoints: who may call them is decided before these handlers run, by the Service
//    from the access table (server/access/access_table.h: admin role, JSON Content-Type, no
//    foreign Origin); the handlers assume an admitted admin.
//  - Load and unload answer once the controller has done the work, from the controller's thread
//    (loads are serialised there), never blocking an HTTP thread: 200 `{}` on success, else the
//    controller's error rendered from the one status table (403 outside explicit mode, 404 for a
//    model not in the repository, 422 for a failed load with the loader's message).
//  - The index answers on the calling thread and never waits for a load.
//  - Thread-safe; the controller must outlive the routes.
#pragma once

#include <string>

#include "server/http/http_server.h"
#include "server/http/router.h"
#include "server/access/access_table.h"
#include "serving/model_repository_controller.h"

namespace tide::server {

struct RepositoryRoutesOptions {
};

class RepositoryRoutes {
 public:
  RepositoryRoutes(serving::ModelRepositoryController* controller, RepositoryRoutesOptions options);

  http::Response Index(const http::Request& request) const;
  void Load(const http::Request& request, std::string model, http::Responder respond) const;
  void Unload(const http::Request& request, std::string model, http::Responder respond) const;

 private:

  serving::ModelRepositoryController* const controller_;
  const RepositoryRoutesOptions options_;
};

// The route handler of one repository endpoint (kRepositoryIndex, kRepositoryLoad,
// kRepositoryUnload) for the Service's router. `routes` null: the extension is off and every
// repository path answers 404.
http::RouteHandler RepositoryRouteHandler(const RepositoryRoutes* routes, Endpoint endpoint);

}  // namespace tide::server
