#include "server/grpc/grpc_call.h"

#include "server/access/access_table.h"

#include <atomic>
#include <charconv>
#include <random>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/status_http.h"
#include "common/error.h"
#include "common/error_echo.h"
#include "server/grpc/grpc_status.h"

namespace tide::grpc_edge {

namespace {

std::string_view Metadata(const grpc::CallbackServerContext& context, std::string_view key) {
  const auto& md = context.client_metadata();
  auto it = md.find(grpc::string_ref(key.data(), key.size()));
  if (it == md.end()) return {};
  return std::string_view(it->second.data(), it->second.size());
}

double Ms(serving::Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// The full method (rpc.service/rpc.method) of an answer's endpoint (its metrics label).
std::string_view RpcOf(std::string_view endpoint) {
  static constexpr std::pair<std::string_view, std::string_view> kRpcs[] = {
      {"rerank", "tei.v1.Rerank/Rerank"},
      {"rerank_stream", "tei.v1.Rerank/RerankStream"},
      {"info", "tei.v1.Info/Info"},
      {"tokenize", "tei.v1.Tokenize/Tokenize"},
      {"decode", "tei.v1.Tokenize/Decode"},
      {"predict", "tei.v1.Predict/Predict"},
      {"predict_pair", "tei.v1.Predict/PredictPair"},
      {"embed", "tei.v1.Embed/Embed"},
      {"embed_sparse", "tei.v1.Embed/EmbedSparse"},
      {"embed_all", "tei.v1.Embed/EmbedAll"},
      {"tokenize_stream", "tei.v1.Tokenize/TokenizeStream"},
      {"decode_stream", "tei.v1.Tokenize/DecodeStream"},
      {"predict_stream", "tei.v1.Predict/PredictStream"},
      {"predict_pair_stream", "tei.v1.Predict/PredictPairStream"},
      {"embed_stream", "tei.v1.Embed/EmbedStream"},
      {"embed_sparse_stream", "tei.v1.Embed/EmbedSparseStream"},
      {"embed_all_stream", "tei.v1.Embed/EmbedAllStream"},
      {"stream_infer", "inference.GRPCInferenceService/ModelStreamInfer"},
      {"infer", "inference.GRPCInferenceService/ModelInfer"},
      {"health_live", "inference.GRPCInferenceService/ServerLive"},
      {"health_ready", "inference.GRPCInferenceService/ServerReady"},
      {"model_ready", "inference.GRPCInferenceService/ModelReady"},
      {"server_metadata", "inference.GRPCInferenceService/ServerMetadata"},
      {"model_metadata", "inference.GRPCInferenceService/ModelMetadata"},
      {"model_config", "inference.GRPCInferenceService/ModelConfig"},
      {"model_stats", "inference.GRPCInferenceService/ModelStatistics"},
      {"repository_index", "inference.GRPCInferenceService/RepositoryIndex"},
      {"repository_load", "inference.GRPCInferenceService/RepositoryModelLoad"},
      {"repository_unload", "inference.GRPCInferenceService/RepositoryModelUnload"},
      {"health_check", "grpc.health.v1.Health/Check"},
  };
  for (const auto& [name, rpc] : kRpcs) {
    if (name == endpoint) return rpc;
  }
  return endpoint;
}

}  // namespace

absl::StatusOr<serving::CallInfo> CallInfoFor(const grpc::CallbackServerContext& context, size_t message_bytes,
                                              Steady::time_point received_at,
                                              std::shared_ptr<CancellationFlag> client_gone) {
  serving::CallInfo info;
  info.authorization = Metadata(context, "authorization");
  info.body_bytes = message_bytes;
  info.received_at = received_at;
  info.client_gone = std::move(client_gone);
  // A canary's sticky_header is read from the call's metadata as HTTP reads it from its headers
  // (gRPC keys are lower case, like sticky_header). Used during admission, while `context` lives.
  info.header = [&context](std::string_view name) { return Metadata(context, name); };
  const auto deadline = context.deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - std::chrono::system_clock::now());
    // A deadline already passed is one microsecond away: the core answers DEADLINE_EXCEEDED (a
    // timeout <= 0 would be invalid input, which the client did not send).
    info.timeout_us = std::max<int64_t>(left.count(), 1);
  }
  if (std::string_view p = Metadata(context, "x-priority"); !p.empty()) {
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
    if (ec != std::errc() || ptr != p.data() + p.size()) {
      return errors::MalformedRequest(
          absl::StrCat("x-priority must be a non-negative integer, got '", EchoForError(p), "'"));
    }
    info.priority = v;
  }
  return info;
}

void AddTimingTrailers(const serving::StageTimings& t, grpc::CallbackServerContext* context) {
  auto whole_ms = [](serving::Clock::duration d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  };
  context->AddTrailingMetadata("x-tokenization-time", whole_ms(t.tokenize));
  context->AddTrailingMetadata("x-queue-time", whole_ms(t.queue));
  context->AddTrailingMetadata("x-inference-time", whole_ms(t.inference));
  context->AddTrailingMetadata("x-total-time", whole_ms(t.total));
  context->AddTrailingMetadata(
      "server-timing", absl::StrFormat("tokenize;dur=%.3f, queue;dur=%.3f, inference;dur=%.3f, postprocess;dur=%.3f, "
                                       "total;dur=%.3f",
                                       Ms(t.tokenize), Ms(t.queue), Ms(t.inference), Ms(t.postprocess), Ms(t.total)));
}

absl::Status CheckAccess(const serving::ServiceCore& core, const grpc::CallbackServerContext& context,
                         std::string_view rpc) {
  const guard::Access access = server::RpcAccess(rpc);
  if (access == guard::Access::kUnset) {
    return errors::Internal(absl::StrCat("no access decision for ", std::string(rpc)));
  }
  auto who = core.Authorize(access, Metadata(context, "authorization"));
  return who.ok() ? absl::OkStatus() : who.status();
}

std::string RequestIdOf(const grpc::CallbackServerContext& context) {
  if (std::string_view id = Metadata(context, "x-request-id"); !id.empty()) return std::string(id.substr(0, 128));
  static const uint32_t process = std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  return absl::StrFormat("%08x-g%d", process, counter.fetch_add(1, std::memory_order_relaxed) + 1);
}

UnaryAnswer& UnaryAnswer::operator=(UnaryAnswer&& other) noexcept {
  if (this == &other) return *this;
  if (finish_) FinishError(errors::Internal("answer replaced unfinished"));
  context_ = other.context_;
  id_source_ = other.id_source_;
  finish_ = std::move(other.finish_);
  other.finish_ = nullptr;
  recorder_ = other.recorder_;
  endpoint_ = other.endpoint_;
  received_at_ = other.received_at_;
  outcome_ = std::move(other.outcome_);
  call_ = std::move(other.call_);
  trace_ = std::move(other.trace_);
  return *this;
}

void UnaryAnswer::StartTrace() {
  if (context_ == nullptr || recorder_ == nullptr || recorder_->tracing() == nullptr) return;
  trace_ = recorder_->tracing()->StartGrpc(RpcOf(endpoint_), received_at_, Metadata(*context_, "traceparent"),
                                           Metadata(*context_, "tracestate"));
}

pipeline::RequestTrace StartStreamTrace(const grpc::CallbackServerContext& context,
                                        const pipeline::CompletionRecorder* recorder, const char* endpoint,
                                        Steady::time_point received_at) {
  if (recorder == nullptr || recorder->tracing() == nullptr) return {};
  return recorder->tracing()->StartGrpc(RpcOf(endpoint), received_at, Metadata(context, "traceparent"),
                                        Metadata(context, "tracestate"));
}

void FinishStreamTrace(pipeline::RequestTrace* trace, grpc::CallbackServerContext* context, const grpc::Status& status,
                       int64_t messages) {
  if (!trace->active()) return;
  context->AddTrailingMetadata("traceparent", trace->traceparent());
  context->AddTrailingMetadata("x-trace-id", trace->trace_id());
  trace->EndRpc(static_cast<int>(status.error_code()), status.error_message(), messages);
}

UnaryAnswer::~UnaryAnswer() {
  if (finish_) FinishError(errors::Internal("the call was dropped without an answer"));
}

void UnaryAnswer::Finish() { Done(); }

void UnaryAnswer::Finish(pipeline::Outcome outcome) {
  if (!finish_) return;
  if (outcome.model.empty() && !outcome_.model.empty()) outcome.set_model(outcome_.model, *outcome_.version);
  outcome_ = std::move(outcome);
  Done();
}

void UnaryAnswer::FinishError(const absl::Status& status) {
  outcome_.status = status;
  Done();
}

void UnaryAnswer::Done() {
  if (!finish_) return;
  const serving::StageTimings* timings = outcome_.Complete(received_at_);
  std::string request_id;
  if (recorder_ != nullptr && recorder_->logs()) {
    request_id = id_source_ != nullptr ? RequestIdOf(*id_source_) : std::string();
  }
  if (recorder_ != nullptr) {
    pipeline::Completion c;
    c.protocol = "grpc";
    c.endpoint = endpoint_;
    c.received_at = received_at_;
    c.outcome = &outcome_;
    c.call = call_.get();
    c.timings = timings;
    c.request_id = request_id;
    c.trace = &trace_;
    recorder_->Record(c);
  }
  const absl::Status& status = outcome_.status;
  if (context_ != nullptr) {
    if (outcome_.version.has_value()) context_->AddTrailingMetadata("x-tide-model-version", outcome_.version_label());
    if (recorder_ != nullptr && recorder_->logs()) context_->AddTrailingMetadata("x-request-id", request_id);
    if (trace_.active()) {
      context_->AddTrailingMetadata("traceparent", trace_.traceparent());
      context_->AddTrailingMetadata("x-trace-id", trace_.trace_id());
    }
    if (!status.ok()) {
      AddErrorTrailers(status, context_);
    } else if (outcome_.fallback != nullptr) {
      context_->AddTrailingMetadata("x-tide-degraded", outcome_.fallback);
    } else if (timings != nullptr) {
      AddTimingTrailers(*timings, context_);
    }
  }
  // The permit goes first, as on the HTTP edge: a client that sends its next call as soon as it
  // has this answer must find its slot free.
  if (call_ != nullptr) call_->ReleasePermit();
  call_.reset();
  FinishFn finish = std::move(finish_);
  finish_ = nullptr;
  std::move(finish)(ToGrpcStatus(status));
}

}  // namespace tide::grpc_edge
