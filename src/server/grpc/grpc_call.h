// tide::grpc_edge call plumbing — what every RPC of the gRPC edge shares: its CallInfo for the
// service core, the reactor that answers a unary RPC, and the one place that records an answer
// (metrics, trailing metadata) and finishes it.
//
// Contract:
//  - CallInfoFor reads the `authorization` metadata ("Bearer <key>"), the client's deadline (the
//    time left, at least 1 us, becomes CallInfo.timeout_us, so the core's one deadline rule applies:
//    it may only shorten --default-timeout-ms; an expired deadline is answered DEADLINE_EXCEEDED),
//    `x-priority` metadata (INVALID_ARGUMENT when not an integer), the message size (body_bytes),
//    the call's client-gone flag, and CallInfo.header over the metadata (a rollout's sticky_header
//    is read there, serving/rollout.h). The views it returns point into the context's metadata,
//    which lives as long as the call.
//  - UnaryReactor raises its client-gone flag when gRPC reports the call cancelled (the client
//    cancelled or left, or its deadline passed), so queued rows of the call are dropped unrun; it
//    deletes itself when gRPC is done with it.
//  - UnaryAnswer is move-only and finishes its reactor exactly once: Finish / FinishError hand the
//    request's domain outcome (pipeline/outcome.h) to the pipeline's CompletionRecorder (the
//    metrics with protocol "grpc" and the access-log record, as for HTTP), with the request id of
//    the `x-request-id` metadata (else a new one) also sent as an `x-request-id` trailer when there
//    is an access log; add `x-tide-model-version` and the timing trailers (x-tokenization-time,
//    x-queue-time, x-inference-time, x-total-time in whole ms, server-timing in fractional ms) or
//    `x-tide-degraded` or the error trailers (grpc_status.h); release the held call's concurrency
//    permit; then finish. With tracing on (CompletionRecorder::tracing) an answer with a context
//    starts the call's SERVER span from its `traceparent` / `tracestate` metadata when it is made,
//    the recorder ends it, and the trailers `traceparent` (the server span) and `x-trace-id` name
//    it. An answer destroyed unfinished finishes
//    INTERNAL (a bug, never silence). The answer to one message of a stream has no context (no
//    trailers): its record takes the request id of the stream's context (set_request_id_source)
//    and, with tracing on, its trace from the stream's (set_trace: RequestTrace::StartMessage).
//  - StartStreamTrace / FinishStreamTrace: a stream's SERVER span, from its context's
//    `traceparent` / `tracestate` metadata, ended with the stream's status and message count (the
//    `traceparent` and `x-trace-id` trailers name it); inactive with tracing off.
//  - StartCall is every inference RPC's opening: CallInfoFor, then ServiceCore::Start (admission);
//    on success `work(call, answer)` runs on a tokenization worker with the call held by the
//    answer; any failure finishes the answer with its error. `model` / `model_version` (views
//    that must outlive the call, e.g. into the request message) name the model before admission.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cancellation_flag.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "pipeline/completion_recorder.h"
#include "pipeline/outcome.h"
#include "serving/call.h"
#include "serving/inference_request.h"
#include "serving/service_core.h"

namespace tide::grpc_edge {

using Steady = std::chrono::steady_clock;

absl::StatusOr<serving::CallInfo> CallInfoFor(const grpc::CallbackServerContext& context, size_t message_bytes,
                                              Steady::time_point received_at,
                                              std::shared_ptr<CancellationFlag> client_gone);

// The timing trailers of an answer (the same values as the HTTP edge's timing headers).
void AddTimingTrailers(const serving::StageTimings& timings, grpc::CallbackServerContext* context);

// The request id of a call: its `x-request-id` metadata (first 128 bytes), else a new one.
std::string RequestIdOf(const grpc::CallbackServerContext& context);

class UnaryAnswer;

// A bidirectional stream's SERVER span, named by its RPC ("tei.v1.Predict/PredictStream" for the
// metrics' `endpoint` label "predict_stream").
pipeline::RequestTrace StartStreamTrace(const grpc::CallbackServerContext& context,
                                        const pipeline::CompletionRecorder* recorder, const char* endpoint,
                                        Steady::time_point received_at);
// Adds its trailers to `context` and ends it (before the stream's Finish(status)).
void FinishStreamTrace(pipeline::RequestTrace* trace, grpc::CallbackServerContext* context, const grpc::Status& status,
                       int64_t messages);

// Whether the call may go on: the access the one table gives the gRPC method `rpc` (its full name,
// server/access/access_table.h), decided by the core (guard::Authorize over the `authorization`
// metadata) as on HTTP. UNAUTHENTICATED / PERMISSION_DENIED, or INTERNAL for a method the table
// does not list. The inference RPCs' admission (StartCall -> ServiceCore::Start) makes the same
// tenant decision.
absl::Status CheckAccess(const serving::ServiceCore& core, const grpc::CallbackServerContext& context,
                         std::string_view rpc);

template <typename Work>
void StartCall(serving::ServiceCore* core, const grpc::CallbackServerContext& context, size_t message_bytes,
               UnaryAnswer answer, std::shared_ptr<CancellationFlag> client_gone, Work work,
               std::string_view model = {}, std::string_view model_version = {});

class UnaryReactor final : public grpc::ServerUnaryReactor {
 public:
  UnaryReactor() : client_gone_(std::make_shared<CancellationFlag>()) {}
  const std::shared_ptr<CancellationFlag>& client_gone() const { return client_gone_; }
  void OnCancel() override { client_gone_->Cancel(); }
  void OnDone() override { delete this; }

 private:
  std::shared_ptr<CancellationFlag> client_gone_;
};

// The answer of a unary RPC (or of a client-streaming one: anything finished once).
class UnaryAnswer {
 public:
  // `finish` finishes the RPC (the reactor's Finish); it is called exactly once. `context` may be
  // null: the answer to one message of a stream (recorded, no trailers).
  using FinishFn = absl::AnyInvocable<void(const grpc::Status&) &&>;
  // `recorder` may be null (nothing recorded).
  UnaryAnswer(grpc::CallbackServerContext* context, FinishFn finish, const pipeline::CompletionRecorder* recorder,
              const char* endpoint, Steady::time_point received_at)
      : context_(context),
        id_source_(context),
        finish_(std::move(finish)),
        recorder_(recorder),
        endpoint_(endpoint),
        received_at_(received_at) {
    StartTrace();
  }
  // For a UnaryReactor.
  UnaryAnswer(grpc::CallbackServerContext* context, UnaryReactor* reactor, const pipeline::CompletionRecorder* recorder,
              const char* endpoint, Steady::time_point received_at)
      : UnaryAnswer(context, [reactor](const grpc::Status& s) { reactor->Finish(s); }, recorder, endpoint,
                    received_at) {}
  UnaryAnswer(UnaryAnswer&& other) noexcept { *this = std::move(other); }
  UnaryAnswer& operator=(UnaryAnswer&& other) noexcept;
  ~UnaryAnswer();

  void set_model(std::string model, int64_t version) { outcome_.set_model(std::move(model), version); }
  void hold(serving::CallPtr call) { call_ = std::move(call); }
  // The context whose `x-request-id` names this answer in the access log (the stream's, for the
  // answer to one message of a stream).
  void set_request_id_source(const grpc::CallbackServerContext* context) { id_source_ = context; }
  // The trace of one message of a stream (RequestTrace::StartMessage); recorded, no trailers.
  void set_trace(pipeline::RequestTrace trace) { trace_ = std::move(trace); }
  grpc::CallbackServerContext* context() const { return context_; }
  Steady::time_point received_at() const { return received_at_; }
  // The admission decided (the call's trace times its admission span up to now).
  void MarkAdmitted() { trace_.MarkAdmitted(); }
  // The call's rows name its (sampled) server span to their batches' spans.
  void Annotate(serving::CallInfo* info) const { trace_.Annotate(info); }

  // OK, without model work.
  void Finish();
  // The pipeline's answer: OK with its timings (completed here unless the edge already did,
  // Outcome::Complete) or a fallback's `x-tide-degraded`; an error outcome as FinishError (naming
  // the model it chose, if any).
  void Finish(pipeline::Outcome outcome);
  void FinishError(const absl::Status& status);

 private:
  void Done();
  // With tracing on and a context: the call's SERVER span, continuing its traceparent metadata.
  void StartTrace();

  grpc::CallbackServerContext* context_ = nullptr;
  const grpc::CallbackServerContext* id_source_ = nullptr;
  FinishFn finish_;  // empty once finished (or moved from)
  const pipeline::CompletionRecorder* recorder_ = nullptr;
  const char* endpoint_ = "";
  Steady::time_point received_at_;
  pipeline::Outcome outcome_;
  serving::CallPtr call_;
  pipeline::RequestTrace trace_;
};

template <typename Work>
void StartCall(serving::ServiceCore* core, const grpc::CallbackServerContext& context, size_t message_bytes,
               UnaryAnswer answer, std::shared_ptr<CancellationFlag> client_gone, Work work, std::string_view model,
               std::string_view model_version) {
  auto info = CallInfoFor(context, message_bytes, answer.received_at(), std::move(client_gone));
  if (!info.ok()) return answer.FinishError(info.status());
  info->model = model;
  info->model_version = model_version;
  answer.Annotate(&*info);
  core->Start(*info, [answer = std::move(answer), work = std::move(work)](absl::StatusOr<serving::CallPtr> call) mutable {
    if (!call.ok()) return answer.FinishError(call.status());
    answer.MarkAdmitted();
    answer.hold(*call);
    work(*std::move(call), std::move(answer));
  });
}

}  // namespace tide::grpc_edge
