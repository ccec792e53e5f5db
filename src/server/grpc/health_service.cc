#include "server/grpc/health_service.h"

#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/error.h"
#include "common/error_echo.h"
#include "server/grpc/grpc_call.h"

namespace tide::grpc_edge {

namespace {

bool Served(std::string_view service) {
  for (std::string_view s : {"", "inference.GRPCInferenceService", "tei.v1.Info", "tei.v1.Rerank", "tei.v1.Tokenize",
                             "grpc.health.v1.Health"}) {
    if (service == s) return true;
  }
  return false;
}

}  // namespace

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* context,
                                               const grpc::health::v1::HealthCheckRequest* request,
                                               grpc::health::v1::HealthCheckResponse* response) {
  auto* reactor = new UnaryReactor();
  UnaryAnswer answer(context, reactor, &core_->metrics(), core_->access_log(), "health_check", Steady::now());
  if (!Served(request->service())) {
    answer.FinishError(errors::NotFound(absl::StrCat("unknown service '", EchoForError(request->service()), "'")));
    return reactor;
  }
  response->set_status(core_->Ready() ? grpc::health::v1::HealthCheckResponse::SERVING
                                      : grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  answer.Finish();
  return reactor;
}

}  // namespace tide::grpc_edge
