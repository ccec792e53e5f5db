// tide::grpc_edge::KServeService — KServe v2 `inference.GRPCInferenceService` with Triton's
// extensions, over serving::ServiceCore, with gRPC's callback API.
//
//   ServerLive, ServerReady, ModelReady       health (ModelReady: NOT_FOUND for an unknown model)
//   ServerMetadata, ModelMetadata, ModelConfig metadata (serving::ModelMetadataOf; the config.pbtxt)
//   ModelInfer                                inference: token tensors or BYTES text/text_pair,
//                                             typed contents or raw_input_contents (kserve_proto.h)
//   ModelStreamInfer                          the same per message of a bidirectional stream,
//                                             answers in request order
//   ModelStatistics                           Triton's statistics (all models / versions when unnamed)
//   RepositoryIndex                           every served version, state READY or UNAVAILABLE
//   RepositoryModelLoad / Unload              UNIMPLEMENTED until the repository controller is wired
//
// Contract:
//  - ModelInfer: ServiceCore::Start admits it (API key, concurrency, model, memory, deadline,
//    worker queue; the refusal is answered at once); on a tokenization worker the request pipeline
//    (pipeline/request_pipeline.h, the HTTP edge's too) chooses the version (a rollout's split when
//    none is named), has the message converted (kserve_proto.h) under the model's limits, and runs
//    it: request parameters "timeout" (us), "priority" and "long_documents", the breaker fallback,
//    Triton's classification (an output's parameters.classification = k: a BYTES output of
//    "value:index[:label]" strings, as over HTTP). A degraded answer has the response parameter
//    "degraded": true and `x-tide-degraded` trailing metadata; a model's answer has the timing
//    trailers (grpc_call.h).
//  - ModelStreamInfer: each message is one call with its own admission, under the stream's
//    deadline and cancellation; a failed message is answered with its error_message (Triton's
//    convention) and the stream goes on. At most kMaxStreamPending messages are in flight per
//    stream; the stream stops reading until answers are written.
//  - ModelMetadata, ModelConfig, ModelStatistics and RepositoryIndex need the API key, as their
//    HTTP routes; health and server metadata do not.
//  - Thread-safe; the core must outlive the service (GrpcServer shuts down gRPC first).
#pragma once

#include "grpc_service.grpc.pb.h"
#include "pipeline/request_pipeline.h"
#include "server/grpc/grpc_call.h"
#include "server/grpc/grpc_options.h"
#include "serving/service_core.h"

namespace tide::grpc_edge {

inline constexpr int kMaxStreamPending = 32;

class KServeService final : public inference::GRPCInferenceService::CallbackService {
 public:
  KServeService(serving::ServiceCore* core, const pipeline::RequestPipeline* pipeline, const GrpcServerOptions& options)
      : core_(core), pipeline_(pipeline), options_(options) {}

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context, const inference::ServerLiveRequest* request,
                                       inference::ServerLiveResponse* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const inference::ServerReadyRequest* request,
                                        inference::ServerReadyResponse* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context, const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const inference::ServerMetadataRequest* request,
                                           inference::ServerMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context, const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override;
  grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>* ModelStreamInfer(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* context, const inference::ModelConfigRequest* request,
                                        inference::ModelConfigResponse* response) override;
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* context,
                                            const inference::ModelStatisticsRequest* request,
                                            inference::ModelStatisticsResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* context,
                                            const inference::RepositoryIndexRequest* request,
                                            inference::RepositoryIndexResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryModelLoad(grpc::CallbackServerContext* context,
                                                const inference::RepositoryModelLoadRequest* request,
                                                inference::RepositoryModelLoadResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryModelUnload(grpc::CallbackServerContext* context,
                                                  const inference::RepositoryModelUnloadRequest* request,
                                                  inference::RepositoryModelUnloadResponse* response) override;

  // One ModelInfer on an admitted call, on a tokenization worker: `done` gets the response or
  // the error, exactly once, with the pipeline's outcome (the model that answered, timings, the
  // fallback of a degraded answer).
  struct InferAnswer {
    pipeline::Outcome outcome;
    inference::ModelInferResponse response{};
  };
  using InferDone = absl::AnyInvocable<void(InferAnswer) &&>;
  void RunInfer(serving::CallPtr call, const inference::ModelInferRequest& request, InferDone done);

  serving::ServiceCore* core() const { return core_; }
  const pipeline::RequestPipeline* pipeline() const { return pipeline_; }

 private:
  serving::ServiceCore* const core_;
  const pipeline::RequestPipeline* const pipeline_;
  const GrpcServerOptions options_;
};

}  // namespace tide::grpc_edge
