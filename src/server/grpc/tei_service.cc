#include "server/grpc/tei_service.h"

#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "common/error.h"
#include "server/grpc/grpc_call.h"
#include "server/grpc/tei_proto.h"
#include "serving/scoring.h"

namespace tide::grpc_edge {

namespace {

uint64_t Ns(serving::Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

// On a tokenization worker, with the admitted call: ranks `request` against the default model
// into `response` through the core's rerank path (breaker fallback included) and finishes.
void RankAdmitted(serving::ServiceCore* core, serving::CallPtr call, std::shared_ptr<const api::RerankRequest> request,
                  tei::v1::RerankResponse* response, UnaryAnswer answer) {
  answer.hold(call);
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
    auto info = CallInfoFor(*context_, bytes_, answer_.received_at(), client_gone_);
    if (!info.ok()) return answer_.FinishError(info.status());
    auto req = std::make_shared<const api::RerankRequest>(*std::move(request));
    serving::ServiceCore* core = service_->core();
    core->Start(*info, [core, req, response = response_, answer = std::move(answer_)](
                           absl::StatusOr<serving::CallPtr> call) mutable {
      if (!call.ok()) return answer.FinishError(call.status());
      RankAdmitted(core, *std::move(call), req, response, std::move(answer));
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
  UnaryAnswer answer(context, reactor, &core_->metrics(), core_->access_log(), "rerank", Steady::now());
  // The message is checked on the tokenization worker, after admission, as HTTP parses there; the
  // conversion copies the texts so the request message is not needed after it.
  auto info = CallInfoFor(*context, request->ByteSizeLong(), answer.received_at(), reactor->client_gone());
  if (!info.ok()) {
    answer.FinishError(info.status());
    return reactor;
  }
  core_->Start(*info, [this, request, response, answer = std::move(answer)](
                          absl::StatusOr<serving::CallPtr> call) mutable {
    if (!call.ok()) return answer.FinishError(call.status());
    auto parsed = RerankRequestFromProto(*request, options_.limits);
    if (!parsed.ok()) return answer.FinishError(parsed.status());
    RankAdmitted(core_, *std::move(call), std::make_shared<const api::RerankRequest>(*std::move(parsed)), response,
                 std::move(answer));
  });
  return reactor;
}

grpc::ServerReadReactor<tei::v1::RerankStreamRequest>* TeiRerankService::RerankStream(
    grpc::CallbackServerContext* context, tei::v1::RerankResponse* response) {
  return new RerankStreamReactor(this, context, response);
}

grpc::ServerUnaryReactor* TeiTokenizeService::Tokenize(grpc::CallbackServerContext* context,
                                                       const tei::v1::EncodeRequest* request,
                                                       tei::v1::EncodeResponse* response) {
  auto* reactor = new UnaryReactor();
  UnaryAnswer answer(context, reactor, &core_->metrics(), core_->access_log(), "tokenize", Steady::now());
  auto info = CallInfoFor(*context, request->ByteSizeLong(), answer.received_at(), reactor->client_gone());
  if (!info.ok()) {
    answer.FinishError(info.status());
    return reactor;
  }
  core_->Start(*info, [this, request, response, answer = std::move(answer)](
                          absl::StatusOr<serving::CallPtr> call) mutable {
    if (!call.ok()) return answer.FinishError(call.status());
    answer.hold(*call);
    auto parsed = TokenizeRequestFromProto(*request, options_.limits);
    if (!parsed.ok()) return answer.FinishError(parsed.status());
    auto model = core_->FindModel();
    if (!model.ok()) return answer.FinishError(model.status());
    answer.set_model((*model)->name(), (*model)->version());
    const serving::TextInput input{parsed->inputs[0].text, std::nullopt};
    std::vector<tokenizer::Encoding> encodings;
    if (absl::Status s = core_->Tokenize(**call, **model, {&input, 1}, parsed->add_special_tokens, &encodings);
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
  return reactor;
}

}  // namespace tide::grpc_edge
