#include "server/grpc/kserve_service.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/error.h"
#include "common/error_echo.h"
#include "server/grpc/grpc_status.h"
#include "server/grpc/kserve_proto.h"

namespace tide::grpc_edge {

namespace {

// A unary RPC answered at once on the gRPC thread (health, metadata, repository). The access the
// table gives `rpc` is checked first: `refused` when the answer was already sent.
struct Immediate {
  UnaryReactor* reactor;
  UnaryAnswer answer;
  bool refused = false;
};
Immediate NewImmediate(grpc::CallbackServerContext* context, serving::ServiceCore* core,
                       const pipeline::RequestPipeline* pipeline, const char* endpoint, std::string_view rpc) {
  auto* reactor = new UnaryReactor();
  Immediate r{reactor, UnaryAnswer(context, reactor, &pipeline->recorder(), endpoint, Steady::now())};
  if (absl::Status s = CheckAccess(*core, *context, rpc); !s.ok()) {
    r.answer.FinishError(s);
    r.refused = true;
  }
  return r;
}

constexpr char kRpcPrefix[] = "/inference.GRPCInferenceService/";

// The model the request names (set on `answer` for the metrics).
absl::StatusOr<std::shared_ptr<serving::ServedModel>> NamedModel(const pipeline::RequestPipeline& pipeline,
                                                                 std::string_view name, std::string_view version,
                                                                 UnaryAnswer* answer) {
  auto model = pipeline.Model(name, version);
  if (!model.ok()) return model.status();
  answer->set_model((*model)->name(), (*model)->version());
  return model;
}

void StatToProto(const api::DurationStat& d, inference::StatisticDuration* out) {
  out->set_count(d.count);
  out->set_ns(d.ns);
}

void StatisticsToProto(const api::ModelStatistics& s, inference::ModelStatistics* out) {
  out->set_name(s.name);
  out->set_version(s.version);
  out->set_last_inference(static_cast<uint64_t>(std::max<int64_t>(s.last_inference_ms, 0)));
  out->set_inference_count(s.inference_count);
  out->set_execution_count(s.execution_count);
  inference::InferStatistics* is = out->mutable_inference_stats();
  StatToProto(s.success, is->mutable_success());
  StatToProto(s.fail, is->mutable_fail());
  StatToProto(s.queue, is->mutable_queue());
  StatToProto(s.compute_infer, is->mutable_compute_infer());
  is->mutable_compute_input();
  is->mutable_compute_output();
  for (const api::BatchStat& b : s.batch_stats) {
    inference::InferBatchStatistics* bs = out->add_batch_stats();
    bs->set_batch_size(b.batch_size);
    StatToProto(b.compute_infer, bs->mutable_compute_infer());
    bs->mutable_compute_input();
    bs->mutable_compute_output();
  }
}

// ModelStreamInfer: every message is one admitted call; answers are written in request order, one
// write at a time (gRPC allows one outstanding write per stream).
class StreamInferReactor final
    : public grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse> {
 public:
  StreamInferReactor(KServeService* service, grpc::CallbackServerContext* context)
      : service_(service),
        context_(context),
        client_gone_(std::make_shared<CancellationFlag>()),
        trace_(StartStreamTrace(*context, &service->pipeline()->recorder(), "stream_infer", Steady::now())) {
    StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      {
        absl::MutexLock lock(&mu_);
        reads_done_ = true;
      }
      return Pump();
    }
    auto request = std::make_shared<inference::ModelInferRequest>(std::move(incoming_));
    incoming_.Clear();
    uint64_t seq;
    bool read_more;
    {
      absl::MutexLock lock(&mu_);
      seq = next_seq_++;
      ++pending_;
      read_more = pending_ < kMaxStreamPending;
      read_paused_ = !read_more;
    }
    Start(seq, std::move(request));
    if (read_more) StartRead(&incoming_);
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      write_in_flight_ = false;
      if (!ok) broken_ = true;
    }
    Pump();
  }

  void OnCancel() override { client_gone_->Cancel(); }
  void OnDone() override { delete this; }

 private:
  void Start(uint64_t seq, std::shared_ptr<inference::ModelInferRequest> request) {
    const Steady::time_point received = Steady::now();
    // Each message is a request of its own in the stream's trace (tide.stream.message).
    auto trace = std::make_shared<pipeline::RequestTrace>(trace_.StartMessage(received, static_cast<int64_t>(seq)));
    auto info = CallInfoFor(*context_, request->ByteSizeLong(), received, client_gone_);
    if (!info.ok()) return Answer(seq, *request, received, Failed(info.status()), trace.get());
    info->model = request->model_name();
    info->model_version = request->model_version();
    trace->Annotate(&*info);
    service_->core()->Start(*info, [this, seq, request, received, trace](absl::StatusOr<serving::CallPtr> call) mutable {
      if (!call.ok()) return Answer(seq, *request, received, Failed(call.status()), trace.get());
      trace->MarkAdmitted();
      service_->RunInfer(*call, *request,
                         [this, seq, request, received, trace, c = *call](KServeService::InferAnswer answer) mutable {
                           c->ReleasePermit();
                           Answer(seq, *request, received, std::move(answer), trace.get(), c.get());
                         });
    });
  }

  static KServeService::InferAnswer Failed(absl::Status status) {
    KServeService::InferAnswer a;
    a.outcome.status = std::move(status);
    return a;
  }

  // Any thread: queue the answer of message `seq` and write what is next in order.
  // `trace`: the message's; `call`: the admitted call (null when refused), for the access log.
  void Answer(uint64_t seq, const inference::ModelInferRequest& request, Steady::time_point received,
              KServeService::InferAnswer answer, pipeline::RequestTrace* trace, const serving::Call* call = nullptr) {
    // One record per message; in the access log the stream's x-request-id metadata, suffixed with
    // the message's id when it has one.
    const pipeline::CompletionRecorder& recorder = service_->pipeline()->recorder();
    std::string id;
    if (recorder.logs()) {
      id = RequestIdOf(*context_);
      if (!request.id().empty()) absl::StrAppend(&id, "/", request.id().substr(0, 128));
    }
    pipeline::Completion c;
    c.protocol = "grpc";
    c.endpoint = "stream_infer";
    c.received_at = received;
    c.outcome = &answer.outcome;
    c.call = call;
    c.timings = answer.outcome.Complete(received);
    c.request_id = id;
    c.trace = trace;
    recorder.Record(c);
    inference::ModelStreamInferResponse out;
    if (answer.outcome.status.ok()) {
      *out.mutable_infer_response() = std::move(answer.response);
    } else {
      out.set_error_message(std::string(answer.outcome.status.message()));
      out.mutable_infer_response()->set_id(request.id());
      out.mutable_infer_response()->set_model_name(request.model_name());
    }
    {
      absl::MutexLock lock(&mu_);
      --pending_;
      if (!broken_) ready_.emplace(seq, std::move(out));
    }
    Pump();
  }

  // Starts the next write, resumes reading, or finishes, as the state allows.
  void Pump() {
    enum { kNothing, kWrite, kFinish } action = kNothing;
    bool resume_read = false;
    uint64_t messages = 0;
    {
      absl::MutexLock lock(&mu_);
      if (broken_) ready_.clear();
      if (!write_in_flight_ && !finished_) {
        auto it = ready_.find(next_write_);
        if (it != ready_.end()) {
          writing_ = std::move(it->second);
          ready_.erase(it);
          ++next_write_;
          write_in_flight_ = true;
          action = kWrite;
        } else if (reads_done_ && pending_ == 0 && ready_.empty()) {
          finished_ = true;
          action = kFinish;
          messages = next_seq_;
        }
      }
      if (read_paused_ && !reads_done_ && pending_ < kMaxStreamPending && !finished_) {
        read_paused_ = false;
        resume_read = true;
      }
    }
    if (action == kWrite) StartWrite(&writing_);
    if (action == kFinish) {
      // Every message was answered: nothing else touches the stream's span now.
      FinishStreamTrace(&trace_, context_, grpc::Status::OK, static_cast<int64_t>(messages));
      Finish(grpc::Status::OK);
    }
    if (resume_read) StartRead(&incoming_);
  }

  KServeService* const service_;
  grpc::CallbackServerContext* const context_;
  const std::shared_ptr<CancellationFlag> client_gone_;
  inference::ModelInferRequest incoming_;      // the read in progress (one at a time)
  inference::ModelStreamInferResponse writing_;  // the write in progress (one at a time)
  absl::Mutex mu_;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_write_ ABSL_GUARDED_BY(mu_) = 0;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // started, not yet answered
  std::map<uint64_t, inference::ModelStreamInferResponse> ready_ ABSL_GUARDED_BY(mu_);
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;  // a write failed: the client is gone
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  pipeline::RequestTrace trace_;  // the stream's SERVER span (inactive with tracing off)
};

}  // namespace

// ---- health and metadata ------------------------------------------------------------------------

grpc::ServerUnaryReactor* KServeService::ServerLive(grpc::CallbackServerContext* context,
                                                    const inference::ServerLiveRequest*,
                                                    inference::ServerLiveResponse* response) {
  Immediate r = NewImmediate(context, core_, pipeline_, "health_live", absl::StrCat(kRpcPrefix, "ServerLive"));
  if (r.refused) return r.reactor;
  response->set_live(true);
  r.answer.Finish();
  return r.reactor;
}

grpc::ServerUnaryReactor* KServeService::ServerReady(grpc::CallbackServerContext* context,
                                                     const inference::ServerReadyRequest*,
                                                     inference::ServerReadyResponse* response) {
  Immediate r = NewImmediate(context, core_, pipeline_, "health_ready", absl::StrCat(kRpcPrefix, "ServerReady"));
  if (r.refused) return r.reactor;
  response->set_ready(core_->Ready());
  r.answer.Finish();
  return r.reactor;
}

grpc::ServerUnaryReactor* KServeService::ModelReady(grpc::CallbackServerContext* context,
                                                    const inference::ModelReadyRequest* request,
                                                    inference::ModelReadyResponse* response) {
  Immediate r = NewImmediate(context, core_, pipeline_, "model_ready", absl::StrCat(kRpcPrefix, "ModelReady"));
  if (r.refused) return r.reactor;
  auto model = pipeline_->Model(request->name(), request->version());
  if (!model.ok()) {
    r.answer.FinishError(model.status());
    return r.reactor;
  }
  r.answer.set_model((*model)->name(), (*model)->version());
  response->set_ready(core_->ModelReady(**model));
  r.answer.Finish();
  return r.reactor;
}

grpc::ServerUnaryReactor* KServeService::ServerMetadata(grpc::CallbackServerContext* context,
                                                        const inference::ServerMetadataRequest*,
                                                        inference::ServerMetadataResponse* response) {
  Immediate r = NewImmediate(context, core_, pipeline_, "server_metadata", absl::StrCat(kRpcPrefix, "ServerMetadata"));
  if (r.refused) return r.reactor;
  response->set_name("tide");
  response->set_version(pipeline_->options().version);
  response->add_extensions("model_configuration");
  response->add_extensions("statistics");
  r.answer.Finish();
  return r.reactor;
}

grpc::ServerUnaryReactor* KServeService::ModelMetadata(grpc::CallbackServerContext* context,
                                                       const inference::ModelMetadataRequest* request,
                                                       inference::ModelMetadataResponse* response) {
  Immediate r = NewImmediate(context, core_, pipeline_, "model_metadata", absl::StrCat(kRpcPrefix, "ModelMetadata"));
  if (r.refused) return r.reactor;
  auto model = NamedModel(*pipeline_, request->name(), request->version(), &r.answer);
  if (!model.ok()) {
    r.answer.FinishError(model.status());
    return r.reactor;
  }
  const api::ModelMetadata md = pipeline_->Metadata(**model);
  response->set_name(md.name);
  for (const std::string& v : md.versions) response->add_versions(v);
  response->set_platform(md.platform);
  auto add = [](const api::TensorMetadata& t, inference::ModelMetadataResponse::TensorMetadata* out) {
    out->set_name(t.name);
    out->set_datatype(std::string(api::DataTypeName(t.datatype)));
    for (int64_t d : t.shape) out->add_shape(d);
  };
  for (const api::TensorMetadata& t : md.inputs) add(t, response->add_inputs());
  for (const api::TensorMetadata& t : md.outputs) add(t, response->add_outputs());
  r.answer.Finish();
  return r.reactor;
}

grpc::ServerUnaryReactor* KServeService::ModelConfig(grpc::CallbackServerContext* context,
                                                     const inference::ModelConfigRequest* request,
                                                     inference::ModelConfigResponse* response) {
  Immediate r = NewImmediate(context, core_, pipeline_, "model_config", absl::StrCat(kRpcPrefix, "ModelConfig"));
  if (r.refused) return r.reactor;
  auto model = NamedModel(*pipeline_, request->name(), request->version(), &r.answer);
  if (!model.ok()) {
    r.answer.FinishError(model.status());
    return r.reactor;
  }
  *response->mutable_config() = (*model)->config();
  r.answer.Finish();
  return r.reactor;
}

grpc::ServerUnaryReactor* KServeService::ModelStatistics(grpc::CallbackServerContext* context,
                                                         const inference::ModelStatisticsRequest* request,
                                                         inference::ModelStatisticsResponse* response) {
  Immediate r = NewImmediate(context, core_, pipeline_, "model_stats", absl::StrCat(kRpcPrefix, "ModelStatistics"));
  if (r.refused) return r.reactor;
  std::vector<std::shared_ptr<serving::ServedModel>> models;
  if (!request->version().empty()) {
    auto model = pipeline_->Model(request->name(), request->version());
    if (!model.ok()) {
      r.answer.FinishError(model.status());
      return r.reactor;
    }
    models.push_back(*model);
  } else {
    for (auto& m : pipeline_->AllModels()) {
      if (request->name().empty() || m->name() == request->name()) models.push_back(m);
    }
    if (models.empty()) {
      r.answer.FinishError(errors::NotFound(absl::StrCat("unknown model '", EchoForError(request->name()), "'")));
      return r.reactor;
    }
  }
  for (const auto& m : models) StatisticsToProto(m->Statistics(), response->add_model_stats());
  r.answer.Finish();
  return r.reactor;
}

grpc::ServerUnaryReactor* KServeService::RepositoryIndex(grpc::CallbackServerContext* context,
                                                         const inference::RepositoryIndexRequest* request,
                                                         inference::RepositoryIndexResponse* response) {
  Immediate r = NewImmediate(context, core_, pipeline_, "repository_index", absl::StrCat(kRpcPrefix, "RepositoryIndex"));
  if (r.refused) return r.reactor;
  if (options_.repository != nullptr) {
    // The controller's state table: READY / LOADING / UNLOADING / UNAVAILABLE with reasons.
    for (const serving::ModelStateEntry& e : options_.repository->Index(request->ready())) {
      inference::RepositoryIndexResponse::ModelIndex* index = response->add_models();
      index->set_name(e.name);
      index->set_version(e.version.has_value() ? std::to_string(*e.version) : "");
      index->set_state(std::string(serving::ModelStateName(e.state)));
      index->set_reason(e.reason);
    }
    r.answer.Finish();
    return r.reactor;
  }
  for (const auto& m : pipeline_->AllModels()) {
    const bool ready = core_->ModelReady(*m);
    if (request->ready() && !ready) continue;
    inference::RepositoryIndexResponse::ModelIndex* index = response->add_models();
    index->set_name(m->name());
    index->set_version(std::to_string(m->version()));
    index->set_state(ready ? "READY" : "UNAVAILABLE");
    if (!ready) index->set_reason(core_->draining() ? "draining" : "shut down");
  }
  r.answer.Finish();
  return r.reactor;
}

grpc::ServerUnaryReactor* KServeService::RepositoryModelLoad(grpc::CallbackServerContext* context,
                                                             const inference::RepositoryModelLoadRequest* request,
                                                             inference::RepositoryModelLoadResponse*) {
  Immediate r = NewImmediate(context, core_, pipeline_, "repository_load", absl::StrCat(kRpcPrefix, "RepositoryModelLoad"));
  if (r.refused) return r.reactor;
  if (options_.repository == nullptr) {
    r.answer.FinishError(errors::Unimplemented("RepositoryModelLoad: this server has no model repository controller"));
    return r.reactor;
  }
  // Triton's "config" parameter: the model configuration as JSON, overriding config.pbtxt.
  std::optional<std::string> config_json;
  if (auto it = request->parameters().find("config"); it != request->parameters().end()) {
    if (!it->second.has_string_param()) {
      r.answer.FinishError(errors::InvalidInput("parameters.config must be a string (the model configuration as JSON)"));
      return r.reactor;
    }
    config_json = it->second.string_param();
  }
  // The load runs on the controller's thread; the answer is sent from there when it is done.
  options_.repository->LoadAsync(request->model_name(), std::move(config_json),
                                 [answer = std::move(r.answer)](absl::Status s) mutable {
                                   if (s.ok()) return answer.Finish();
                                   answer.FinishError(s);
                                 });
  return r.reactor;
}

grpc::ServerUnaryReactor* KServeService::RepositoryModelUnload(grpc::CallbackServerContext* context,
                                                               const inference::RepositoryModelUnloadRequest* request,
                                                               inference::RepositoryModelUnloadResponse*) {
  Immediate r = NewImmediate(context, core_, pipeline_, "repository_unload", absl::StrCat(kRpcPrefix, "RepositoryModelUnload"));
  if (r.refused) return r.reactor;
  if (options_.repository == nullptr) {
    r.answer.FinishError(errors::Unimplemented("RepositoryModelUnload: this server has no model repository controller"));
    return r.reactor;
  }
  options_.repository->UnloadAsync(request->model_name(), [answer = std::move(r.answer)](absl::Status s) mutable {
    if (s.ok()) return answer.Finish();
    answer.FinishError(s);
  });
  return r.reactor;
}

// ---- inference -------------------------------------------------------------------------------------

grpc::ServerUnaryReactor* KServeService::ModelInfer(grpc::CallbackServerContext* context,
                                                    const inference::ModelInferRequest* request,
                                                    inference::ModelInferResponse* response) {
  auto* reactor = new UnaryReactor();
  StartCall(
      core_, *context, request->ByteSizeLong(),
      UnaryAnswer(context, reactor, &pipeline_->recorder(), "infer", Steady::now()), reactor->client_gone(),
      [this, request, response](serving::CallPtr call, UnaryAnswer answer) {
        RunInfer(call, *request, [response, answer = std::move(answer)](InferAnswer result) mutable {
          if (result.outcome.status.ok()) response->Swap(&result.response);
          answer.Finish(std::move(result.outcome));
        });
      },
      request->model_name(), request->model_version());
  return reactor;
}

grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
KServeService::ModelStreamInfer(grpc::CallbackServerContext* context) {
  return new StreamInferReactor(this, context);
}

void KServeService::RunInfer(serving::CallPtr call, const inference::ModelInferRequest& request, InferDone done) {
  pipeline_->Infer(
      call, request.model_name(), request.model_version(),
      [&request](const api::RequestLimits& limits) { return InferRequestFromProto(request, limits); },
      [done = std::move(done)](pipeline::InferAnswer answer) mutable {
        InferAnswer a{.outcome = std::move(answer.outcome)};
        if (a.outcome.status.ok()) a.outcome.status = InferResponseToProto(answer.response, *answer.request, &a.response);
        std::move(done)(std::move(a));
      });
}

}  // namespace tide::grpc_edge
