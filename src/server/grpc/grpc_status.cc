#include "server/grpc/grpc_status.h"

#include <string>

#include "api/status_http.h"
#include "serving/scoring.h"

namespace tide::grpc_edge {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(api::GrpcStatusFor(status)), std::string(status.message()));
}

void AddErrorTrailers(const absl::Status& status, grpc::CallbackServerContext* context) {
  if (status.ok()) return;
  const int code = api::GrpcStatusFor(status);
  if (code == grpc::StatusCode::RESOURCE_EXHAUSTED || code == grpc::StatusCode::UNAVAILABLE) {
    context->AddTrailingMetadata("retry-after", "1");
    context->AddTrailingMetadata("grpc-retry-pushback-ms", "1000");
  }
  context->AddTrailingMetadata("x-tide-error-type", std::string(api::ErrorTypeFor(status)));
  if (serving::IsDegradedUnavailable(status)) context->AddTrailingMetadata("x-tide-degraded", "unavailable");
}

}  // namespace tide::grpc_edge
