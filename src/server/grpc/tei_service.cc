#include "server/grpc/tei_service.h"

#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/error.h"
#include "server/grpc/grpc_call.h"
#include "server/grpc/tei_proto.h"
#include "serving/scoring.h"
#include "tokenizer/token_text.h"

namespace tide::grpc_edge {

namespace {

uint64_t Ns(serving::Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

// On a tokenization worker, with the admitted call: ranks `request` against the default model
// into `response` through the core's rerank path (breaker fallback included) and finishes.
void RankAdmitted(serving::ServiceCore* core, serving::CallPtr call, std::shared_ptr<const api::RerankRequest> request,
                  tei::v1::RerankResponse* response, UnaryAnswer answer) {
  auto model = core->FindModel(*call);  // the gray release's split, as on HTTP
  if (!model.ok()) return answer.FinishError(model.status());
  answer.set_model((*model)->name(), (*model)->version());
  const serving::PairOptions pair_options{
      request->truncate, request->truncation_direction.value_or((*model)->parameters().truncation_direction),
      std::nullopt};
  const std::vector<std::string_view> docs(request->texts.begin(), request->texts.end());
  core->Rerank(call, *model, request->query, docs, pair_options, request->raw_scores,
               [request, response, answer = std::move(answer)](absl::StatusOr<serving::RerankScores> scores) mutable {
                 if (!scores.ok()) return answer.FinishError(scores.status());
                 const Steady::time_point post = Steady::now();
                 RerankAccounting acc;
                 size_t chars = 0;
                 for (const std::string& t : request->texts) chars += request->query.size() + t.size();
                 acc.compute_chars = static_cast<uint32_t>(std::min<size_t>(chars, UINT32_MAX));
                 acc.compute_tokens = static_cast<uint32_t>(std::min<size_t>(scores->real_tokens, UINT32_MAX));
                 serving::StageTimings t = scores->timings;
                 if (scores->fallback == nullptr) {
                   acc.tokenization_time_ns = Ns(t.tokenize);
                   acc.queue_time_ns = Ns(t.queue);
                   acc.inference_time_ns = Ns(t.inference);
                 }
                 if (absl::Status s = RerankResponseToProto(*request, scores->scores, acc, response); !s.ok()) {
                   return answer.FinishError(s);
                 }
                 if (scores->fallback != nullptr) return answer.Finish(nullptr, scores->fallback);
                 t.postprocess = Steady::now() - post;
                 t.total = Steady::now() - answer.received_at();
                 response->mutable_metadata()->set_total_time_ns(Ns(t.total));
                 answer.Finish(&t);
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
        collector_(service->options().limits),
        answer_(context, [this](const grpc::Status& s) { Finish(s); }, &service->core()->metrics(),
                service->core()->access_log(), "rerank_stream",
                Steady::now()) {
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
    serving::ServiceCore* core = service_->core();
    StartCall(core, *context_, bytes_, std::move(answer_), client_gone_,
              [core, req, response = response_](serving::CallPtr call, UnaryAnswer answer) {
                RankAdmitted(core, std::move(call), req, response, std::move(answer));
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
  UnaryAnswer answer(context, reactor, &core_->metrics(), core_->access_log(), "info", Steady::now());
  if (absl::Status s = CheckAccess(*core_, *context, "/tei.v1.Info/Info"); !s.ok()) {
    answer.FinishError(s);
    return reactor;
  }
  auto model = core_->FindModel();
  if (!model.ok()) {
    answer.FinishError(model.status());
    return reactor;
  }
  const serving::ServedModel& m = **model;
  answer.set_model(m.name(), m.version());
  response->set_version(options_.version);
  response->set_model_id(m.name());
  response->set_model_dtype("float32");
  response->set_model_type(m.parameters().task == config::Task::kClassify ? tei::v1::MODEL_TYPE_CLASSIFIER
                                                                          : tei::v1::MODEL_TYPE_RERANKER);
  response->set_max_concurrent_requests(static_cast<uint32_t>(core_->options().max_concurrent_requests));
  response->set_max_input_length(static_cast<uint32_t>(m.max_sequence_length()));
  response->set_max_batch_tokens(static_cast<uint32_t>(options_.max_batch_tokens));
  response->set_max_client_batch_size(static_cast<uint32_t>(options_.limits.max_documents));
  const int workers = core_->options().tokenization_workers;
  response->set_tokenization_workers(
      static_cast<uint32_t>(workers > 0 ? workers : static_cast<int>(std::thread::hardware_concurrency())));
  answer.Finish();
  return reactor;
}

grpc::ServerUnaryReactor* TeiRerankService::Rerank(grpc::CallbackServerContext* context,
                                                   const tei::v1::RerankRequest* request,
                                                   tei::v1::RerankResponse* response) {
  auto* reactor = new UnaryReactor();
  // The message is checked on the tokenization worker, after admission, as HTTP parses there; the
  // conversion copies the texts so the request message is not needed after it.
  StartCall(core_, *context, request->ByteSizeLong(),
            UnaryAnswer(context, reactor, &core_->metrics(), core_->access_log(), "rerank", Steady::now()), reactor->client_gone(),
            [this, request, response](serving::CallPtr call, UnaryAnswer answer) {
              auto parsed = RerankRequestFromProto(*request, options_.limits);
              if (!parsed.ok()) return answer.FinishError(parsed.status());
              RankAdmitted(core_, std::move(call), std::make_shared<const api::RerankRequest>(*std::move(parsed)),
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

void TokenizeOne(serving::ServiceCore* core, const api::RequestLimits& limits, const grpc::CallbackServerContext& context,
                 const tei::v1::EncodeRequest* request, tei::v1::EncodeResponse* response, UnaryAnswer answer,
                 std::shared_ptr<CancellationFlag> client_gone) {
  StartCall(core, context, request->ByteSizeLong(), std::move(answer), std::move(client_gone),
        [core, limits, request, response](serving::CallPtr call, UnaryAnswer answer) {
          auto parsed = TokenizeRequestFromProto(*request, limits);
          if (!parsed.ok()) return answer.FinishError(parsed.status());
          auto model = core->FindModel();
          if (!model.ok()) return answer.FinishError(model.status());
          answer.set_model((*model)->name(), (*model)->version());
          const serving::TextInput input{parsed->inputs[0].text, std::nullopt};
          std::vector<tokenizer::Encoding> encodings;
          if (absl::Status s = core->Tokenize(*call, **model, {&input, 1}, parsed->add_special_tokens, &encodings);
              !s.ok()) {
            return answer.FinishError(s);
          }
          const tokenizer::Tokenizer& tok = (*model)->tokenizer();
          for (int64_t id : encodings[0].ids) {
            tei::v1::SimpleToken* token = response->add_tokens();
            token->set_id(static_cast<uint32_t>(id));
            token->set_text(tok.IdToToken(id).value_or(""));
            token->set_special(tok.IsSpecialToken(id));
          }
          answer.Finish();
        });
}

void DecodeOne(serving::ServiceCore* core, const api::RequestLimits& limits, const grpc::CallbackServerContext& context,
               const tei::v1::DecodeRequest* request, tei::v1::DecodeResponse* response, UnaryAnswer answer,
               std::shared_ptr<CancellationFlag> client_gone) {
  StartCall(core, context, request->ByteSizeLong(), std::move(answer), std::move(client_gone),
        [core, limits, request, response](serving::CallPtr, UnaryAnswer answer) {
          auto parsed = DecodeRequestFromProto(*request, limits);
          if (!parsed.ok()) return answer.FinishError(parsed.status());
          auto model = core->FindModel();
          if (!model.ok()) return answer.FinishError(model.status());
          answer.set_model((*model)->name(), (*model)->version());
          response->set_text(tokenizer::Decode((*model)->tokenizer(), parsed->ids[0], parsed->skip_special_tokens));
          answer.Finish();
        });
}

// POST /predict's work (server/routes/tei_routes.cc PredictWork) for one input or pair.
template <typename Proto>
void PredictOne(serving::ServiceCore* core, const api::RequestLimits& limits, const grpc::CallbackServerContext& context,
                const Proto* request, tei::v1::PredictResponse* response, UnaryAnswer answer,
                std::shared_ptr<CancellationFlag> client_gone) {
  StartCall(core, context, request->ByteSizeLong(), std::move(answer), std::move(client_gone),
        [core, limits, request, response](serving::CallPtr call, UnaryAnswer answer) {
          auto parsed = PredictRequestFromProto(*request, limits);
          if (!parsed.ok()) return answer.FinishError(parsed.status());
          auto model = core->FindModel();
          if (!model.ok()) return answer.FinishError(model.status());
          answer.set_model((*model)->name(), (*model)->version());
          const serving::TextInput input{parsed->inputs[0].text, parsed->inputs[0].text_pair};
          const Steady::time_point tokenize_start = Steady::now();
          std::vector<tokenizer::Encoding> rows;
          if (absl::Status s = core->Tokenize(*call, **model, {&input, 1}, /*add_special_tokens=*/true, &rows,
                                              parsed->truncation_direction.value_or(
                                                  (*model)->parameters().truncation_direction));
              !s.ok()) {
            return answer.FinishError(s);
          }
          if (!parsed->truncate.value_or(true) && rows[0].truncated()) {
            return answer.FinishError(errors::InvalidInput(
                absl::StrCat("inputs has ", rows[0].untruncated_length, " tokens; the model's limit is ",
                             (*model)->max_sequence_length(), " (send truncate: true to cut it)")));
          }
          const Steady::duration tokenize = Steady::now() - tokenize_start;
          const size_t chars = input.text.size() + (input.text_pair ? input.text_pair->size() : 0);
          const size_t tokens = rows[0].ids.size();
          auto req = std::make_shared<api::PredictRequest>(*std::move(parsed));
          core->Infer(call, *model, std::move(rows),
                      [req, response, tokenize, chars, tokens, m = *model,
                       answer = std::move(answer)](absl::StatusOr<serving::InferOutcome> outcome) mutable {
                        if (!outcome.ok()) return answer.FinishError(outcome.status());
                        const Steady::time_point post = Steady::now();
                        const serving::InferenceResult& result = outcome->result;
                        auto scored = api::PredictScores(1, req->raw_scores, result.logits,
                                                         m->LabelNames(result.num_labels));
                        if (!scored.ok()) return answer.FinishError(scored.status());
                        for (const api::LabelScore& ls : (*scored)[0]) {
                          tei::v1::Prediction* p = response->add_predictions();
                          p->set_score(ls.score);
                          p->set_label(ls.label);
                        }
                        RerankAccounting acc;
                        acc.compute_chars = static_cast<uint32_t>(std::min<size_t>(chars, UINT32_MAX));
                        acc.compute_tokens = static_cast<uint32_t>(std::min<size_t>(tokens, UINT32_MAX));
                        serving::StageTimings t = result.timings;
                        t.tokenize = tokenize;
                        if (outcome->fallback != nullptr) {
                          MetadataToProto(acc, response->mutable_metadata());
                          return answer.Finish(nullptr, outcome->fallback);
                        }
                        t.postprocess = Steady::now() - post;
                        t.total = Steady::now() - answer.received_at();
                        acc.tokenization_time_ns = Ns(t.tokenize);
                        acc.queue_time_ns = Ns(t.queue);
                        acc.inference_time_ns = Ns(t.inference);
                        acc.total_time_ns = Ns(t.total);
                        MetadataToProto(acc, response->mutable_metadata());
                        answer.Finish(&t);
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
  SequentialStream(grpc::CallbackServerContext* context, serving::ServingMetrics* metrics,
                   serving::AccessLog* access_log, const char* endpoint, Handler handle)
      : context_(context),
        metrics_(metrics),
        access_log_(access_log),
        endpoint_(endpoint),
        handle_(std::move(handle)),
        client_gone_(std::make_shared<CancellationFlag>()) {
    this->StartRead(&request_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      return this->Finish(client_gone_->IsCancelled() ? grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")
                                                      : grpc::Status::OK);
    }
    response_.Clear();
    UnaryAnswer answer(nullptr, [this](const grpc::Status& s) { Answered(s); }, metrics_, access_log_, endpoint_,
                       Steady::now());
    answer.set_request_id_source(context_);
    handle_(*context_, &request_, &response_, std::move(answer), client_gone_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) return this->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client left the stream"));
    request_.Clear();
    this->StartRead(&request_);
  }
  void OnCancel() override { client_gone_->Cancel(); }
  void OnDone() override { delete this; }

 private:
  void Answered(const grpc::Status& status) {
    if (!status.ok()) return this->Finish(status);
    this->StartWrite(&response_);
  }

  grpc::CallbackServerContext* const context_;
  serving::ServingMetrics* const metrics_;
  serving::AccessLog* const access_log_;
  const char* const endpoint_;
  const Handler handle_;
  const std::shared_ptr<CancellationFlag> client_gone_;
  Req request_;    // stable from a read until the answer is written
  Resp response_;
};

// Embed on a reranker / classifier: TEI's answer for a model that is not an embedding model.
absl::Status NotAnEmbeddingModel() {
  return errors::Unimplemented("Model is not an embedding model (tide serves rerankers and classifiers)");
}

template <typename Req, typename Resp>
grpc::ServerBidiReactor<Req, Resp>* RefusedStream(grpc::CallbackServerContext* context, serving::ServiceCore* core,
                                                  const char* endpoint, const char* rpc) {
  return new SequentialStream<Req, Resp>(
      context, &core->metrics(), core->access_log(), endpoint,
      [core, rpc](const grpc::CallbackServerContext& c, const Req*, Resp*, UnaryAnswer answer,
                  std::shared_ptr<CancellationFlag>) {
        absl::Status s = CheckAccess(*core, c, rpc);
        answer.FinishError(s.ok() ? NotAnEmbeddingModel() : s);
      });
}

grpc::ServerUnaryReactor* RefusedUnary(grpc::CallbackServerContext* context, serving::ServiceCore* core,
                                       const char* endpoint, const char* rpc) {
  auto* reactor = new UnaryReactor();
  absl::Status s = CheckAccess(*core, *context, rpc);
  UnaryAnswer(context, reactor, &core->metrics(), core->access_log(), endpoint, Steady::now())
      .FinishError(s.ok() ? NotAnEmbeddingModel() : s);
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* TeiTokenizeService::Tokenize(grpc::CallbackServerContext* context,
                                                       const tei::v1::EncodeRequest* request,
                                                       tei::v1::EncodeResponse* response) {
  auto* reactor = new UnaryReactor();
  TokenizeOne(core_, options_.limits, *context, request, response,
              UnaryAnswer(context, reactor, &core_->metrics(), core_->access_log(), "tokenize", Steady::now()), reactor->client_gone());
  return reactor;
}

grpc::ServerBidiReactor<tei::v1::EncodeRequest, tei::v1::EncodeResponse>* TeiTokenizeService::TokenizeStream(
    grpc::CallbackServerContext* context) {
  return new SequentialStream<tei::v1::EncodeRequest, tei::v1::EncodeResponse>(
      context, &core_->metrics(), core_->access_log(), "tokenize_stream",
      [this](const grpc::CallbackServerContext& c, const tei::v1::EncodeRequest* req, tei::v1::EncodeResponse* resp,
             UnaryAnswer answer, std::shared_ptr<CancellationFlag> gone) {
        TokenizeOne(core_, options_.limits, c, req, resp, std::move(answer), std::move(gone));
      });
}

grpc::ServerUnaryReactor* TeiTokenizeService::Decode(grpc::CallbackServerContext* context,
                                                     const tei::v1::DecodeRequest* request,
                                                     tei::v1::DecodeResponse* response) {
  auto* reactor = new UnaryReactor();
  DecodeOne(core_, options_.limits, *context, request, response,
            UnaryAnswer(context, reactor, &core_->metrics(), core_->access_log(), "decode", Steady::now()), reactor->client_gone());
  return reactor;
}

grpc::ServerBidiReactor<tei::v1::DecodeRequest, tei::v1::DecodeResponse>* TeiTokenizeService::DecodeStream(
    grpc::CallbackServerContext* context) {
  return new SequentialStream<tei::v1::DecodeRequest, tei::v1::DecodeResponse>(
      context, &core_->metrics(), core_->access_log(), "decode_stream",
      [this](const grpc::CallbackServerContext& c, const tei::v1::DecodeRequest* req, tei::v1::DecodeResponse* resp,
             UnaryAnswer answer, std::shared_ptr<CancellationFlag> gone) {
        DecodeOne(core_, options_.limits, c, req, resp, std::move(answer), std::move(gone));
      });
}

grpc::ServerUnaryReactor* TeiPredictService::Predict(grpc::CallbackServerContext* context,
                                                     const tei::v1::PredictRequest* request,
                                                     tei::v1::PredictResponse* response) {
  auto* reactor = new UnaryReactor();
  PredictOne(core_, options_.limits, *context, request, response,
             UnaryAnswer(context, reactor, &core_->metrics(), core_->access_log(), "predict", Steady::now()), reactor->client_gone());
  return reactor;
}

grpc::ServerUnaryReactor* TeiPredictService::PredictPair(grpc::CallbackServerContext* context,
                                                         const tei::v1::PredictPairRequest* request,
                                                         tei::v1::PredictResponse* response) {
  auto* reactor = new UnaryReactor();
  PredictOne(core_, options_.limits, *context, request, response,
             UnaryAnswer(context, reactor, &core_->metrics(), core_->access_log(), "predict_pair", Steady::now()), reactor->client_gone());
  return reactor;
}

grpc::ServerBidiReactor<tei::v1::PredictRequest, tei::v1::PredictResponse>* TeiPredictService::PredictStream(
    grpc::CallbackServerContext* context) {
  return new SequentialStream<tei::v1::PredictRequest, tei::v1::PredictResponse>(
      context, &core_->metrics(), core_->access_log(), "predict_stream",
      [this](const grpc::CallbackServerContext& c, const tei::v1::PredictRequest* req, tei::v1::PredictResponse* resp,
             UnaryAnswer answer, std::shared_ptr<CancellationFlag> gone) {
        PredictOne(core_, options_.limits, c, req, resp, std::move(answer), std::move(gone));
      });
}

grpc::ServerBidiReactor<tei::v1::PredictPairRequest, tei::v1::PredictResponse>* TeiPredictService::PredictPairStream(
    grpc::CallbackServerContext* context) {
  return new SequentialStream<tei::v1::PredictPairRequest, tei::v1::PredictResponse>(
      context, &core_->metrics(), core_->access_log(), "predict_pair_stream",
      [this](const grpc::CallbackServerContext& c, const tei::v1::PredictPairRequest* req,
             tei::v1::PredictResponse* resp, UnaryAnswer answer, std::shared_ptr<CancellationFlag> gone) {
        PredictOne(core_, options_.limits, c, req, resp, std::move(answer), std::move(gone));
      });
}

grpc::ServerUnaryReactor* TeiEmbedService::Embed(grpc::CallbackServerContext* context, const tei::v1::EmbedRequest*,
                                                 tei::v1::EmbedResponse*) {
  return RefusedUnary(context, core_, "embed", "/tei.v1.Embed/Embed");
}
grpc::ServerBidiReactor<tei::v1::EmbedRequest, tei::v1::EmbedResponse>* TeiEmbedService::EmbedStream(
    grpc::CallbackServerContext* context) {
  return RefusedStream<tei::v1::EmbedRequest, tei::v1::EmbedResponse>(context, core_, "embed_stream", "/tei.v1.Embed/EmbedStream");
}
grpc::ServerUnaryReactor* TeiEmbedService::EmbedSparse(grpc::CallbackServerContext* context,
                                                       const tei::v1::EmbedSparseRequest*,
                                                       tei::v1::EmbedSparseResponse*) {
  return RefusedUnary(context, core_, "embed_sparse", "/tei.v1.Embed/EmbedSparse");
}
grpc::ServerBidiReactor<tei::v1::EmbedSparseRequest, tei::v1::EmbedSparseResponse>*
TeiEmbedService::EmbedSparseStream(grpc::CallbackServerContext* context) {
  return RefusedStream<tei::v1::EmbedSparseRequest, tei::v1::EmbedSparseResponse>(context, core_, "embed_sparse_stream",
                                                                                   "/tei.v1.Embed/EmbedSparseStream");
}
grpc::ServerUnaryReactor* TeiEmbedService::EmbedAll(grpc::CallbackServerContext* context,
                                                    const tei::v1::EmbedAllRequest*, tei::v1::EmbedAllResponse*) {
  return RefusedUnary(context, core_, "embed_all", "/tei.v1.Embed/EmbedAll");
}
grpc::ServerBidiReactor<tei::v1::EmbedAllRequest, tei::v1::EmbedAllResponse>* TeiEmbedService::EmbedAllStream(
    grpc::CallbackServerContext* context) {
  return RefusedStream<tei::v1::EmbedAllRequest, tei::v1::EmbedAllResponse>(context, core_, "embed_all_stream", "/tei.v1.Embed/EmbedAllStream");
}

}  // namespace tide::grpc_edge
