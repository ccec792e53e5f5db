#include "tracing/otlp_http_exporter.h"

#include <deque>
#include <memory>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"
#include "tracing/batch_span_processor.h"
#include "tracing/tracer.h"
#include "wait_for.h"

namespace tide::tracing {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using std::chrono::milliseconds;
using tide::test_support::WaitFor;
namespace collector = opentelemetry::proto::collector::trace::v1;

constexpr std::chrono::seconds kHang{20};

// A tiny OTLP/HTTP receiver on 127.0.0.1:0: decodes each POST body with the OTLP protos and
// answers from a script of statuses (then 200). `silent` answers nothing (a hung receiver).
class HttpReceiver {
 public:
  struct Received {
    std::string target;
    std::string content_type;
    std::string api_key;
    bool decoded = false;
    collector::ExportTraceServiceRequest request;
  };
  struct Answer {
    unsigned status = 200;
    std::string retry_after;
  };

  HttpReceiver() : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    Accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~HttpReceiver() {
    io_.stop();
    thread_.join();
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  void Script(std::vector<Answer> answers) {
    absl::MutexLock lock(&mu_);
    for (Answer& a : answers) script_.push_back(std::move(a));
  }
  void set_silent(bool silent) {
    absl::MutexLock lock(&mu_);
    silent_ = silent;
  }
  std::vector<Received> received() const {
    absl::MutexLock lock(&mu_);
    return received_;
  }
  size_t count() const { return received().size(); }

 private:
  struct Session {
    explicit Session(tcp::socket s) : socket(std::move(s)) {}
    tcp::socket socket;
    beast::flat_buffer buffer;
    http::request<http::string_body> request;
    http::response<http::string_body> response;
  };

  void Accept() {
    acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec) return;
      auto session = std::make_shared<Session>(std::move(socket));
      http::async_read(session->socket, session->buffer, session->request,
                       [this, session](beast::error_code ec, size_t) {
                         if (!ec) Respond(session);
                       });
      Accept();
    });
  }

  void Respond(const std::shared_ptr<Session>& session) {
    Received r;
    r.target = std::string(session->request.target());
    r.content_type = std::string(session->request[http::field::content_type]);
    r.api_key = std::string(session->request["api-key"]);
    r.decoded = r.request.ParseFromString(session->request.body());
    Answer answer;
    {
      absl::MutexLock lock(&mu_);
      received_.push_back(std::move(r));
      if (silent_) {
        hung_.push_back(session);  // keep the connection open, answer nothing
        return;
      }
      if (!script_.empty()) {
        answer = script_.front();
        script_.pop_front();
      }
    }
    session->response.version(11);
    session->response.result(answer.status);
    session->response.set(http::field::content_type, "application/x-protobuf");
    if (!answer.retry_after.empty()) session->response.set(http::field::retry_after, answer.retry_after);
    session->response.keep_alive(false);
    session->response.prepare_payload();
    http::async_write(session->socket, session->response, [session](beast::error_code, size_t) {
      beast::error_code ignored;
      session->socket.shutdown(tcp::socket::shutdown_both, ignored);
    });
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::deque<Answer> script_;
  std::vector<Received> received_;
  std::vector<std::shared_ptr<Session>> hung_;
  bool silent_ = false;
};

// A loopback port with nothing listening (bound, then closed).
uint16_t ClosedPort() {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const uint16_t port = acceptor.local_endpoint().port();
  acceptor.close();
  return port;
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

std::unique_ptr<OtlpHttpExporter> Exporter(uint16_t port) {
  return std::make_unique<OtlpHttpExporter>(Endpoint{"127.0.0.1", port, "/v1/traces"},
                                            std::vector<std::pair<std::string, std::string>>{{"api-key", "secret"}},
                                            MakeResource("tide-test", {}));
}

TEST(OtlpHttpExporterTest, SpansArriveAsProtobufAtV1Traces) {
  HttpReceiver receiver;
  auto exporter = Exporter(receiver.port());
  const ExportResult result = exporter->Export(Spans({"a", "b"}), milliseconds(10000));
  EXPECT_TRUE(result.ok()) << result.message;
  const std::vector<HttpReceiver::Received> received = receiver.received();
  ASSERT_EQ(received.size(), 1u);
  EXPECT_EQ(received[0].target, "/v1/traces");
  EXPECT_EQ(received[0].content_type, "application/x-protobuf");
  EXPECT_EQ(received[0].api_key, "secret");
  ASSERT_TRUE(received[0].decoded);
  const auto& spans = received[0].request.resource_spans(0).scope_spans(0).spans();
  ASSERT_EQ(spans.size(), 2);
  EXPECT_EQ(spans[0].name(), "a");
  EXPECT_EQ(spans[1].name(), "b");
  EXPECT_EQ(received[0].request.resource_spans(0).resource().attributes_size(), 4);
}

TEST(OtlpHttpExporterTest, StatusesMapToRetryableOrFailed) {
  HttpReceiver receiver;
  receiver.Script({{503, ""}, {429, "2"}, {502, ""}, {504, ""}, {400, ""}, {500, ""}});
  auto exporter = Exporter(receiver.port());
  ExportResult r = exporter->Export(Spans({"x"}), milliseconds(10000));
  EXPECT_EQ(r.code, ExportResult::Code::kRetryable);
  EXPECT_NE(r.message.find("503"), std::string::npos) << r.message;
  EXPECT_FALSE(r.retry_after);
  r = exporter->Export(Spans({"x"}), milliseconds(10000));
  EXPECT_EQ(r.code, ExportResult::Code::kRetryable);
  EXPECT_EQ(r.retry_after, milliseconds(2000));
  EXPECT_EQ(exporter->Export(Spans({"x"}), milliseconds(10000)).code, ExportResult::Code::kRetryable);
  EXPECT_EQ(exporter->Export(Spans({"x"}), milliseconds(10000)).code, ExportResult::Code::kRetryable);
  r = exporter->Export(Spans({"x"}), milliseconds(10000));
  EXPECT_EQ(r.code, ExportResult::Code::kFailed);
  EXPECT_NE(r.message.find("400"), std::string::npos) << r.message;
  EXPECT_EQ(exporter->Export(Spans({"x"}), milliseconds(10000)).code, ExportResult::Code::kFailed);
  EXPECT_TRUE(exporter->Export(Spans({"x"}), milliseconds(10000)).ok());
}

TEST(OtlpHttpExporterTest, AReceiverThatIsDownIsARetryableFailure) {
  auto exporter = Exporter(ClosedPort());
  const ExportResult r = exporter->Export(Spans({"x"}), milliseconds(10000));
  EXPECT_EQ(r.code, ExportResult::Code::kRetryable);
  EXPECT_NE(r.message.find("connect"), std::string::npos) << r.message;
}

TEST(OtlpHttpExporterTest, AReceiverThatNeverAnswersTimesOut) {
  HttpReceiver receiver;
  receiver.set_silent(true);
  auto exporter = Exporter(receiver.port());
  const ExportResult r = exporter->Export(Spans({"x"}), milliseconds(200));
  EXPECT_EQ(r.code, ExportResult::Code::kRetryable);
  EXPECT_NE(r.message.find("read"), std::string::npos) << r.message;
}

// The whole path: spans ended on a request thread, the processor's thread exporting.
class ExportPathTest : public ::testing::Test {
 protected:
  void Start(uint16_t port, milliseconds export_timeout) {
    BatchSpanProcessorOptions options;
    options.export_timeout = export_timeout;
    options.initial_backoff = milliseconds(10);
    options.max_backoff = milliseconds(50);
    processor_ = std::make_unique<BatchSpanProcessor>(options, Exporter(port), SteadyClock::Get());
    tracer_ = std::make_unique<Tracer>(std::shared_ptr<Sampler>(MakeAlwaysOnSampler()), processor_.get());
  }
  Clock::time_point Later() { return SteadyClock::Get()->Now() + kHang; }

  std::unique_ptr<BatchSpanProcessor> processor_;
  std::unique_ptr<Tracer> tracer_;
};

TEST_F(ExportPathTest, A503ThenA200IsRetriedAndExported) {
  HttpReceiver receiver;
  receiver.Script({{503, ""}});
  Start(receiver.port(), milliseconds(20000));
  tracer_->StartSpan("request").End();
  ASSERT_TRUE(processor_->ForceFlush(Later()));
  const BatchSpanProcessorCounters c = processor_->counters();
  EXPECT_EQ(c.exported_spans, 1u);
  EXPECT_EQ(c.retries, 1u);
  EXPECT_EQ(c.failed_exports, 0u);
  ASSERT_EQ(receiver.count(), 2u);
  EXPECT_EQ(receiver.received()[1].request.resource_spans(0).scope_spans(0).spans(0).name(), "request");
}

TEST_F(ExportPathTest, AReceiverThatIsDownFailsTheExportAndTheCallerCarriesOn) {
  Start(ClosedPort(), milliseconds(300));
  for (int i = 0; i < 3; ++i) tracer_->StartSpan("request").End();  // returns at once
  ASSERT_TRUE(processor_->ForceFlush(Later()));  // handled: given up after 300 ms of retries
  const BatchSpanProcessorCounters c = processor_->counters();
  EXPECT_EQ(c.exported_spans, 0u);
  EXPECT_EQ(c.failed_exports, 1u);
  EXPECT_EQ(c.failed_spans, 3u);
  EXPECT_GE(c.retries, 1u);
  EXPECT_TRUE(processor_->Shutdown(Later()));
}

}  // namespace
}  // namespace tide::tracing
