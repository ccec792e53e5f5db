#include "loadgen/grpc_transport.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grpc_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tei.grpc.pb.h"

namespace tide::loadgen {

namespace asio = boost::asio;

namespace {

// KServe's raw BYTES layout: per element a 4-byte little-endian length, then the bytes.
std::string LengthPrefixed(const std::vector<std::string>& elements) {
  std::string out;
  for (const std::string& e : elements) {
    const uint32_t n = static_cast<uint32_t>(e.size());
    for (int shift = 0; shift < 32; shift += 8) out.push_back(static_cast<char>((n >> shift) & 0xff));
    out.append(e);
  }
  return out;
}

}  // namespace

// One call: what gRPC needs alive until it finishes the call, and its outcome. Owned by the
// transport on the loop thread (Impl::calls) from Start until OnDone.
struct GrpcTransport::Call {
  grpc::ClientContext context;
  tei::v1::RerankResponse rerank;
  inference::ModelInferResponse infer;
  size_t index = 0;
  std::function<void(const TransportResult&)> done;
  // Written by the gRPC thread before it posts the call to the loop.
  TransportResult result;
  std::string server_timing;
};

struct GrpcTransport::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<tei::v1::Rerank::Stub> rerank;
  std::unique_ptr<inference::GRPCInferenceService::Stub> kserve;
  std::vector<std::unique_ptr<google::protobuf::Message>> requests;
  // Loop thread only.
  std::map<Call*, std::unique_ptr<Call>> calls;  // started, not yet through OnDone
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> busy;  // while calls are out
  // Shared with gRPC's threads. The gRPC callbacks capture only raw pointers (nothing of ours is
  // destroyed on a gRPC thread: not a ClientContext, not the channel).
  std::mutex mu;
  std::condition_variable idle;
  asio::io_context* io = nullptr;  // guarded by mu; null once the transport is going
  size_t unfinished = 0;           // guarded by mu: calls whose gRPC callback has not returned
};

std::string_view GrpcMethodFor(Endpoint endpoint) {
  switch (endpoint) {
    case Endpoint::kRerank: return "tei.v1.Rerank/Rerank";
    case Endpoint::kKServe: return "inference.GRPCInferenceService/ModelInfer";
    case Endpoint::kCohereRerank:
    case Endpoint::kEmbed:
    case Endpoint::kOpenAIEmbeddings:
    case Endpoint::kTemplate: return "";
  }
  return "";
}

std::unique_ptr<google::protobuf::Message> BuildTeiRerankRequest(const RerankWorkload& w) {
  auto req = std::make_unique<tei::v1::RerankRequest>();
  req->set_query(w.query);
  for (const std::string& d : w.documents) req->add_texts(d);
  req->set_truncate(true);
  return req;
}

std::unique_ptr<google::protobuf::Message> BuildModelInferRequest(const std::string& model, const RerankWorkload& w) {
  auto req = std::make_unique<inference::ModelInferRequest>();
  req->set_model_name(model);
  for (const char* name : {"text", "text_pair"}) {
    auto* input = req->add_inputs();
    input->set_name(name);
    input->set_datatype("BYTES");
    input->add_shape(static_cast<int64_t>(w.documents.size()));
  }
  req->add_raw_input_contents(LengthPrefixed(std::vector<std::string>(w.documents.size(), w.query)));
  req->add_raw_input_contents(LengthPrefixed(w.documents));
  return req;
}

void AddServerTiming(std::string_view server_timing, StageTotals* totals) {
  for (absl::string_view entry : absl::StrSplit(absl::string_view(server_timing.data(), server_timing.size()), ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    const size_t semi = entry.find(";dur=");
    if (semi == absl::string_view::npos) continue;
    const std::string stage(entry.substr(0, semi));
    double ms = 0;
    if (stage.empty() || stage == "total" || !absl::SimpleAtod(entry.substr(semi + 5), &ms) || !(ms >= 0)) continue;
    StageTotal& t = (*totals)[stage];
    t.sum_seconds += ms / 1e3;
    t.count += 1;
  }
}

std::string GrpcCodeName(int code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  if (code >= 0 && code < static_cast<int>(std::size(kNames))) return kNames[code];
  return absl::StrCat("CODE ", code);
}

GrpcTransport::GrpcTransport(AsioEventLoop* loop, GrpcTransportOptions options)
    : loop_(loop), options_(std::move(options)), impl_(std::make_unique<Impl>()) {}

absl::StatusOr<std::unique_ptr<GrpcTransport>> GrpcTransport::Create(AsioEventLoop* loop,
                                                                     const GrpcTransportOptions& options) {
  if (options.workloads.empty()) return absl::InvalidArgumentError("no requests");
  if (options.max_in_flight == 0) return absl::InvalidArgumentError("max_in_flight must be >= 1");
  if (GrpcMethodFor(options.endpoint).empty()) {
    return absl::InvalidArgumentError(absl::StrCat("endpoint '", std::string(EndpointName(options.endpoint)),
                                                   "' has no gRPC method (gRPC: rerank, kserve)"));
  }
  if (options.endpoint == Endpoint::kKServe && options.model.empty()) {
    return absl::InvalidArgumentError("the kserve endpoint needs a model name (--model)");
  }
  std::unique_ptr<GrpcTransport> t(new GrpcTransport(loop, options));
  Impl& impl = *t->impl_;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  // An IPv6 literal needs brackets in a gRPC target.
  const std::string host = options.host.find(':') != std::string::npos && options.host.front() != '['
                               ? absl::StrCat("[", options.host, "]")
                               : options.host;
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (options.tls) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_root_pem;
    ssl.pem_cert_chain = options.tls_cert_pem;
    ssl.pem_private_key = options.tls_key_pem;
    credentials = grpc::SslCredentials(ssl);
  }
  impl.channel = grpc::CreateCustomChannel(absl::StrCat(host, ":", options.port), credentials, args);
  impl.rerank = tei::v1::Rerank::NewStub(impl.channel);
  impl.kserve = inference::GRPCInferenceService::NewStub(impl.channel);
  impl.requests.reserve(options.workloads.size());
  for (const RerankWorkload& w : options.workloads) {
    impl.requests.push_back(options.endpoint == Endpoint::kKServe ? BuildModelInferRequest(options.model, w)
                                                                   : BuildTeiRerankRequest(w));
  }
  impl.io = &loop->io();
  return t;
}

GrpcTransport::~GrpcTransport() {
  for (const auto& [raw, call] : impl_->calls) call->context.TryCancel();
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->idle.wait(lock, [this] { return impl_->unfinished == 0; });
  impl_->io = nullptr;
  lock.unlock();
  impl_->calls.clear();  // outcomes posted but never run are dropped with the loop
  impl_->busy.reset();
}

void GrpcTransport::Send(size_t index, std::function<void(const TransportResult&)> done) {
  Pending request{index, std::move(done)};
  if (in_flight_ >= options_.max_in_flight) {
    waiting_.push_back(std::move(request));
    return;
  }
  Start(std::move(request));
}

void GrpcTransport::Start(Pending request) {
  if (in_flight_++ == 0) impl_->busy.emplace(loop_->io().get_executor());
  Impl* impl = impl_.get();
  auto owned = std::make_unique<Call>();
  Call* call = owned.get();
  call->index = request.index;
  call->done = std::move(request.done);
  call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(options_.timeout_ms));
  impl->calls.emplace(call, std::move(owned));
  {
    std::lock_guard<std::mutex> lock(impl->mu);
    ++impl->unfinished;
  }
  const google::protobuf::Message& message = *impl->requests[call->index % impl->requests.size()];
  // On a gRPC thread: record the outcome in the call and hand the call to the loop thread.
  auto finished = [impl, call, transport = this](const grpc::Status& status) {
    TransportResult& result = call->result;
    result.grpc_status = static_cast<int>(status.error_code());
    if (status.ok()) {
      result.response_bytes = call->rerank.ByteSizeLong() + call->infer.ByteSizeLong();
      const auto& trailers = call->context.GetServerTrailingMetadata();
      if (auto it = trailers.find("server-timing"); it != trailers.end()) {
        call->server_timing.assign(it->second.data(), it->second.size());
      }
    } else {
      result.error = absl::StrCat("grpc ", GrpcCodeName(result.grpc_status));
    }
    std::lock_guard<std::mutex> lock(impl->mu);
    // The transport outlives every handler the loop runs (it is destroyed after Run returned).
    if (impl->io != nullptr) asio::post(*impl->io, [transport, call] { transport->OnDone(call); });
    if (--impl->unfinished == 0) impl->idle.notify_all();
  };
  if (options_.endpoint == Endpoint::kKServe) {
    impl->kserve->async()->ModelInfer(&call->context, static_cast<const inference::ModelInferRequest*>(&message),
                                      &call->infer, std::move(finished));
  } else {
    impl->rerank->async()->Rerank(&call->context, static_cast<const tei::v1::RerankRequest*>(&message),
                                  &call->rerank, std::move(finished));
  }
}

void GrpcTransport::OnDone(Call* raw) {
  auto it = impl_->calls.find(raw);
  if (it == impl_->calls.end()) return;
  std::unique_ptr<Call> call = std::move(it->second);
  impl_->calls.erase(it);
  if (!call->server_timing.empty()) AddServerTiming(call->server_timing, &stage_totals_);
  --in_flight_;
  if (!waiting_.empty()) {
    Pending next = std::move(waiting_.front());
    waiting_.pop_front();
    Start(std::move(next));
  }
  if (in_flight_ == 0) impl_->busy.reset();
  if (call->done) call->done(call->result);
}

}  // namespace tide::loadgen
