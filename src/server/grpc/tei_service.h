// tide::grpc_edge TEI services — text-embeddings-inference's tei.v1 Info, Rerank (Rerank,
// RerankStream) and Tokenize (Tokenize) over serving::ServiceCore, with gRPC's callback API.
//
// Contract:
//  - Rerank is the HTTP edge's POST /rerank (server/routes/service.cc RerankWork) over gRPC: the
//    same admission (ServiceCore::Start), request checks (tei_proto.h), default model, rerank path
//    with breaker fallback (ServiceCore::Rerank) and timings; ranks come highest first. TEI's
//    Metadata carries the stage times in nanoseconds and compute_tokens; the timing trailers are
//    sent as well. A degraded answer (a fallback's) carries `x-tide-degraded` trailing metadata
//    and zero times.
//  - RerankStream collects the stream's texts (the first message's query and options), then runs
//    one rerank call admitted when the client half-closes; an invalid message ends the RPC with
//    its error at once.
//  - Tokenize encodes one input with the default model's tokenizer (ServiceCore::Tokenize);
//    TokenizeStream and TEI's embedding/classification services are not offered (UNIMPLEMENTED).
//  - Info describes the default model: model_id its name, model_type RERANKER (CLASSIFIER for a
//    task "classify" model), max_input_length its max_sequence_length, max_client_batch_size
//    --max-documents.
//  - Thread-safe; the core must outlive the services.
#pragma once

#include "server/grpc/grpc_options.h"
#include "serving/service_core.h"
#include "tei.grpc.pb.h"

namespace tide::grpc_edge {

class TeiInfoService final : public tei::v1::Info::CallbackService {
 public:
  TeiInfoService(serving::ServiceCore* core, const GrpcServerOptions& options) : core_(core), options_(options) {}
  grpc::ServerUnaryReactor* Info(grpc::CallbackServerContext* context, const tei::v1::InfoRequest* request,
                                 tei::v1::InfoResponse* response) override;

 private:
  serving::ServiceCore* const core_;
  const GrpcServerOptions options_;
};

class TeiRerankService final : public tei::v1::Rerank::CallbackService {
 public:
  TeiRerankService(serving::ServiceCore* core, const GrpcServerOptions& options) : core_(core), options_(options) {}
  grpc::ServerUnaryReactor* Rerank(grpc::CallbackServerContext* context, const tei::v1::RerankRequest* request,
                                   tei::v1::RerankResponse* response) override;
  grpc::ServerReadReactor<tei::v1::RerankStreamRequest>* RerankStream(grpc::CallbackServerContext* context,
                                                                       tei::v1::RerankResponse* response) override;

  const GrpcServerOptions& options() const { return options_; }
  serving::ServiceCore* core() const { return core_; }

 private:
  serving::ServiceCore* const core_;
  const GrpcServerOptions options_;
};

class TeiTokenizeService final : public tei::v1::Tokenize::CallbackService {
 public:
  TeiTokenizeService(serving::ServiceCore* core, const GrpcServerOptions& options) : core_(core), options_(options) {}
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context, const tei::v1::EncodeRequest* request,
                                     tei::v1::EncodeResponse* response) override;

 private:
  serving::ServiceCore* const core_;
  const GrpcServerOptions options_;
};

}  // namespace tide::grpc_edge
