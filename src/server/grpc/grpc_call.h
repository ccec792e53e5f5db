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
//  - UnaryAnswer is move-only and finishes its reactor exactly once: Finish / FinishError record
//    tide_requests_total and tide_request_duration_seconds (protocol "grpc"; status: the HTTP
//    status of the answer's error kind, 200 for OK) and, with timings, the stage histograms; add
//    `x-tide-model-version` and the timing trailers (x-tokenization-time, x-queue-time,
//    x-inference-time, x-total-time in whole ms, server-timing in fractional ms) or the error
//    trailers (grpc_status.h); hand the access log (when given) one record, with the request id of
//    the `x-request-id` metadata (else a new one) also sent as an `x-request-id` trailer; release
//    the held call's concurrency permit; then finish. An answer destroyed unfinished finishes
//    INTERNAL (a bug, never silence). The answer to one message of a stream has no context (no
//    trailers): its record takes the request id of the stream's context (set_request_id_source).
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
#include "serving/access_log.h"
#include "serving/call.h"
#include "serving/inference_request.h"
#include "serving/service_core.h"
#include "serving/serving_metrics.h"

namespace tide::grpc_edge {

using Steady = std::chrono::steady_clock;

absl::StatusOr<serving::CallInfo> CallInfoFor(const grpc::CallbackServerContext& context, size_t message_bytes,
                                              Steady::time_point received_at,
                                              std::shared_ptr<CancellationFlag> client_gone);

// The timing trailers of an answer (the same values as the HTTP edge's timing headers).
void AddTimingTrailers(const serving::StageTimings& timings, grpc::CallbackServerContext* context);

// Hands `log` (may be null: nothing) the access record of one answered RPC or stream message.
// `call` (may be null: not admitted) gives the key name, pairs and cache hits; else a refusal's
// errors::KeyNameOf.
void LogAnswer(serving::AccessLog* log, const std::string& model, const std::string& version, const char* endpoint,
               const absl::Status& status, Steady::time_point received_at, const serving::StageTimings* timings,
               bool degraded, const serving::Call* call, std::string request_id);

// The request id of a call: its `x-request-id` metadata (first 128 bytes), else a new one.
std::string RequestIdOf(const grpc::CallbackServerContext& context);

// Records one answered RPC (or one answer on a stream) in the request metrics.
void RecordAnswer(serving::ServingMetrics* metrics, const std::string& model, const std::string& version,
                  const char* endpoint, const absl::Status& status, Steady::time_point received_at,
                  const serving::StageTimings* timings);

class UnaryAnswer;

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
  // null: the answer to one message of a stream (recorded in the metrics, no trailers).
  using FinishFn = absl::AnyInvocable<void(const grpc::Status&) &&>;
  // `access_log` may be null (none).
  UnaryAnswer(grpc::CallbackServerContext* context, FinishFn finish, serving::ServingMetrics* metrics,
              serving::AccessLog* access_log, const char* endpoint, Steady::time_point received_at)
      : context_(context),
        id_source_(context),
        finish_(std::move(finish)),
        metrics_(metrics),
        access_log_(access_log),
        endpoint_(endpoint),
        received_at_(received_at) {}
  // For a UnaryReactor.
  UnaryAnswer(grpc::CallbackServerContext* context, UnaryReactor* reactor, serving::ServingMetrics* metrics,
              serving::AccessLog* access_log, const char* endpoint, Steady::time_point received_at)
      : UnaryAnswer(context, [reactor](const grpc::Status& s) { reactor->Finish(s); }, metrics, access_log,
                    endpoint, received_at) {}
  UnaryAnswer(UnaryAnswer&& other) noexcept { *this = std::move(other); }
  UnaryAnswer& operator=(UnaryAnswer&& other) noexcept;
  ~UnaryAnswer();

  void set_model(std::string model, int64_t version) {
    model_ = std::move(model);
    version_ = std::to_string(version);
  }
  void hold(serving::CallPtr call) { call_ = std::move(call); }
  // The context whose `x-request-id` names this answer in the access log (the stream's, for the
  // answer to one message of a stream).
  void set_request_id_source(const grpc::CallbackServerContext* context) { id_source_ = context; }
  grpc::CallbackServerContext* context() const { return context_; }
  Steady::time_point received_at() const { return received_at_; }

  // OK; `timings` (when given) go to the stage histograms and the trailers; `degraded` (a
  // fallback's name) adds `x-tide-degraded` instead.
  void Finish(const serving::StageTimings* timings = nullptr, const char* degraded = nullptr);
  void FinishError(const absl::Status& status);

 private:
  void Done(const absl::Status& status, const serving::StageTimings* timings, const char* degraded);

  grpc::CallbackServerContext* context_ = nullptr;
  const grpc::CallbackServerContext* id_source_ = nullptr;
  FinishFn finish_;  // empty once finished (or moved from)
  serving::ServingMetrics* metrics_ = nullptr;
  serving::AccessLog* access_log_ = nullptr;
  const char* endpoint_ = "";
  Steady::time_point received_at_;
  std::string model_;
  std::string version_;
  serving::CallPtr call_;
};

template <typename Work>
void StartCall(serving::ServiceCore* core, const grpc::CallbackServerContext& context, size_t message_bytes,
               UnaryAnswer answer, std::shared_ptr<CancellationFlag> client_gone, Work work, std::string_view model,
               std::string_view model_version) {
  auto info = CallInfoFor(context, message_bytes, answer.received_at(), std::move(client_gone));
  if (!info.ok()) return answer.FinishError(info.status());
  info->model = model;
  info->model_version = model_version;
  core->Start(*info, [answer = std::move(answer), work = std::move(work)](absl::StatusOr<serving::CallPtr> call) mutable {
    if (!call.ok()) return answer.FinishError(call.status());
    answer.hold(*call);
    work(*std::move(call), std::move(answer));
  });
}

}  // namespace tide::grpc_edge
