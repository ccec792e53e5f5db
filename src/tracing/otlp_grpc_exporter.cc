#include "tracing/otlp_grpc_exporter.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.grpc.pb.h"

namespace tide::tracing {
namespace {

namespace collector = opentelemetry::proto::collector::trace::v1;

bool Retryable(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DATA_LOSS:
      return true;
    default:
      return false;
  }
}

}  // namespace

struct OtlpGrpcExporter::Stub {
  std::unique_ptr<collector::TraceService::Stub> stub;
};

OtlpGrpcExporter::OtlpGrpcExporter(std::string authority, std::vector<std::pair<std::string, std::string>> headers,
                                   Resource resource)
    : authority_(std::move(authority)), headers_(std::move(headers)), resource_(std::move(resource)),
      stub_(std::make_unique<Stub>()) {
  for (auto& [name, value] : headers_) name = absl::AsciiStrToLower(name);
  stub_->stub = collector::TraceService::NewStub(
      grpc::CreateChannel(authority_, grpc::InsecureChannelCredentials()));
}

OtlpGrpcExporter::~OtlpGrpcExporter() = default;

ExportResult OtlpGrpcExporter::Export(const std::vector<SpanData>& spans, std::chrono::milliseconds timeout) {
  collector::ExportTraceServiceRequest request;
  EncodeExportRequest(spans, resource_, &request);
  collector::ExportTraceServiceResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  for (const auto& [name, value] : headers_) context.AddMetadata(name, value);
  const grpc::Status status = stub_->stub->Export(&context, request, &response);
  if (status.ok()) return ExportResult::Ok();
  std::string message = absl::StrCat("OTLP/gRPC ", authority_, ": ", static_cast<int>(status.error_code()), " ",
                                     status.error_message());
  if (Retryable(status.error_code())) return ExportResult::Retryable(std::move(message));
  return ExportResult::Failed(std::move(message));
}

}  // namespace tide::tracing
