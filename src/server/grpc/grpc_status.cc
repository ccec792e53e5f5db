#include "server/grpc/grpc_status.h"

#include <string>

#include "common/error.h"

namespace tide::grpc_edge {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(Info(KindOf(status)).grpc_code), std::string(status.message()));
}

void AddErrorTrailers(const absl::Status& status, grpc::CallbackServerContext* context) {
  if (status.ok()) return;
  const ErrorFacts facts = FactsOf(status);
  if (facts.retry_after_ms.has_value()) {
    context->AddTrailingMetadata("retry-after", std::to_string(RetryAfterSeconds(*facts.retry_after_ms)));
    context->AddTrailingMetadata("grpc-retry-pushback-ms", std::to_string(*facts.retry_after_ms));
  }
  context->AddTrailingMetadata("x-tide-error-type", std::string(facts.info->error_type));
  if (!facts.degraded.empty()) context->AddTrailingMetadata("x-tide-degraded", facts.degraded);
}

}  // namespace tide::grpc_edge
