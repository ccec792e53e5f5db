// tide::grpc_edge TEI services — text-embeddings-inference's tei.v1 Info, Rerank (Rerank,
// RerankStream) and Tokenize (Tokenize) over serving::ServiceCore, with gRPC's callback API.
//
// Contract:
//  - Every RPC decodes its message (tei_proto.h) and hands it to the request pipeline
//    (pipeline/request_pipeline.h), the HTTP edge's too, so both answer alike.
//  - Rerank is POST /rerank over gRPC: the same admission (ServiceCore::Start), request checks,
//    model (the default; a rollout's split), options (the model's truncation direction and long
//    documents when the request names none), breaker fallback and timings; ranks come highest first. TEI's
//    Metadata carries the stage times in nanoseconds and compute_tokens; the timing trailers are
//    sent as well. A degraded answer (a fallback's) carries `x-tide-degraded` trailing metadata
//    and zero times.
//  - RerankStream collects the stream's texts (the first message's query and options), then runs
//    one rerank call admitted when the client half-closes; an invalid message ends the RPC with
//    its error at once.
//  - Tokenize encodes one input with the default model's tokenizer as POST /tokenize does: each
//    token's id, special flag, and its text and byte offsets (start, stop) in the input where they
//    align; Decode turns ids back into text (POST /decode). Each is admitted as a call (API key,
//    limits).
//  - Predict / PredictPair classify one input / one pair as POST /predict does (every label,
//    highest first; softmax, sigmoid for one label, logits with raw_scores; breaker fallback
//    flagged with `x-tide-degraded`), with TEI's Metadata and the timing trailers.
//  - The streams (TokenizeStream, DecodeStream, PredictStream, PredictPairStream) answer one
//    message at a time, in order; each message is a call of its own (admission, the stream's
//    deadline and cancellation); an error answer ends the stream with its status, as in TEI.
//  - Embed / EmbedStream embed one input per message as POST /embed does (RequestPipeline::Embed:
//    an embedding model, normalize, prompt_name, dimensions; truncate as sent), the vector in
//    `embeddings`, TEI's Metadata and the timing trailers; a model that is not an embedding model
//    is the 422 kind's INVALID_ARGUMENT "... is not an embedding model" (TEI answers
//    FAILED_PRECONDITION, a code tide's error table has no row for). EmbedAll / EmbedAllStream
//    answer one input's token states as POST /embed_all does (RequestPipeline::EmbedAll), one
//    TokenEmbedding per token, with TEI's Metadata; a model without them is FAILED_PRECONDITION
//    (kModelUnsupported). EmbedSparse and its stream: UNIMPLEMENTED (tide's embedding models pool
//    in the graph).
//  - Info describes the default model with GET /info's answer (RequestPipeline::Info): model_id
//    its name, model_type RERANKER (CLASSIFIER for a task "classify" model), max_input_length its
//    max_sequence_length, max_batch_tokens and max_batch_requests its own, max_client_batch_size
//    --max-documents.
//  - Thread-safe; the core must outlive the services.
#pragma once

#include "pipeline/request_pipeline.h"
#include "server/grpc/grpc_options.h"
#include "serving/service_core.h"
#include "tei.grpc.pb.h"

namespace tide::grpc_edge {

class TeiInfoService final : public tei::v1::Info::CallbackService {
 public:
  TeiInfoService(serving::ServiceCore* core, const pipeline::RequestPipeline* pipeline, const GrpcServerOptions& options)
      : core_(core), pipeline_(pipeline), options_(options) {}
  grpc::ServerUnaryReactor* Info(grpc::CallbackServerContext* context, const tei::v1::InfoRequest* request,
                                 tei::v1::InfoResponse* response) override;

 private:
  serving::ServiceCore* const core_;
  const pipeline::RequestPipeline* const pipeline_;
  const GrpcServerOptions options_;
};

class TeiRerankService final : public tei::v1::Rerank::CallbackService {
 public:
  TeiRerankService(serving::ServiceCore* core, const pipeline::RequestPipeline* pipeline, const GrpcServerOptions& options)
      : core_(core), pipeline_(pipeline), options_(options) {}
  grpc::ServerUnaryReactor* Rerank(grpc::CallbackServerContext* context, const tei::v1::RerankRequest* request,
                                   tei::v1::RerankResponse* response) override;
  grpc::ServerReadReactor<tei::v1::RerankStreamRequest>* RerankStream(grpc::CallbackServerContext* context,
                                                                       tei::v1::RerankResponse* response) override;

  const GrpcServerOptions& options() const { return options_; }
  serving::ServiceCore* core() const { return core_; }
  const pipeline::RequestPipeline* pipeline() const { return pipeline_; }

 private:
  serving::ServiceCore* const core_;
  const pipeline::RequestPipeline* const pipeline_;
  const GrpcServerOptions options_;
};

class TeiTokenizeService final : public tei::v1::Tokenize::CallbackService {
 public:
  TeiTokenizeService(serving::ServiceCore* core, const pipeline::RequestPipeline* pipeline, const GrpcServerOptions& options)
      : core_(core), pipeline_(pipeline), options_(options) {}
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context, const tei::v1::EncodeRequest* request,
                                     tei::v1::EncodeResponse* response) override;
  grpc::ServerBidiReactor<tei::v1::EncodeRequest, tei::v1::EncodeResponse>* TokenizeStream(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* Decode(grpc::CallbackServerContext* context, const tei::v1::DecodeRequest* request,
                                   tei::v1::DecodeResponse* response) override;
  grpc::ServerBidiReactor<tei::v1::DecodeRequest, tei::v1::DecodeResponse>* DecodeStream(
      grpc::CallbackServerContext* context) override;

 private:
  serving::ServiceCore* const core_;
  const pipeline::RequestPipeline* const pipeline_;
  const GrpcServerOptions options_;
};

class TeiPredictService final : public tei::v1::Predict::CallbackService {
 public:
  TeiPredictService(serving::ServiceCore* core, const pipeline::RequestPipeline* pipeline, const GrpcServerOptions& options)
      : core_(core), pipeline_(pipeline), options_(options) {}
  grpc::ServerUnaryReactor* Predict(grpc::CallbackServerContext* context, const tei::v1::PredictRequest* request,
                                    tei::v1::PredictResponse* response) override;
  grpc::ServerUnaryReactor* PredictPair(grpc::CallbackServerContext* context,
                                        const tei::v1::PredictPairRequest* request,
                                        tei::v1::PredictResponse* response) override;
  grpc::ServerBidiReactor<tei::v1::PredictRequest, tei::v1::PredictResponse>* PredictStream(
      grpc::CallbackServerContext* context) override;
  grpc::ServerBidiReactor<tei::v1::PredictPairRequest, tei::v1::PredictResponse>* PredictPairStream(
      grpc::CallbackServerContext* context) override;

 private:
  serving::ServiceCore* const core_;
  const pipeline::RequestPipeline* const pipeline_;
  const GrpcServerOptions options_;
};

class TeiEmbedService final : public tei::v1::Embed::CallbackService {
 public:
  TeiEmbedService(serving::ServiceCore* core, const pipeline::RequestPipeline* pipeline)
      : core_(core), pipeline_(pipeline) {}
  grpc::ServerUnaryReactor* Embed(grpc::CallbackServerContext* context, const tei::v1::EmbedRequest* request,
                                  tei::v1::EmbedResponse* response) override;
  grpc::ServerBidiReactor<tei::v1::EmbedRequest, tei::v1::EmbedResponse>* EmbedStream(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* EmbedSparse(grpc::CallbackServerContext* context,
                                        const tei::v1::EmbedSparseRequest* request,
                                        tei::v1::EmbedSparseResponse* response) override;
  grpc::ServerBidiReactor<tei::v1::EmbedSparseRequest, tei::v1::EmbedSparseResponse>* EmbedSparseStream(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* EmbedAll(grpc::CallbackServerContext* context, const tei::v1::EmbedAllRequest* request,
                                     tei::v1::EmbedAllResponse* response) override;
  grpc::ServerBidiReactor<tei::v1::EmbedAllRequest, tei::v1::EmbedAllResponse>* EmbedAllStream(
      grpc::CallbackServerContext* context) override;

 private:
  serving::ServiceCore* const core_;
  const pipeline::RequestPipeline* const pipeline_;
};

}  // namespace tide::grpc_edge
