#include "tracing/otlp_grpc_exporter.h"

#include <deque>
#include <memory>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.grpc.pb.h"
#include "tracing/batch_span_processor.h"
#include "tracing/tracer.h"

namespace tide::tracing {
namespace {

using std::chrono::milliseconds;
namespace collector = opentelemetry::proto::collector::trace::v1;

// An in-test OTLP/gRPC receiver: TraceService on 127.0.0.1:0, answering from a script of status
// codes (then OK) and keeping every request with its api-key metadata.
class GrpcReceiver final : public collector::TraceService::Service {
 public:
  struct Received {
    collector::ExportTraceServiceRequest request;
    std::string api_key;
  };

  GrpcReceiver() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~GrpcReceiver() override { server_->Shutdown(); }

  int port() const { return port_; }
  void Script(std::vector<grpc::StatusCode> codes) {
    absl::MutexLock lock(&mu_);
    for (grpc::StatusCode c : codes) script_.push_back(c);
  }
  std::vector<Received> received() const {
    absl::MutexLock lock(&mu_);
    return received_;
  }

  grpc::Status Export(grpc::ServerContext* context, const collector::ExportTraceServiceRequest* request,
                      collector::ExportTraceServiceResponse*) override {
    absl::MutexLock lock(&mu_);
    Received r{*request, ""};
    const auto it = context->client_metadata().find("api-key");
    if (it != context->client_metadata().end()) r.api_key = std::string(it->second.data(), it->second.size());
    received_.push_back(std::move(r));
    if (script_.empty()) return grpc::Status::OK;
    const grpc::StatusCode code = script_.front();
    script_.pop_front();
    return grpc::Status(code, "scripted");
  }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  mutable absl::Mutex mu_;
  std::deque<grpc::StatusCode> script_;
  std::vector<Received> received_;
};

uint16_t ClosedPort() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor acceptor(
      io, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  const uint16_t port = acceptor.local_endpoint().port();
  acceptor.close();
  return port;
}

std::unique_ptr<OtlpGrpcExporter> Exporter(int port) {
  return std::make_unique<OtlpGrpcExporter>("127.0.0.1:" + std::to_string(port),
                                            std::vector<std::pair<std::string, std::string>>{{"API-Key", "secret"}},
                                            MakeResource("tide-test", {}));
}

std::vector<SpanData> Spans(std::vector<std::string> names) {
  std::vector<SpanData> spans;
  for (std::string& name : names) {
    SpanData span;
    span.context.trace_id = IdGenerator::NewTraceId();
    span.context.span_id = IdGenerator::NewSpanId();
    span.name = std::move(name);
    spans.push_back(std::move(span));
  }
  return spans;
}

TEST(OtlpGrpcExporterTest, SpansArriveWithTheHeadersAsMetadata) {
  GrpcReceiver receiver;
  auto exporter = Exporter(receiver.port());
  const ExportResult r = exporter->Export(Spans({"a", "b"}), milliseconds(10000));
  EXPECT_TRUE(r.ok()) << r.message;
  const std::vector<GrpcReceiver::Received> received = receiver.received();
  ASSERT_EQ(received.size(), 1u);
  EXPECT_EQ(received[0].api_key, "secret");
  const auto& rs = received[0].request.resource_spans(0);
  ASSERT_EQ(rs.scope_spans(0).spans_size(), 2);
  EXPECT_EQ(rs.scope_spans(0).spans(0).name(), "a");
  EXPECT_EQ(rs.scope_spans(0).spans(1).name(), "b");
  EXPECT_EQ(rs.scope_spans(0).scope().name(), "tide");
}

TEST(OtlpGrpcExporterTest, CodesMapToRetryableOrFailed) {
  GrpcReceiver receiver;
  receiver.Script({grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::RESOURCE_EXHAUSTED,
                   grpc::StatusCode::INVALID_ARGUMENT, grpc::StatusCode::UNAUTHENTICATED});
  auto exporter = Exporter(receiver.port());
  EXPECT_EQ(exporter->Export(Spans({"x"}), milliseconds(10000)).code, ExportResult::Code::kRetryable);
  EXPECT_EQ(exporter->Export(Spans({"x"}), milliseconds(10000)).code, ExportResult::Code::kRetryable);
  const ExportResult r = exporter->Export(Spans({"x"}), milliseconds(10000));
  EXPECT_EQ(r.code, ExportResult::Code::kFailed);
  EXPECT_NE(r.message.find("scripted"), std::string::npos) << r.message;
  EXPECT_EQ(exporter->Export(Spans({"x"}), milliseconds(10000)).code, ExportResult::Code::kFailed);
  EXPECT_TRUE(exporter->Export(Spans({"x"}), milliseconds(10000)).ok());
}

TEST(OtlpGrpcExporterTest, AReceiverThatIsDownIsUnavailableAndCountedByTheProcessor) {
  auto direct = Exporter(ClosedPort());
  EXPECT_EQ(direct->Export(Spans({"x"}), milliseconds(2000)).code, ExportResult::Code::kRetryable);

  BatchSpanProcessorOptions options;
  options.export_timeout = milliseconds(300);
  options.initial_backoff = milliseconds(10);
  options.max_backoff = milliseconds(50);
  BatchSpanProcessor processor(options, Exporter(ClosedPort()), SteadyClock::Get());
  Tracer tracer(std::shared_ptr<Sampler>(MakeAlwaysOnSampler()), &processor);
  tracer.StartSpan("request").End();
  ASSERT_TRUE(processor.ForceFlush(SteadyClock::Get()->Now() + std::chrono::seconds(20)));
  EXPECT_EQ(processor.counters().failed_exports, 1u);
  EXPECT_EQ(processor.counters().exported_spans, 0u);
}

TEST(OtlpGrpcExporterTest, UnavailableThenOkIsRetriedThroughTheProcessor) {
  GrpcReceiver receiver;
  receiver.Script({grpc::StatusCode::UNAVAILABLE});
  BatchSpanProcessorOptions options;
  options.initial_backoff = milliseconds(10);
  BatchSpanProcessor processor(options, Exporter(receiver.port()), SteadyClock::Get());
  Tracer tracer(std::shared_ptr<Sampler>(MakeAlwaysOnSampler()), &processor);
  tracer.StartSpan("request").End();
  ASSERT_TRUE(processor.ForceFlush(SteadyClock::Get()->Now() + std::chrono::seconds(20)));
  EXPECT_EQ(processor.counters().exported_spans, 1u);
  EXPECT_EQ(processor.counters().retries, 1u);
  EXPECT_EQ(receiver.received().size(), 2u);
}

}  // namespace
}  // namespace tide::tracing
