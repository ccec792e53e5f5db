#include "server/grpc/tei_service.h"

#include <memory>
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/error.h"
#include "server/grpc/grpc_call.h"
#include "server/grpc/tei_proto.h"
#include "serving/scoring.h"

namespace tide::grpc_edge {

namespace {

uint64_t Ns(serving::Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

// TEI's Metadata of a predict or embed answer: characters and tokens computed, and the stage times
// when the answer has them (`timings` null: none).
void ComputeMetadata(size_t chars, size_t tokens, const serving::StageTimings* timings, tei::v1::Metadata* out) {
  RerankAccounting acc;
  acc.compute_chars = static_cast<uint32_t>(std::min<size_t>(chars, UINT32_MAX));
  acc.compute_tokens = static_cast<uint32_t>(std::min<size_t>(tokens, UINT32_MAX));
  if (timings != nullptr) {
    acc.tokenization_time_ns = Ns(timings->tokenize);
    acc.queue_time_ns = Ns(timings->queue);
    acc.inference_time_ns = Ns(timings->inference);
    acc.total_time_ns = Ns(timings->total);
  }
  MetadataToProto(acc, out);
}

// On a tokenization worker, with the admitted call: ranks `request` through the pipeline (the
// default model, a rollout's split, breaker fallback) into `response` and finishes.
void RankAdmitted(const pipeline::RequestPipeline* pipeline, serving::CallPtr call,
                  std::shared_ptr<const api::RerankRequest> request, tei::v1::RerankResponse* response,
                  UnaryAnswer answer) {
  pipeline->Rerank(call, request, [request, response, answer = std::move(answer)](pipeline::RerankAnswer a) mutable {
    if (!a.outcome.status.ok()) return answer.Finish(std::move(a.outcome));
    RerankAccounting acc;
    size_t chars = 0;
    for (const std::string& t : request->texts) chars += request->query.size() + t.size();
    acc.compute_chars = static_cast<uint32_t>(std::min<size_t>(chars, UINT32_MAX));
    acc.compute_tokens = static_cast<uint32_t>(std::min<size_t>(a.real_tokens, UINT32_MAX));
    if (a.outcome.fallback == nullptr && a.outcome.timings.has_value()) {
      acc.tokenization_time_ns = Ns(a.outcome.timings->tokenize);
      acc.queue_time_ns = Ns(a.outcome.timings->queue);
      acc.inference_time_ns = Ns(a.outcome.timings->inference);
    }
    if (absl::Status s = RerankResponseToProto(*request, a.scores, acc, response); !s.ok()) {
      a.outcome.status = s;
      return answer.Finish(std::move(a.outcome));
    }
    if (const serving::StageTimings* t = a.outcome.Complete(answer.received_at()); t != nullptr) {
      response->mutable_metadata()->set_total_time_ns(Ns(t->total));
    }
    answer.Finish(std::move(a.outcome));
  });
}

// RerankStream: reads every message into a collector, then runs one rerank call.
class RerankStreamReactor final : public grpc::ServerReadReactor<tei::v1::RerankStreamRequest> {
 public:
  RerankStreamReactor(TeiRerankService* service, grpc::CallbackServerContext* context,
                      tei::v1::RerankResponse* response)
      : service_(service),
        context_(context),
        response_(response),
        client_gone_(std::make_shared<CancellationFlag>()),
        collector_(service->pipeline()->options().limits),
        answer_(context, [this](const grpc::Status& s) { Finish(s); }, &service->pipeline()->recorder(),
                "rerank_stream", Steady::now()) {
    // The credential before any message is looked at (a refused caller learns nothing of the
    // validation); admission checks it again with the collected request.
    if (absl::Status s = CheckAccess(*service->core(), *context, "/tei.v1.Rerank/RerankStream"); !s.ok()) {
      answer_.FinishError(s);
      return;
    }
    StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    if (ok) {
      bytes_ += incoming_.ByteSizeLong();
      if (absl::Status s = collector_.Add(incoming_); !s.ok()) return answer_.FinishError(s);
      incoming_.Clear();
      return StartRead(&incoming_);
    }
    if (client_gone_->IsCancelled()) return answer_.FinishError(errors::Cancelled("the client cancelled the stream"));
    auto request = collector_.Finish();
    if (!request.ok()) return answer_.FinishError(request.status());
    auto req = std::make_shared<const api::RerankRequest>(*std::move(request));
    const pipeline::RequestPipeline* pipeline = service_->pipeline();
    StartCall(service_->core(), *context_, bytes_, std::move(answer_), client_gone_,
              [pipeline, req, response = response_](serving::CallPtr call, UnaryAnswer answer) {
                RankAdmitted(pipeline, std::move(call), req, response, std::move(answer));
              });
  }
  void OnCancel() override { client_gone_->Cancel(); }
  void OnDone() override { delete this; }

 private:
  TeiRerankService* const service_;
  grpc::CallbackServerContext* const context_;
  tei::v1::RerankResponse* const response_;
  const std::shared_ptr<CancellationFlag> client_gone_;
  RerankStreamCollector collector_;
  tei::v1::RerankStreamRequest incoming_;
  size_t bytes_ = 0;
  UnaryAnswer answer_;
};

}  // namespace

grpc::ServerUnaryReactor* TeiInfoService::Info(grpc::CallbackServerContext* context, const tei::v1::InfoRequest*,
                                               tei::v1::InfoResponse* response) {
  auto* reactor = new UnaryReactor();
  UnaryAnswer answer(context, reactor, &pipeline_->recorder(), "info", Steady::now());
  if (absl::Status s = CheckAccess(*core_, *context, "/tei.v1.Info/Info"); !s.ok()) {
    answer.FinishError(s);
    return reactor;
  }
  pipeline::InfoAnswer a = pipeline_->Info();
  if (a.outcome.status.ok()) InfoToProto(a.info, response);
  answer.Finish(std::move(a.outcome));
  return reactor;
}

grpc::ServerUnaryReactor* TeiRerankService::Rerank(grpc::CallbackServerContext* context,
                                                   const tei::v1::RerankRequest* request,
                                                   tei::v1::RerankResponse* response) {
  auto* reactor = new UnaryReactor();
  // The message is checked on the tokenization worker, after admission, as HTTP parses there; the
  // conversion copies the texts so the request message is not needed after it.
  StartCall(core_, *context, request->ByteSizeLong(),
            UnaryAnswer(context, reactor, &pipeline_->recorder(), "rerank", Steady::now()), reactor->client_gone(),
            [this, request, response](serving::CallPtr call, UnaryAnswer answer) {
              auto parsed = RerankRequestFromProto(*request, pipeline_->options().limits);
              if (!parsed.ok()) return answer.FinishError(parsed.status());
              RankAdmitted(pipeline_, std::move(call), std::make_shared<const api::RerankRequest>(*std::move(parsed)),
                           response, std::move(answer));
            });
  return reactor;
}

grpc::ServerReadReactor<tei::v1::RerankStreamRequest>* TeiRerankService::RerankStream(
    grpc::CallbackServerContext* context, tei::v1::RerankResponse* response) {
  return new RerankStreamReactor(this, context, response);
}

// ---- one-message handlers, shared by the unary RPCs and their streams --------------------------

namespace {

void TokenizeOne(serving::ServiceCore* core, const pipeline::RequestPipeline* pipeline,
                 const grpc::CallbackServerContext& context, const tei::v1::EncodeRequest* request,
                 tei::v1::EncodeResponse* response, UnaryAnswer answer, std::shared_ptr<CancellationFlag> client_gone) {
  StartCall(core, context, request->ByteSizeLong(), std::move(answer), std::move(client_gone),
            [pipeline, request, response](serving::CallPtr call, UnaryAnswer answer) {
              auto parsed = TokenizeRequestFromProto(*request, pipeline->options().limits);
              if (!parsed.ok()) return answer.FinishError(parsed.status());
              pipeline::TokenizeAnswer a = pipeline->Tokenize(*call, *parsed);
              if (a.outcome.status.ok()) TokensToProto(a.tokens.at(0), response);
              answer.Finish(std::move(a.outcome));
            });
}

void DecodeOne(serving::ServiceCore* core, const pipeline::RequestPipeline* pipeline,
               const grpc::CallbackServerContext& context, const tei::v1::DecodeRequest* request,
               tei::v1::DecodeResponse* response, UnaryAnswer answer, std::shared_ptr<CancellationFlag> client_gone) {
  StartCall(core, context, request->ByteSizeLong(), std::move(answer), std::move(client_gone),
            [pipeline, request, response](serving::CallPtr, UnaryAnswer answer) {
              auto parsed = DecodeRequestFromProto(*request, pipeline->options().limits);
              if (!parsed.ok()) return answer.FinishError(parsed.status());
              pipeline::DecodeAnswer a = pipeline->Decode(*parsed);
              if (a.outcome.status.ok()) response->set_text(a.texts.at(0));
              answer.Finish(std::move(a.outcome));
            });
}

// POST /predict's work for one input or pair.
template <typename Proto>
void PredictOne(serving::ServiceCore* core, const pipeline::RequestPipeline* pipeline,
                const grpc::CallbackServerContext& context, const Proto* request, tei::v1::PredictResponse* response,
                UnaryAnswer answer, std::shared_ptr<CancellationFlag> client_gone) {
  StartCall(core, context, request->ByteSizeLong(), std::move(answer), std::move(client_gone),
            [pipeline, request, response](serving::CallPtr call, UnaryAnswer answer) {
              auto parsed = PredictRequestFromProto(*request, pipeline->options().limits);
              if (!parsed.ok()) return answer.FinishError(parsed.status());
              const api::PredictInput& input = parsed->inputs[0];
              const size_t chars = input.text.size() + (input.text_pair ? input.text_pair->size() : 0);
              auto req = std::make_shared<const api::PredictRequest>(*std::move(parsed));
              pipeline->Predict(call, req, [req, response, chars, answer = std::move(answer)](pipeline::PredictAnswer a) mutable {
                if (!a.outcome.status.ok()) return answer.Finish(std::move(a.outcome));
                auto scored = api::PredictScores(1, req->raw_scores, a.logits, a.labels);
                if (!scored.ok()) {
                  a.outcome.status = scored.status();
                  return answer.Finish(std::move(a.outcome));
                }
                for (const api::LabelScore& ls : (*scored)[0]) {
                  tei::v1::Prediction* p = response->add_predictions();
                  p->set_score(ls.score);
                  p->set_label(ls.label);
                }
                ComputeMetadata(chars, a.tokens, a.outcome.Complete(answer.received_at()), response->mutable_metadata());
                answer.Finish(std::move(a.outcome));
              });
            });
}

// POST /embed's work for one input (tei.v1.Embed, EmbedStream).
void EmbedOne(serving::ServiceCore* core, const pipeline::RequestPipeline* pipeline,
              const grpc::CallbackServerContext& context, const tei::v1::EmbedRequest* request,
              tei::v1::EmbedResponse* response, UnaryAnswer answer, std::shared_ptr<CancellationFlag> client_gone) {
  StartCall(core, context, request->ByteSizeLong(), std::move(answer), std::move(client_gone),
            [pipeline, request, response](serving::CallPtr call, UnaryAnswer answer) {
              auto parsed = EmbedRequestFromProto(*request, pipeline->options().limits);
              if (!parsed.ok()) return answer.FinishError(parsed.status());
              const size_t chars = parsed->inputs[0].text.size();
              auto req = std::make_shared<const api::EmbedRequest>(*std::move(parsed));
              pipeline->Embed(call, req, [response, chars, answer = std::move(answer)](pipeline::EmbedAnswer a) mutable {
                if (!a.outcome.status.ok()) return answer.Finish(std::move(a.outcome));
                response->mutable_embeddings()->Add(a.vectors.begin(), a.vectors.end());
                ComputeMetadata(chars, a.tokens, a.outcome.Complete(answer.received_at()), response->mutable_metadata());
                answer.Finish(std::move(a.outcome));
              });
            });
}

// POST /embed_all's work for one input (tei.v1.Embed/EmbedAll, EmbedAllStream): one TokenEmbedding
// per token.
void EmbedAllOne(serving::ServiceCore* core, const pipeline::RequestPipeline* pipeline,
                 const grpc::CallbackServerContext& context, const tei::v1::EmbedAllRequest* request,
                 tei::v1::EmbedAllResponse* response, UnaryAnswer answer, std::shared_ptr<CancellationFlag> client_gone) {
  StartCall(core, context, request->ByteSizeLong(), std::move(answer), std::move(client_gone),
            [pipeline, request, response](serving::CallPtr call, UnaryAnswer answer) {
              auto parsed = EmbedAllRequestFromProto(*request, pipeline->options().limits);
              if (!parsed.ok()) return answer.FinishError(parsed.status());
              const size_t chars = parsed->inputs[0].text.size();
              auto req = std::make_shared<const api::EmbedRequest>(*std::move(parsed));
              pipeline->EmbedAll(call, req, [response, chars, answer = std::move(answer)](pipeline::EmbedAllAnswer a) mutable {
                if (!a.outcome.status.ok()) return answer.Finish(std::move(a.outcome));
                const std::vector<float>& states = a.states.at(0);
                for (size_t t = 0; t + a.hidden <= states.size(); t += a.hidden) {
                  response->add_token_embeddings()->mutable_embeddings()->Add(states.begin() + t,
                                                                              states.begin() + t + a.hidden);
                }
                ComputeMetadata(chars, a.tokens, a.outcome.Complete(answer.received_at()), response->mutable_metadata());
                answer.Finish(std::move(a.outcome));
              });
            });
}

// A bidirectional stream answered one message at a time, in order: each message is a call of its
// own (admission, the stream's deadline and cancellation) handled by `handle`; an error answer
// ends the stream with that error (as TEI's streams do); the client's half-close ends it OK.
template <typename Req, typename Resp>
class SequentialStream final : public grpc::ServerBidiReactor<Req, Resp> {
 public:
  using Handler = std::function<void(const grpc::CallbackServerContext&, const Req*, Resp*, UnaryAnswer,
                                     std::shared_ptr<CancellationFlag>)>;
  SequentialStream(grpc::CallbackServerContext* context, const pipeline::CompletionRecorder* recorder,
                   const char* endpoint, Handler handle)
      : context_(context),
        recorder_(recorder),
        endpoint_(endpoint),
        handle_(std::move(handle)),
        client_gone_(std::make_shared<CancellationFlag>()),
        trace_(StartStreamTrace(*context, recorder, endpoint, Steady::now())) {
    this->StartRead(&request_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      return Done(client_gone_->IsCancelled() ? grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")
                                              : grpc::Status::OK);
    }
    response_.Clear();
    UnaryAnswer answer(nullptr, [this](const grpc::Status& s) { Answered(s); }, recorder_, endpoint_, Steady::now());
    answer.set_request_id_source(context_);
    // Each message is a request of its own in the stream's trace (tide.stream.message).
    answer.set_trace(trace_.StartMessage(answer.received_at(), messages_++));
    handle_(*context_, &request_, &response_, std::move(answer), client_gone_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) return Done(grpc::Status(grpc::StatusCode::CANCELLED, "the client left the stream"));
    request_.Clear();
    this->StartRead(&request_);
  }
  void OnCancel() override { client_gone_->Cancel(); }
  void OnDone() override { delete this; }

 private:
  void Answered(const grpc::Status& status) {
    if (!status.ok()) return Done(status);
    this->StartWrite(&response_);
  }
  // The stream's end: its span, then the status (called once: every path above ends the stream).
  void Done(const grpc::Status& status) {
    FinishStreamTrace(&trace_, context_, status, messages_);
    this->Finish(status);
  }

  grpc::CallbackServerContext* const context_;
  const pipeline::CompletionRecorder* const recorder_;
  const char* const endpoint_;
  const Handler handle_;
  const std::shared_ptr<CancellationFlag> client_gone_;
  Req request_;    // stable from a read until the answer is written
  Resp response_;
  pipeline::RequestTrace trace_;  // the stream's SERVER span (inactive with tracing off)
  int64_t messages_ = 0;          // messages read (one at a time: no lock)
};

// The Embed RPCs tide does not serve (sparse embeddings: the export pools in the graph,
// docs/embeddings.md).
absl::Status NotAnEmbeddingModel() {
  return errors::Unimplemented("tide's embedding models pool in the graph: sparse embeddings (EmbedSparse) "
                               "are not served");
}

template <typename Req, typename Resp>
grpc::ServerBidiReactor<Req, Resp>* RefusedStream(grpc::CallbackServerContext* context, serving::ServiceCore* core,
                                                  const pipeline::RequestPipeline* pipeline, const char* endpoint,
                                                  const char* rpc) {
  return new SequentialStream<Req, Resp>(
      context, &pipeline->recorder(), endpoint,
      [core, rpc](const grpc::CallbackServerContext& c, const Req*, Resp*, UnaryAnswer answer,
                  std::shared_ptr<CancellationFlag>) {
        absl::Status s = CheckAccess(*core, c, rpc);
        answer.FinishError(s.ok() ? NotAnEmbeddingModel() : s);
      });
}

grpc::ServerUnaryReactor* RefusedUnary(grpc::CallbackServerContext* context, serving::ServiceCore* core,
                                       const pipeline::RequestPipeline* pipeline, const char* endpoint,
                                       const char* rpc) {
  auto* reactor = new UnaryReactor();
  absl::Status s = CheckAccess(*core, *context, rpc);
  UnaryAnswer(context, reactor, &pipeline->recorder(), endpoint, Steady::now())
      .FinishError(s.ok() ? NotAnEmbeddingModel() : s);
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* TeiTokenizeService::Tokenize(grpc::CallbackServerContext* context,
                                                       const tei::v1::EncodeRequest* request,
                                                       tei::v1::EncodeResponse* response) {
  auto* reactor = new UnaryReactor();
  TokenizeOne(core_, pipeline_, *context, request, response,
              UnaryAnswer(context, reactor, &pipeline_->recorder(), "tokenize", Steady::now()), reactor->client_gone());
  return reactor;
}

grpc::ServerBidiReactor<tei::v1::EncodeRequest, tei::v1::EncodeResponse>* TeiTokenizeService::TokenizeStream(
    grpc::CallbackServerContext* context) {
  return new SequentialStream<tei::v1::EncodeRequest, tei::v1::EncodeResponse>(
      context, &pipeline_->recorder(), "tokenize_stream",
      [this](const grpc::CallbackServerContext& c, const tei::v1::EncodeRequest* req, tei::v1::EncodeResponse* resp,
             UnaryAnswer answer, std::shared_ptr<CancellationFlag> gone) {
        TokenizeOne(core_, pipeline_, c, req, resp, std::move(answer), std::move(gone));
      });
}

grpc::ServerUnaryReactor* TeiTokenizeService::Decode(grpc::CallbackServerContext* context,
                                                     const tei::v1::DecodeRequest* request,
                                                     tei::v1::DecodeResponse* response) {
  auto* reactor = new UnaryReactor();
  DecodeOne(core_, pipeline_, *context, request, response,
            UnaryAnswer(context, reactor, &pipeline_->recorder(), "decode", Steady::now()), reactor->client_gone());
  return reactor;
}

grpc::ServerBidiReactor<tei::v1::DecodeRequest, tei::v1::DecodeResponse>* TeiTokenizeService::DecodeStream(
    grpc::CallbackServerContext* context) {
  return new SequentialStream<tei::v1::DecodeRequest, tei::v1::DecodeResponse>(
      context, &pipeline_->recorder(), "decode_stream",
      [this](const grpc::CallbackServerContext& c, const tei::v1::DecodeRequest* req, tei::v1::DecodeResponse* resp,
             UnaryAnswer answer, std::shared_ptr<CancellationFlag> gone) {
        DecodeOne(core_, pipeline_, c, req, resp, std::move(answer), std::move(gone));
      });
}

grpc::ServerUnaryReactor* TeiPredictService::Predict(grpc::CallbackServerContext* context,
                                                     const tei::v1::PredictRequest* request,
                                                     tei::v1::PredictResponse* response) {
  auto* reactor = new UnaryReactor();
  PredictOne(core_, pipeline_, *context, request, response,
             UnaryAnswer(context, reactor, &pipeline_->recorder(), "predict", Steady::now()), reactor->client_gone());
  return reactor;
}

grpc::ServerUnaryReactor* TeiPredictService::PredictPair(grpc::CallbackServerContext* context,
                                                         const tei::v1::PredictPairRequest* request,
                                                         tei::v1::PredictResponse* response) {
  auto* reactor = new UnaryReactor();
  PredictOne(core_, pipeline_, *context, request, response,
             UnaryAnswer(context, reactor, &pipeline_->recorder(), "predict_pair", Steady::now()), reactor->client_gone());
  return reactor;
}

grpc::ServerBidiReactor<tei::v1::PredictRequest, tei::v1::PredictResponse>* TeiPredictService::PredictStream(
    grpc::CallbackServerContext* context) {
  return new SequentialStream<tei::v1::PredictRequest, tei::v1::PredictResponse>(
      context, &pipeline_->recorder(), "predict_stream",
      [this](const grpc::CallbackServerContext& c, const tei::v1::PredictRequest* req, tei::v1::PredictResponse* resp,
             UnaryAnswer answer, std::shared_ptr<CancellationFlag> gone) {
        PredictOne(core_, pipeline_, c, req, resp, std::move(answer), std::move(gone));
      });
}

grpc::ServerBidiReactor<tei::v1::PredictPairRequest, tei::v1::PredictResponse>* TeiPredictService::PredictPairStream(
    grpc::CallbackServerContext* context) {
  return new SequentialStream<tei::v1::PredictPairRequest, tei::v1::PredictResponse>(
      context, &pipeline_->recorder(), "predict_pair_stream",
      [this](const grpc::CallbackServerContext& c, const tei::v1::PredictPairRequest* req,
             tei::v1::PredictResponse* resp, UnaryAnswer answer, std::shared_ptr<CancellationFlag> gone) {
        PredictOne(core_, pipeline_, c, req, resp, std::move(answer), std::move(gone));
      });
}

grpc::ServerUnaryReactor* TeiEmbedService::Embed(grpc::CallbackServerContext* context,
                                                 const tei::v1::EmbedRequest* request,
                                                 tei::v1::EmbedResponse* response) {
  auto* reactor = new UnaryReactor();
  EmbedOne(core_, pipeline_, *context, request, response,
           UnaryAnswer(context, reactor, &pipeline_->recorder(), "embed", Steady::now()), reactor->client_gone());
  return reactor;
}
grpc::ServerBidiReactor<tei::v1::EmbedRequest, tei::v1::EmbedResponse>* TeiEmbedService::EmbedStream(
    grpc::CallbackServerContext* context) {
  return new SequentialStream<tei::v1::EmbedRequest, tei::v1::EmbedResponse>(
      context, &pipeline_->recorder(), "embed_stream",
      [this](const grpc::CallbackServerContext& c, const tei::v1::EmbedRequest* req, tei::v1::EmbedResponse* resp,
             UnaryAnswer answer, std::shared_ptr<CancellationFlag> gone) {
        EmbedOne(core_, pipeline_, c, req, resp, std::move(answer), std::move(gone));
      });
}
grpc::ServerUnaryReactor* TeiEmbedService::EmbedSparse(grpc::CallbackServerContext* context,
                                                       const tei::v1::EmbedSparseRequest*,
                                                       tei::v1::EmbedSparseResponse*) {
  return RefusedUnary(context, core_, pipeline_, "embed_sparse", "/tei.v1.Embed/EmbedSparse");
}
grpc::ServerBidiReactor<tei::v1::EmbedSparseRequest, tei::v1::EmbedSparseResponse>*
TeiEmbedService::EmbedSparseStream(grpc::CallbackServerContext* context) {
  return RefusedStream<tei::v1::EmbedSparseRequest, tei::v1::EmbedSparseResponse>(context, core_, pipeline_, "embed_sparse_stream",
                                                                                   "/tei.v1.Embed/EmbedSparseStream");
}
grpc::ServerUnaryReactor* TeiEmbedService::EmbedAll(grpc::CallbackServerContext* context,
                                                    const tei::v1::EmbedAllRequest* request,
                                                    tei::v1::EmbedAllResponse* response) {
  auto* reactor = new UnaryReactor();
  EmbedAllOne(core_, pipeline_, *context, request, response,
              UnaryAnswer(context, reactor, &pipeline_->recorder(), "embed_all", Steady::now()), reactor->client_gone());
  return reactor;
}
grpc::ServerBidiReactor<tei::v1::EmbedAllRequest, tei::v1::EmbedAllResponse>* TeiEmbedService::EmbedAllStream(
    grpc::CallbackServerContext* context) {
  return new SequentialStream<tei::v1::EmbedAllRequest, tei::v1::EmbedAllResponse>(
      context, &pipeline_->recorder(), "embed_all_stream",
      [this](const grpc::CallbackServerContext& c, const tei::v1::EmbedAllRequest* req,
             tei::v1::EmbedAllResponse* resp, UnaryAnswer answer, std::shared_ptr<CancellationFlag> gone) {
        EmbedAllOne(core_, pipeline_, c, req, resp, std::move(answer), std::move(gone));
      });
}

}  // namespace tide::grpc_edge
