// Black-box test of tracing in `tide serve` (docs/tracing.md): the real binary exports its spans to
// an OTLP receiver inside this test (HTTP/protobuf, and gRPC when built with it), decoded with the
// official opentelemetry-proto messages (proto/opentelemetry). Checked: a caller's traceparent is
// continued (the SERVER span's parent, its children: admission, tokenize, queue, inference), the
// response's traceparent / x-trace-id and the access log name the same ids, a malformed traceparent
// starts a new trace and is counted, a quota refusal (shed at admission), a degraded answer, a gRPC
// call (rpc.* attributes, trailers), gRPC streams (one SERVER span per RPC, a tide.stream.message
// span per message with the usual children), a long document's windows, sampling at 0, the flush
// at SIGTERM, a receiver that is down (requests unaffected, failures counted), bad configuration
// refused at start; and with a rollout of an FP32 version and its INT8 rewrite: the rollout arm of
// each answer, the tide.shadow span of each comparison (linked to its request), the batch spans'
// precision, and the admin API's SERVER spans.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <fstream>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/synchronization/mutex.h"
#include "blackbox_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http_client.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"
#include "raw_socket.h"

#ifdef TIDE_HAVE_GRPC
#include "grpc_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.grpc.pb.h"
#include "tei.grpc.pb.h"
#endif

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace collector = opentelemetry::proto::collector::trace::v1;
namespace otlp = opentelemetry::proto::trace::v1;
using json = nlohmann::json;
using tide::testing::ClientResponse;
using tide::testing::HeaderList;
using tcp = asio::ip::tcp;
using ::testing::HasSubstr;

constexpr char kCallerTrace[] = "0af7651916cd43dd8448eb211c80319c";
constexpr char kCallerSpan[] = "b7ad6b7169203331";
const HeaderList kAlpha = {{"Authorization", "Bearer alpha-secret-key-1"}};
constexpr char kKeys[] =
    "alpha-secret-key-1 name=alpha requests_per_second=1000\n"
    "slow-secret-key-2 name=slowpoke requests_per_second=0.01\n";

std::string Hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

// Every span a receiver decoded, in arrival order.
class SpanSink {
 public:
  void Add(const collector::ExportTraceServiceRequest& request) {
    absl::MutexLock lock(&mu_);
    ++requests_;
    for (const auto& rs : request.resource_spans()) {
      for (const auto& kv : rs.resource().attributes()) {
        if (kv.key() == "service.name") service_name_ = kv.value().string_value();
      }
      for (const auto& ss : rs.scope_spans()) {
        for (const otlp::Span& s : ss.spans()) spans_.push_back(s);
      }
    }
  }
  std::vector<otlp::Span> spans() const {
    absl::MutexLock lock(&mu_);
    return spans_;
  }
  std::string service_name() const {
    absl::MutexLock lock(&mu_);
    return service_name_;
  }
  // The spans of trace `trace_hex`, once at least `n` arrived (up to 30 s).
  std::vector<otlp::Span> Trace(const std::string& trace_hex, size_t n) const {
    std::vector<otlp::Span> found;
    WaitFor(
        [&] {
          found.clear();
          for (const otlp::Span& s : spans()) {
            if (Hex(s.trace_id()) == trace_hex) found.push_back(s);
          }
          return found.size() >= n;
        },
        std::chrono::seconds(30));
    return found;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<otlp::Span> spans_;
  std::string service_name_;
  int requests_ = 0;
};

// An OTLP/HTTP receiver on 127.0.0.1:0: POST /v1/traces bodies decoded with the OTLP protos.
class HttpReceiver : public SpanSink {
 public:
  HttpReceiver() : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    Accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~HttpReceiver() {
    io_.stop();
    thread_.join();
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port()); }

 private:
  struct Session {
    explicit Session(tcp::socket s) : socket(std::move(s)) {}
    tcp::socket socket;
    beast::flat_buffer buffer;
    bhttp::request<bhttp::string_body> request;
    bhttp::response<bhttp::string_body> response;
  };
  void Accept() {
    acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec) return;
      auto session = std::make_shared<Session>(std::move(socket));
      session->request.body().reserve(1 << 16);
      bhttp::async_read(session->socket, session->buffer, session->request,
                        [this, session](beast::error_code ec, size_t) {
                          if (!ec) Respond(session);
                        });
      Accept();
    });
  }
  void Respond(const std::shared_ptr<Session>& session) {
    collector::ExportTraceServiceRequest request;
    const bool ok = session->request.target() == "/v1/traces" && request.ParseFromString(session->request.body());
    if (ok) Add(request);
    session->response.version(11);
    session->response.result(ok ? 200 : 400);
    session->response.set(bhttp::field::content_type, "application/x-protobuf");
    session->response.keep_alive(false);
    session->response.prepare_payload();
    bhttp::async_write(session->socket, session->response, [session](beast::error_code, size_t) {
      beast::error_code ignored;
      session->socket.shutdown(tcp::socket::shutdown_both, ignored);
    });
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::thread thread_;
};

#ifdef TIDE_HAVE_GRPC
// An OTLP/gRPC receiver (TraceService/Export) on 127.0.0.1.
class GrpcReceiver final : public SpanSink, public collector::TraceService::Service {
 public:
  GrpcReceiver() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~GrpcReceiver() override { server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2)); }
  int port() const { return port_; }
  grpc::Status Export(grpc::ServerContext*, const collector::ExportTraceServiceRequest* request,
                      collector::ExportTraceServiceResponse*) override {
    Add(*request);
    return grpc::Status::OK;
  }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};
#endif

const otlp::Span* Named(const std::vector<otlp::Span>& spans, const std::string& name) {
  for (const otlp::Span& s : spans) {
    if (s.name() == name) return &s;
  }
  return nullptr;
}

const otlp::Span* ServerSpan(const std::vector<otlp::Span>& spans) {
  for (const otlp::Span& s : spans) {
    if (s.kind() == otlp::Span::SPAN_KIND_SERVER) return &s;
  }
  return nullptr;
}

// An attribute's value as text ("" when absent): strings as they are, numbers and booleans printed.
std::string Attr(const otlp::Span& span, const std::string& key) {
  for (const auto& kv : span.attributes()) {
    if (kv.key() != key) continue;
    const auto& v = kv.value();
    if (v.has_string_value()) return v.string_value();
    if (v.has_int_value()) return std::to_string(v.int_value());
    if (v.has_bool_value()) return v.bool_value() ? "true" : "false";
    if (v.has_double_value()) return std::to_string(v.double_value());
  }
  return "";
}

absl::StatusOr<std::unique_ptr<tide::testing::ServerProcess>> StartTraced(const fs::path& repository,
                                                                          std::vector<std::string> args,
                                                                          std::vector<std::string> env) {
  tide::testing::ServerProcessOptions options;
  options.binary = TideBinary().string();
  options.args = {"serve", "--model-repository", repository.string()};
  options.args.insert(options.args.end(), args.begin(), args.end());
  options.extra_env = std::move(env);
  options.startup_timeout = std::chrono::milliseconds(120000);
  return tide::testing::ServerProcess::Start(options);
}

std::string RerankBody(const std::vector<std::string>& docs, const std::string& extra = "") {
  json j = {{"query", "giant panda"}, {"texts", docs}};
  std::string body = j.dump();
  if (!extra.empty()) body.insert(body.size() - 1, "," + extra);
  return body;
}

std::string CohereBody(const std::string& model, const std::vector<std::string>& docs) {
  return json({{"model", model}, {"query", "giant panda"}, {"documents", docs}}).dump();
}

std::string TinyBert(int delay_us) {
  return "backend: \"onnxruntime\"\nmax_batch_size: 16\n"
         "parameters { key: \"max_sequence_length\" value { string_value: \"64\" } }\n"
         "dynamic_batching { max_queue_delay_microseconds: " +
         std::to_string(delay_us) + " }\n";
}

// ---- one server exporting to an HTTP receiver, shared by the request tests --------------------

class ServeTracingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    receiver_ = new HttpReceiver();
    dir_ = new TempDir();
    const fs::path repo = dir_->path() / "repo";
    absl::Status s = AddTinyBert(repo, "m", TinyBert(2000));
    if (s.ok()) {
      // Two rows queue at most: three documents open the breaker (queue fullness), the next
      // request is answered by BM25, degraded (as tide_serve_guard_test does).
      std::string guarded = TinyBert(1000);
      guarded.replace(guarded.find("dynamic_batching"), std::string::npos,
                      "dynamic_batching { max_queue_delay_microseconds: 1000\n"
                      "  default_queue_policy { max_queue_size: 2 } }\n"
                      "parameters { key: \"breaker_queue_fullness\" value { string_value: \"0.5\" } }\n"
                      "parameters { key: \"breaker_open_s\" value { string_value: \"60\" } }\n");
      s = AddTinyBert(repo, "n-guarded", guarded);
    }
    // A batching window of 300 ms: requests sent together ride in one batch.
    if (s.ok()) s = AddTinyBert(repo, "o-batched", TinyBert(300000));
    if (!s.ok()) {
      setup_error_ = s.ToString();
      return;
    }
    std::ofstream(dir_->path() / "keys.txt") << kKeys;
    grpc_port_ = FreePort();
    auto server = StartTraced(repo,
                              {"--otlp-endpoint", receiver_->endpoint(), "--api-keys",
                               (dir_->path() / "keys.txt").string(), "--access-log",
                               (dir_->path() / "access.log").string(), "--grpc-port", std::to_string(grpc_port_),
                               "--service-name", "tide-under-test", "--log-level", "warn"},
                              {"OTEL_BSP_SCHEDULE_DELAY=20"});
    if (!server.ok()) {
      setup_error_ = server.status().ToString();
      return;
    }
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete dir_;
    delete receiver_;
  }
  void SetUp() override {
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
    ASSERT_NE(server_, nullptr);
  }
  std::unique_ptr<tide::testing::HttpClient> Client() {
    return std::make_unique<tide::testing::HttpClient>("127.0.0.1", server_->port());
  }
  std::vector<json> AccessLog() {
    std::vector<json> out;
    std::ifstream in(dir_->path() / "access.log");
    for (std::string line; std::getline(in, line);) out.push_back(ParseJson(line));
    return out;
  }

  static inline HttpReceiver* receiver_ = nullptr;
  static inline TempDir* dir_ = nullptr;
  static inline tide::testing::ServerProcess* server_ = nullptr;
  static inline std::string setup_error_;
  static inline uint16_t grpc_port_ = 0;
};

TEST_F(ServeTracingTest, ACallersTraceparentIsContinuedBySpansOfEveryStage) {
  HeaderList headers = kAlpha;
  headers.emplace_back("traceparent", std::string("00-") + kCallerTrace + "-" + kCallerSpan + "-01");
  headers.emplace_back("tracestate", "vendor=opaque");
  headers.emplace_back("x-request-id", "traced-1");
  const ClientResponse r = Client()->Post("/rerank", RerankBody({"a giant panda eats bamboo", "the weather"}), headers);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-trace-id"), kCallerTrace);
  const std::string traceparent(r.header("traceparent"));
  ASSERT_EQ(traceparent.size(), 55u) << traceparent;
  EXPECT_EQ(traceparent.substr(0, 36), std::string("00-") + kCallerTrace + "-");
  const std::string server_span_id = traceparent.substr(36, 16);
  EXPECT_NE(server_span_id, kCallerSpan);
  EXPECT_EQ(traceparent.substr(53), "01");

  const std::vector<otlp::Span> spans = receiver_->Trace(kCallerTrace, 5);
  const otlp::Span* server = ServerSpan(spans);
  ASSERT_NE(server, nullptr) << spans.size() << " span(s) of the trace arrived";
  EXPECT_EQ(server->name(), "POST /rerank");
  EXPECT_EQ(Hex(server->span_id()), server_span_id);
  EXPECT_EQ(Hex(server->parent_span_id()), kCallerSpan) << "the caller's span is the parent";
  EXPECT_EQ(server->trace_state(), "vendor=opaque");
  EXPECT_EQ(Attr(*server, "http.request.method"), "POST");
  EXPECT_EQ(Attr(*server, "http.route"), "/rerank");
  EXPECT_EQ(Attr(*server, "http.response.status_code"), "200");
  EXPECT_EQ(Attr(*server, "server.address"), "127.0.0.1");
  EXPECT_EQ(Attr(*server, "tide.model"), "m");
  EXPECT_EQ(Attr(*server, "tide.model.version"), "1");
  EXPECT_EQ(Attr(*server, "tide.tenant"), "alpha");
  EXPECT_EQ(Attr(*server, "tide.documents"), "2");
  EXPECT_EQ(Attr(*server, "tide.pairs"), "2");
  EXPECT_EQ(Attr(*server, "tide.degraded"), "false");
  EXPECT_NE(Attr(*server, "tide.tokens"), "");
  for (const auto& kv : server->attributes()) {
    EXPECT_EQ(kv.value().string_value().find("alpha-secret"), std::string::npos) << "a key in " << kv.key();
  }
  EXPECT_LE(server->start_time_unix_nano(), server->end_time_unix_nano());
  for (const char* stage : {"tide.admission", "tide.tokenize", "tide.queue", "tide.inference"}) {
    const otlp::Span* child = Named(spans, stage);
    ASSERT_NE(child, nullptr) << stage;
    EXPECT_EQ(Hex(child->parent_span_id()), server_span_id) << stage;
    EXPECT_GE(child->start_time_unix_nano(), server->start_time_unix_nano()) << stage;
    EXPECT_LE(child->end_time_unix_nano(), server->end_time_unix_nano()) << stage;
  }
  EXPECT_EQ(Attr(*Named(spans, "tide.admission"), "tide.admission.outcome"), "admitted");
  EXPECT_EQ(receiver_->service_name(), "tide-under-test");

  // The access log names the same trace and server span.
  std::vector<json> lines;
  WaitFor([&] {
    lines = AccessLog();
    for (const json& j : lines) {
      if (j.is_object() && j.value("request_id", "") == "traced-1") return true;
    }
    return false;
  }, std::chrono::seconds(20));
  bool found = false;
  for (const json& j : lines) {
    if (!j.is_object() || j.value("request_id", "") != "traced-1") continue;
    found = true;
    EXPECT_EQ(j.value("trace_id", ""), kCallerTrace);
    EXPECT_EQ(j.value("span_id", ""), server_span_id);
    EXPECT_EQ(j.value("key", ""), "alpha");
    EXPECT_EQ(j.value("route", ""), "rerank");
  }
  EXPECT_TRUE(found);
}

TEST_F(ServeTracingTest, RequestsBatchedTogetherLinkToTheOneSpanOfTheirBatch) {
  constexpr int kRequests = 3;
  std::vector<ClientResponse> responses(kRequests);
  std::vector<std::thread> threads;
  for (int i = 0; i < kRequests; ++i) {
    threads.emplace_back([&, i] {
      tide::testing::HttpClient client("127.0.0.1", server_->port());
      responses[i] = client.Post("/v1/rerank", CohereBody("o-batched", {"doc " + std::to_string(i)}), kAlpha);
    });
  }
  for (std::thread& t : threads) t.join();
  // Each request's inference span links to the batch it rode in; the batch span links back to the
  // server span of every request in it.
  std::map<std::string, std::vector<std::string>> requests_of_batch;  // batch span id -> server span ids
  std::map<std::string, std::string> server_of_trace;
  for (const ClientResponse& r : responses) {
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string trace(r.header("x-trace-id"));
    const std::vector<otlp::Span> spans = receiver_->Trace(trace, 5);
    const otlp::Span* server = ServerSpan(spans);
    const otlp::Span* inference = Named(spans, "tide.inference");
    ASSERT_TRUE(server != nullptr && inference != nullptr);
    EXPECT_EQ(Attr(*server, "tide.model"), "o-batched");
    ASSERT_EQ(inference->links_size(), 1) << "one document: one batch";
    requests_of_batch[Hex(inference->links(0).span_id())].push_back(Hex(server->span_id()));
    server_of_trace[trace] = Hex(server->span_id());
  }
  size_t largest = 0;
  for (const auto& [batch_id, servers] : requests_of_batch) {
    // The batch span is in the trace of one of its requests, as that request's server span's child.
    const otlp::Span* batch = nullptr;
    std::vector<otlp::Span> all;
    WaitFor([&] {
      all = receiver_->spans();
      for (const otlp::Span& s : all) {
        if (Hex(s.span_id()) == batch_id) return true;
      }
      return false;
    }, std::chrono::seconds(30));
    for (const otlp::Span& s : all) {
      if (Hex(s.span_id()) == batch_id) batch = &s;
    }
    ASSERT_NE(batch, nullptr) << "batch span " << batch_id;
    EXPECT_EQ(batch->name(), "tide.batch");
    EXPECT_EQ(server_of_trace[Hex(batch->trace_id())], Hex(batch->parent_span_id()));
    EXPECT_EQ(Attr(*batch, "tide.model"), "o-batched");
    EXPECT_EQ(Attr(*batch, "tide.model.version"), "1");
    EXPECT_EQ(Attr(*batch, "tide.batch.rows"), std::to_string(servers.size()));
    EXPECT_EQ(Attr(*batch, "tide.batch.requests"), std::to_string(servers.size()));
    EXPECT_NE(Attr(*batch, "tide.batch.tokens"), "");
    EXPECT_NE(Attr(*batch, "tide.batch.padded_tokens"), "");
    EXPECT_NE(Attr(*batch, "tide.batch.sequence_bucket"), "");
    EXPECT_NE(Attr(*batch, "tide.batch.instance"), "");
    std::vector<std::string> linked;
    for (const auto& link : batch->links()) linked.push_back(Hex(link.span_id()));
    EXPECT_THAT(linked, ::testing::UnorderedElementsAreArray(servers));
    largest = std::max(largest, servers.size());
  }
  EXPECT_GE(largest, 2u) << "three requests sent together within a 300 ms batching window rode in "
                         << requests_of_batch.size() << " batches";
}

TEST_F(ServeTracingTest, OpenMetricsScrapesGetLatencyExemplarsNamingTraces) {
  auto client = Client();
  const ClientResponse r = client->Post("/rerank", RerankBody({"bamboo"}), kAlpha);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string trace(r.header("x-trace-id"));
  const ClientResponse om = client->Get("/metrics", {{"Accept", "application/openmetrics-text; version=1.0.0"}});
  ASSERT_EQ(om.status, 200);
  EXPECT_THAT(std::string(om.header("content-type")), HasSubstr("application/openmetrics-text"));
  EXPECT_THAT(om.body, HasSubstr("# {trace_id=\"" + trace + "\",span_id=\""));
  size_t line = om.body.rfind('\n', om.body.find("trace_id=\"" + trace));
  EXPECT_EQ(om.body.compare(line + 1, 37, "tide_request_duration_seconds_bucket{"), 0) << om.body.substr(line + 1, 200);
  EXPECT_EQ(om.body.substr(om.body.size() - 6), "# EOF\n");
  EXPECT_THAT(om.body, HasSubstr("# TYPE tide_requests counter\n"));
  const ClientResponse plain = client->Get("/metrics");
  EXPECT_THAT(std::string(plain.header("content-type")), HasSubstr("text/plain; version=0.0.4"));
  EXPECT_EQ(plain.body.find("trace_id"), std::string::npos) << "Prometheus text is unchanged";
  EXPECT_THAT(plain.body, HasSubstr("# TYPE tide_requests_total counter\n"));
}

TEST_F(ServeTracingTest, AMalformedTraceparentStartsANewTraceAndIsCounted) {
  auto client = Client();
  const double before = MetricSum(client->Get("/metrics").body, "tide_trace_context_malformed_total",
                                  {R"(header="traceparent")"});
  HeaderList headers = kAlpha;
  headers.emplace_back("traceparent", "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01");  // uppercase
  const ClientResponse r = client->Post("/rerank", RerankBody({"bamboo"}), headers);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string trace(r.header("x-trace-id"));
  ASSERT_EQ(trace.size(), 32u);
  EXPECT_NE(trace, "0af7651916cd43dd8448eb211c80319c");
  const std::vector<otlp::Span> spans = receiver_->Trace(trace, 1);
  const otlp::Span* server = ServerSpan(spans);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->parent_span_id(), "") << "a root span";
  EXPECT_EQ(MetricSum(client->Get("/metrics").body, "tide_trace_context_malformed_total", {R"(header="traceparent")"}),
            before + 1);
}

TEST_F(ServeTracingTest, AQuotaRefusalIsTracedWithItsAdmissionOutcome) {
  auto client = Client();
  const HeaderList slow = {{"Authorization", "Bearer slow-secret-key-2"}};
  ClientResponse r;
  for (int i = 0; i < 5 && r.status != 429; ++i) r = client->Post("/rerank", RerankBody({"bamboo"}), slow);
  ASSERT_EQ(r.status, 429) << r.body;
  const std::vector<otlp::Span> spans = receiver_->Trace(std::string(r.header("x-trace-id")), 2);
  const otlp::Span* server = ServerSpan(spans);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(Attr(*server, "http.response.status_code"), "429");
  EXPECT_EQ(Attr(*server, "tide.error.kind"), "overloaded") << "the error kind's name";
  EXPECT_EQ(Attr(*server, "tide.tenant"), "slowpoke");
  const otlp::Span* admission = Named(spans, "tide.admission");
  ASSERT_NE(admission, nullptr);
  EXPECT_EQ(Attr(*admission, "tide.admission.outcome"), "quota");
  EXPECT_EQ(Named(spans, "tide.inference"), nullptr) << "refused before any model work";
  EXPECT_EQ(server->status().code(), otlp::Status::STATUS_CODE_UNSET) << "a 4xx is not a server error";
}

TEST_F(ServeTracingTest, ADegradedAnswerHasAFallbackSpan) {
  auto client = Client();
  const ClientResponse first = client->Post("/v1/rerank", CohereBody("n-guarded", {"a", "b", "c"}), kAlpha);
  ASSERT_EQ(first.status, 200) << first.body;
  const ClientResponse degraded =
      client->Post("/v1/rerank", CohereBody("n-guarded", {"the weather", "a giant panda", "bears"}), kAlpha);
  ASSERT_EQ(degraded.status, 200) << degraded.body;
  ASSERT_EQ(degraded.header("x-tide-degraded"), "bm25");
  const std::vector<otlp::Span> spans = receiver_->Trace(std::string(degraded.header("x-trace-id")), 3);
  const otlp::Span* server = ServerSpan(spans);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->name(), "POST /v1/rerank");
  EXPECT_EQ(Attr(*server, "tide.degraded"), "true");
  const otlp::Span* fallback = Named(spans, "tide.fallback");
  ASSERT_NE(fallback, nullptr);
  EXPECT_EQ(Attr(*fallback, "tide.fallback"), "bm25");
  EXPECT_EQ(Attr(*fallback, "tide.degraded"), "true");
  EXPECT_EQ(Named(spans, "tide.inference"), nullptr) << "the model did not run";
}

TEST_F(ServeTracingTest, ALongDocumentCountsItsWindows) {
  std::string long_text;
  for (int i = 0; i < 20; ++i) long_text += "panda bamboo forest ";
  const ClientResponse r =
      Client()->Post("/rerank", RerankBody({long_text, "short"}, R"("long_documents":"chunk_max")"), kAlpha);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<otlp::Span> spans = receiver_->Trace(std::string(r.header("x-trace-id")), 5);
  const otlp::Span* server = ServerSpan(spans);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(Attr(*server, "tide.documents"), "2");
  EXPECT_GT(std::stoi(Attr(*server, "tide.pairs")), 2) << "the long document's windows are pairs of their own";
  EXPECT_GT(std::stoi(Attr(*server, "tide.windows")), 1);
}

#ifdef TIDE_HAVE_GRPC
TEST_F(ServeTracingTest, AGrpcCallContinuesItsTraceparentMetadataAndNamesItInTrailers) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port_), grpc::InsecureChannelCredentials());
  auto stub = tei::v1::Rerank::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer alpha-secret-key-1");
  const std::string caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
  ctx.AddMetadata("traceparent", "00-" + caller_trace + "-00f067aa0ba902b7-01");
  tei::v1::RerankRequest req;
  req.set_query("giant panda");
  req.add_texts("a giant panda eats bamboo");
  tei::v1::RerankResponse resp;
  const grpc::Status s = stub->Rerank(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const auto& trailers = ctx.GetServerTrailingMetadata();
  auto it = trailers.find("x-trace-id");
  ASSERT_NE(it, trailers.end());
  EXPECT_EQ(std::string(it->second.data(), it->second.size()), caller_trace);
  const std::vector<otlp::Span> spans = receiver_->Trace(caller_trace, 5);
  const otlp::Span* server = ServerSpan(spans);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->name(), "tei.v1.Rerank/Rerank");
  EXPECT_EQ(Hex(server->parent_span_id()), "00f067aa0ba902b7");
  EXPECT_EQ(Attr(*server, "rpc.system"), "grpc");
  EXPECT_EQ(Attr(*server, "rpc.service"), "tei.v1.Rerank");
  EXPECT_EQ(Attr(*server, "rpc.method"), "Rerank");
  EXPECT_EQ(Attr(*server, "rpc.grpc.status_code"), "0");
  EXPECT_EQ(Attr(*server, "server.port"), std::to_string(grpc_port_));
  EXPECT_EQ(Attr(*server, "tide.tenant"), "alpha");
  EXPECT_NE(Named(spans, "tide.inference"), nullptr);
}

// The spans of a stream named `rpc` in trace `trace`: its SERVER span, and its message spans once
// `messages` of them (and their children: at least `per_message` spans each) arrived.
struct StreamSpans {
  std::vector<otlp::Span> all;
  const otlp::Span* server = nullptr;
  std::vector<const otlp::Span*> messages;
};
StreamSpans CollectStream(const SpanSink& sink, const std::string& trace, size_t messages, size_t per_message) {
  StreamSpans out;
  out.all = sink.Trace(trace, 1 + messages * (1 + per_message));
  out.server = ServerSpan(out.all);
  for (const otlp::Span& s : out.all) {
    if (s.name() == "tide.stream.message") out.messages.push_back(&s);
  }
  return out;
}

// The children of span `parent` by name.
std::vector<std::string> ChildNames(const std::vector<otlp::Span>& spans, const otlp::Span& parent) {
  std::vector<std::string> names;
  for (const otlp::Span& s : spans) {
    // (a tide.batch span is the child of the first sampled request of its batch, when it arrives)
    if (s.parent_span_id() == parent.span_id() && s.name() != "tide.batch") names.push_back(s.name());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST_F(ServeTracingTest, ABidirectionalStreamIsOneServerSpanWithASpanPerMessage) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port_), grpc::InsecureChannelCredentials());
  auto predict = tei::v1::Predict::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer alpha-secret-key-1");
  const std::string caller_trace = "5bf92f3577b34da6a3ce929d0e0e4737";
  ctx.AddMetadata("traceparent", "00-" + caller_trace + "-10f067aa0ba902b7-01");
  auto stream = predict->PredictStream(&ctx);
  for (const char* in : {"a giant panda", "the weather"}) {
    tei::v1::PredictRequest p;
    p.set_inputs(in);
    ASSERT_TRUE(stream->Write(p));
  }
  stream->WritesDone();
  int answers = 0;
  tei::v1::PredictResponse pr;
  while (stream->Read(&pr)) ++answers;
  const grpc::Status s = stream->Finish();
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(answers, 2);
  const auto& trailers = ctx.GetServerTrailingMetadata();
  auto it = trailers.find("x-trace-id");
  ASSERT_NE(it, trailers.end()) << "the stream names its trace in its trailers";
  EXPECT_EQ(std::string(it->second.data(), it->second.size()), caller_trace);

  const StreamSpans got = CollectStream(*receiver_, caller_trace, 2, 4);
  ASSERT_NE(got.server, nullptr) << got.all.size() << " span(s) arrived";
  EXPECT_EQ(got.server->name(), "tei.v1.Predict/PredictStream");
  EXPECT_EQ(Hex(got.server->parent_span_id()), "10f067aa0ba902b7");
  EXPECT_EQ(Attr(*got.server, "rpc.method"), "PredictStream");
  EXPECT_EQ(Attr(*got.server, "rpc.grpc.status_code"), "0");
  EXPECT_EQ(Attr(*got.server, "tide.stream.messages"), "2");
  EXPECT_EQ(Attr(*got.server, "server.port"), std::to_string(grpc_port_));
  ASSERT_EQ(got.messages.size(), 2u);
  std::vector<std::string> indices;
  for (const otlp::Span* m : got.messages) {
    EXPECT_EQ(m->parent_span_id(), got.server->span_id());
    EXPECT_EQ(m->kind(), otlp::Span::SPAN_KIND_INTERNAL);
    EXPECT_EQ(Attr(*m, "tide.endpoint"), "predict_stream");
    EXPECT_EQ(Attr(*m, "tide.tenant"), "alpha");
    EXPECT_EQ(Attr(*m, "rpc.grpc.status_code"), "0");
    indices.push_back(Attr(*m, "tide.stream.message.index"));
    EXPECT_EQ(ChildNames(got.all, *m),
              (std::vector<std::string>{"tide.admission", "tide.inference", "tide.queue", "tide.tokenize"}));
  }
  std::sort(indices.begin(), indices.end());
  EXPECT_EQ(indices, (std::vector<std::string>{"0", "1"}));
}

TEST_F(ServeTracingTest, AKServeInferenceStreamIsOneServerSpanWithASpanPerMessage) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port_), grpc::InsecureChannelCredentials());
  auto kserve = inference::GRPCInferenceService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer alpha-secret-key-1");
  const std::string caller_trace = "6bf92f3577b34da6a3ce929d0e0e4738";
  ctx.AddMetadata("traceparent", "00-" + caller_trace + "-20f067aa0ba902b7-01");
  auto stream = kserve->ModelStreamInfer(&ctx);
  for (int i = 0; i < 3; ++i) {
    inference::ModelInferRequest r;
    // Message 1 names a model that is not served: answered in the stream with its error.
    r.set_model_name(i == 1 ? "absent" : "m");
    r.set_id("id-" + std::to_string(i));
    for (const char* name : {"text", "text_pair"}) {
      auto* in = r.add_inputs();
      in->set_name(name);
      in->set_datatype("BYTES");
      in->add_shape(1);
      in->mutable_contents()->add_bytes_contents(std::string(name) == "text" ? "giant panda" : "a bear");
    }
    ASSERT_TRUE(stream->Write(r));
  }
  stream->WritesDone();
  inference::ModelStreamInferResponse answer;
  int answers = 0;
  while (stream->Read(&answer)) ++answers;
  const grpc::Status s = stream->Finish();
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(answers, 3);

  // Messages 0 and 2: the message span and its four stages; message 1: the span and its admission.
  const StreamSpans got = CollectStream(*receiver_, caller_trace, 3, 1);
  std::vector<otlp::Span> all = receiver_->Trace(caller_trace, 1 + 3 + 4 + 1 + 4);
  ASSERT_NE(got.server, nullptr);
  EXPECT_EQ(got.server->name(), "inference.GRPCInferenceService/ModelStreamInfer");
  EXPECT_EQ(Hex(got.server->parent_span_id()), "20f067aa0ba902b7");
  EXPECT_EQ(Attr(*got.server, "tide.stream.messages"), "3");
  EXPECT_EQ(Attr(*got.server, "rpc.grpc.status_code"), "0");
  std::map<std::string, const otlp::Span*> by_index;
  for (const otlp::Span& m : all) {
    if (m.name() == "tide.stream.message") by_index[Attr(m, "tide.stream.message.index")] = &m;
  }
  ASSERT_EQ(by_index.size(), 3u);
  for (const char* i : {"0", "2"}) {
    const otlp::Span& m = *by_index[i];
    EXPECT_EQ(m.parent_span_id(), got.server->span_id());
    EXPECT_EQ(Attr(m, "tide.endpoint"), "stream_infer");
    EXPECT_EQ(Attr(m, "tide.model"), "m");
    EXPECT_EQ(ChildNames(all, m),
              (std::vector<std::string>{"tide.admission", "tide.inference", "tide.queue", "tide.tokenize"}))
        << "message " << i;
  }
  EXPECT_EQ(Attr(*by_index["1"], "tide.error.kind"), "not_found");
  EXPECT_EQ(ChildNames(all, *by_index["1"]), (std::vector<std::string>{"tide.admission"}));
}
#endif

// ---- a rollout: version 1 of "r" in FP32, version 2 its INT8 rewrite (`tide quantize --int8`) ----

constexpr char kAdminKey[] = "tracing-admin-key";

class ServeTracingRolloutTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    receiver_ = new HttpReceiver();
    dir_ = new TempDir();
    const fs::path repo = dir_->path() / "repo";
    absl::Status s = AddTinyBert(repo, "r",
                                 "backend: \"onnxruntime\"\nmax_batch_size: 8\n"
                                 "parameters { key: \"max_sequence_length\" value { string_value: \"64\" } }\n"
                                 "version_policy { all { } }\n");
    auto tiny = s.ok() ? ExportedTinyBert() : absl::StatusOr<fs::path>(s);
    const fs::path int8 = dir_->path() / "int8.onnx";
    if (tiny.ok()) {
      auto run = RunCommand({TideBinary().string(), "quantize", "--int8", (*tiny / "1" / "model.onnx").string(),
                             int8.string()});
      s = !run.ok() ? run.status()
          : run->exit_code != 0 ? absl::InternalError("tide quantize --int8: " + run->output)
                                : absl::OkStatus();
    } else {
      s = tiny.status();
    }
    if (s.ok()) {
      std::error_code ec;
      fs::create_directories(repo / "r" / "2", ec);
      if (!ec) fs::create_symlink(int8, repo / "r" / "2" / "model.onnx", ec);
      if (ec) s = absl::InternalError("cannot add version 2: " + ec.message());
    }
    if (!s.ok()) {
      setup_error_ = s.ToString();
      return;
    }
    // Shadow lanes at normal priority: SCHED_IDLE threads starve on a loaded test machine.
    auto server = StartTraced(repo,
                              {"--otlp-endpoint", receiver_->endpoint(), "--admin-api-key", kAdminKey,
                               "--shadow-scheduling", "normal", "--log-level", "warn"},
                              {"OTEL_BSP_SCHEDULE_DELAY=20"});
    if (!server.ok()) {
      setup_error_ = server.status().ToString();
      return;
    }
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete dir_;
    delete receiver_;
  }
  void SetUp() override {
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
    ASSERT_NE(server_, nullptr);
  }
  static std::unique_ptr<tide::testing::HttpClient> Client() {
    return std::make_unique<tide::testing::HttpClient>("127.0.0.1", server_->port());
  }
  static HeaderList Admin() {
    return {{"Authorization", std::string("Bearer ") + kAdminKey}, {"Content-Type", "application/json"}};
  }
  // Starts the rollout `body` and checks the SERVER span of that admin call.
  static void PutRollout(const std::string& body) {
    const ClientResponse put = Client()->Send("PUT", "/v2/models/r/rollout", body, Admin());
    ASSERT_EQ(put.status, 200) << put.body;
    const std::vector<otlp::Span> spans = receiver_->Trace(std::string(put.header("x-trace-id")), 1);
    const otlp::Span* server = ServerSpan(spans);
    ASSERT_NE(server, nullptr) << "the admin API's answer is a SERVER span";
    EXPECT_EQ(server->name(), "PUT /v2/models/{model}/rollout");
    EXPECT_EQ(Attr(*server, "http.route"), "/v2/models/{model}/rollout");
    EXPECT_EQ(Attr(*server, "http.response.status_code"), "200");
    EXPECT_EQ(Attr(*server, "tide.endpoint"), "rollout_put");
  }
  // Sends reranks (pausing between them: a shadow runs once live traffic leaves the versions idle)
  // until one's shadow comparison span arrives with outcome "compared"; returns that request's
  // server span and its tide.shadow span.
  static std::pair<otlp::Span, otlp::Span> RerankUntilCompared() {
    std::vector<std::string> servers;  // server span ids sent so far
    for (int i = 0; i < 40; ++i) {
      const ClientResponse r = Client()->Post(
          "/rerank", RerankBody({"a giant panda eats bamboo", "the weather", "a red fox", "number " + std::to_string(i)}));
      EXPECT_EQ(r.status, 200) << r.body;
      const std::string traceparent(r.header("traceparent"));
      if (traceparent.size() == 55) servers.push_back(traceparent.substr(36, 16));
      std::optional<std::pair<otlp::Span, otlp::Span>> found;
      WaitFor([&] {
        const std::vector<otlp::Span> all = receiver_->spans();
        for (const otlp::Span& shadow : all) {
          if (shadow.name() != "tide.shadow" || Attr(shadow, "tide.shadow.outcome") != "compared") continue;
          if (shadow.links_size() != 1) continue;
          const std::string linked = Hex(shadow.links(0).span_id());
          if (std::find(servers.begin(), servers.end(), linked) == servers.end()) continue;
          for (const otlp::Span& server : all) {
            if (Hex(server.span_id()) == linked) found.emplace(server, shadow);
          }
        }
        return found.has_value();
      }, std::chrono::milliseconds(300));
      if (found.has_value()) return *found;
    }
    ADD_FAILURE() << "no compared shadow span arrived for " << servers.size() << " request(s)";
    return {};
  }
  // The tide.batch span linked from the tide.inference span of the request whose server span is `server`.
  static std::optional<otlp::Span> BatchOf(const otlp::Span& server) {
    std::optional<otlp::Span> batch;
    WaitFor([&] {
      const std::vector<otlp::Span> all = receiver_->spans();
      std::string batch_id;
      for (const otlp::Span& s : all) {
        if (s.name() == "tide.inference" && s.parent_span_id() == server.span_id() && s.links_size() > 0) {
          batch_id = s.links(0).span_id();
        }
      }
      for (const otlp::Span& s : all) {
        if (!batch_id.empty() && s.name() == "tide.batch" && s.span_id() == batch_id) batch = s;
      }
      return batch.has_value();
    }, std::chrono::seconds(20));
    return batch;
  }

  static inline HttpReceiver* receiver_ = nullptr;
  static inline TempDir* dir_ = nullptr;
  static inline tide::testing::ServerProcess* server_ = nullptr;
  static inline std::string setup_error_;
};

TEST_F(ServeTracingRolloutTest, AShadowRolloutsAnswersAreStableAndEachComparisonIsASpanLinkedToItsRequest) {
  PutRollout(R"({"candidate": "2", "stable": "1", "mode": "shadow", "percent": 100})");
  const auto [server, shadow] = RerankUntilCompared();
  if (HasFailure()) return;
  EXPECT_EQ(Attr(server, "tide.model"), "r");
  EXPECT_EQ(Attr(server, "tide.model.version"), "1");
  EXPECT_EQ(Attr(server, "tide.rollout.arm"), "stable");
  // The comparison ran after the answer: not the request's child but a root linked to it, in a
  // trace of its own, recorded because the request was.
  EXPECT_TRUE(shadow.parent_span_id().empty());
  EXPECT_NE(shadow.trace_id(), server.trace_id());
  EXPECT_EQ(shadow.links(0).trace_id(), server.trace_id());
  EXPECT_EQ(Attr(shadow, "tide.model"), "r");
  EXPECT_EQ(Attr(shadow, "tide.model.version"), "2");
  EXPECT_EQ(Attr(shadow, "tide.rollout.arm"), "shadow");
  EXPECT_EQ(Attr(shadow, "tide.shadow.live_version"), "1");
  EXPECT_EQ(Attr(shadow, "tide.shadow.live_arm"), "stable");
  EXPECT_EQ(Attr(shadow, "tide.shadow.reason"), "scored");
  ASSERT_NE(Attr(shadow, "tide.shadow.agreement.spearman"), "");
  const double spearman = std::stod(Attr(shadow, "tide.shadow.agreement.spearman"));
  EXPECT_GE(spearman, -1.0);
  EXPECT_LE(spearman, 1.0);
  EXPECT_NE(Attr(shadow, "tide.shadow.agreement.top1"), "");
  EXPECT_NE(Attr(shadow, "tide.shadow.agreement.ndcg10"), "");
  EXPECT_NE(Attr(shadow, "tide.shadow.run_ms"), "");
  // The live batch ran the FP32 version.
  const std::optional<otlp::Span> batch = BatchOf(server);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(Attr(*batch, "tide.model.version"), "1");
  EXPECT_EQ(Attr(*batch, "tide.model.precision"), "fp32");
}

TEST_F(ServeTracingRolloutTest, ACanarysAnswersAreTheCandidatesInInt8AndTheStableDuplicateIsTheShadow) {
  PutRollout(R"({"candidate": "2", "stable": "1", "mode": "canary", "percent": 100})");
  const auto [server, shadow] = RerankUntilCompared();
  if (HasFailure()) return;
  EXPECT_EQ(Attr(server, "tide.model.version"), "2");
  EXPECT_EQ(Attr(server, "tide.rollout.arm"), "canary");
  EXPECT_EQ(Attr(shadow, "tide.model.version"), "1");
  EXPECT_EQ(Attr(shadow, "tide.shadow.live_version"), "2");
  EXPECT_EQ(Attr(shadow, "tide.shadow.live_arm"), "canary");
  const std::optional<otlp::Span> batch = BatchOf(server);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(Attr(*batch, "tide.model.version"), "2");
  EXPECT_EQ(Attr(*batch, "tide.model.precision"), "int8");
  // A request that names its version bypasses the rollout: no arm.
  const ClientResponse named = Client()->Post("/v2/models/r/versions/1/infer",
      R"({"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["giant panda"]},
                     {"name": "text_pair", "datatype": "BYTES", "shape": [1], "data": ["a bear"]}]})");
  ASSERT_EQ(named.status, 200) << named.body;
  const std::vector<otlp::Span> named_spans = receiver_->Trace(std::string(named.header("x-trace-id")), 5);
  const otlp::Span* named_server = ServerSpan(named_spans);
  ASSERT_NE(named_server, nullptr);
  EXPECT_EQ(Attr(*named_server, "tide.model.version"), "1");
  EXPECT_EQ(Attr(*named_server, "tide.rollout.arm"), "");
}

// ---- servers of their own ---------------------------------------------------------------------

class ServeTracingAloneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(AddTinyBert(repo(), "m", TinyBert(1000)).ok());
  }
  fs::path repo() const { return dir_.path() / "repo"; }
  TempDir dir_;
};

TEST_F(ServeTracingAloneTest, BadTracingConfigurationRefusesToStart) {
  struct Case {
    std::vector<std::string> env;
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{}, {"--trace-sampler", "sometimes"}, "--trace-sampler: unknown sampler \"sometimes\""},
      {{"OTEL_TRACES_SAMPLER_ARG=2"}, {"--trace-sampler", "traceidratio"}, "OTEL_TRACES_SAMPLER_ARG"},
      {{}, {"--otlp-endpoint", "https://collector:4318"}, "https is not supported yet"},
      {{"OTEL_EXPORTER_OTLP_PROTOCOL=http/json"}, {}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
      {{"OTEL_TRACES_EXPORTER=zipkin"}, {}, "OTEL_TRACES_EXPORTER"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {"/usr/bin/env"};
    argv.insert(argv.end(), c.env.begin(), c.env.end());
    argv.insert(argv.end(), {TideBinary().string(), "serve", "--model-repository", repo().string(), "--port", "0",
                             "--grpc-port", "0"});
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    auto result = RunCommand(argv);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->exit_code, 1) << result->output;
    EXPECT_THAT(result->output, HasSubstr("tracing: ")) << result->output;
    EXPECT_THAT(result->output, HasSubstr(c.message)) << result->output;
    EXPECT_THAT(result->output, ::testing::Not(HasSubstr("listening"))) << result->output;
  }
}

TEST_F(ServeTracingAloneTest, SamplingAtZeroNamesTheTraceButExportsNothingAndAtOneEverything) {
  for (const char* ratio : {"0", "1"}) {
    HttpReceiver receiver;
    auto server = StartTraced(repo(),
                              {"--otlp-endpoint", receiver.endpoint(), "--trace-sampler", "traceidratio",
                               "--trace-sampler-arg", ratio, "--grpc-port", "0", "--log-level", "warn"},
                              {"OTEL_BSP_SCHEDULE_DELAY=20"});
    ASSERT_TRUE(server.ok()) << server.status();
    tide::testing::HttpClient client("127.0.0.1", (*server)->port());
    for (int i = 0; i < 5; ++i) {
      const ClientResponse r = client.Post("/rerank", RerankBody({"bamboo", "bears"}));
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_EQ(r.header("x-trace-id").size(), 32u);
      EXPECT_EQ(r.header("traceparent").substr(53), std::string(ratio) == "0" ? "00" : "01");
    }
    // At SIGTERM the exporter flushes: what was recorded has arrived once the process is gone.
    ASSERT_TRUE((*server)->Signal(SIGTERM).ok());
    auto code = (*server)->WaitExit(std::chrono::seconds(30));
    ASSERT_TRUE(code.ok()) << code.status();
    size_t servers = 0;
    for (const otlp::Span& s : receiver.spans()) servers += s.kind() == otlp::Span::SPAN_KIND_SERVER;
    EXPECT_EQ(servers, std::string(ratio) == "0" ? 0u : 5u) << "ratio " << ratio;
  }
}

TEST_F(ServeTracingAloneTest, TheLastRequestsSpansAreFlushedAtSigterm) {
  HttpReceiver receiver;
  // A schedule delay of ten minutes: nothing is exported before the signal.
  auto server = StartTraced(repo(), {"--otlp-endpoint", receiver.endpoint(), "--grpc-port", "0"},
                            {"OTEL_BSP_SCHEDULE_DELAY=600000"});
  ASSERT_TRUE(server.ok()) << server.status();
  tide::testing::HttpClient client("127.0.0.1", (*server)->port());
  const ClientResponse r = client.Post("/rerank", RerankBody({"bamboo"}));
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string trace(r.header("x-trace-id"));
  EXPECT_TRUE(receiver.spans().empty());
  ASSERT_TRUE((*server)->Signal(SIGTERM).ok());
  auto code = (*server)->WaitExit(std::chrono::seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  size_t of_trace = 0;
  for (const otlp::Span& s : receiver.spans()) of_trace += Hex(s.trace_id()) == trace;
  EXPECT_GE(of_trace, 5u) << "the server span and its children";
  EXPECT_THAT((*server)->Stdout() + (*server)->Stderr(), HasSubstr("tracing: flushed"));
}

TEST_F(ServeTracingAloneTest, AReceiverThatIsDownLeavesRequestsAloneAndCountsTheFailures) {
  auto server = StartTraced(repo(),
                            {"--otlp-endpoint", "http://127.0.0.1:" + std::to_string(FreePort()), "--grpc-port", "0"},
                            {"OTEL_BSP_SCHEDULE_DELAY=20", "OTEL_BSP_EXPORT_TIMEOUT=300", "OTEL_EXPORTER_OTLP_TIMEOUT=100"});
  ASSERT_TRUE(server.ok()) << server.status();
  tide::testing::HttpClient client("127.0.0.1", (*server)->port());
  for (int i = 0; i < 3; ++i) {
    const ClientResponse r = client.Post("/rerank", RerankBody({"bamboo", "bears"}));
    ASSERT_EQ(r.status, 200) << r.body;
  }
  double failed = 0;
  WaitFor([&] {
    failed = MetricSum(client.Get("/metrics").body, "tide_trace_spans_total", {R"(outcome="failed")"});
    return failed >= 15;
  }, std::chrono::seconds(30));
  EXPECT_GE(failed, 15) << "three requests' five spans each";
  const std::string metrics = client.Get("/metrics").body;
  EXPECT_EQ(MetricSum(metrics, "tide_trace_spans_total", {R"(outcome="exported")"}), 0);
  EXPECT_GE(MetricSum(metrics, "tide_trace_exports_total", {R"(outcome="failed")"}), 1);
}

#ifdef TIDE_HAVE_GRPC
TEST_F(ServeTracingAloneTest, SpansGoToAnOtlpGrpcReceiver) {
  GrpcReceiver receiver;
  auto server = StartTraced(repo(),
                            {"--otlp-protocol", "grpc", "--grpc-port", "0"},
                            {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:" + std::to_string(receiver.port()),
                             "OTEL_BSP_SCHEDULE_DELAY=20", "OTEL_SERVICE_NAME=tide-grpc-export"});
  ASSERT_TRUE(server.ok()) << server.status();
  tide::testing::HttpClient client("127.0.0.1", (*server)->port());
  const ClientResponse r = client.Post("/rerank", RerankBody({"bamboo"}));
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<otlp::Span> spans = receiver.Trace(std::string(r.header("x-trace-id")), 5);
  ASSERT_NE(ServerSpan(spans), nullptr);
  EXPECT_EQ(receiver.service_name(), "tide-grpc-export");
}
#endif

}  // namespace
}  // namespace tide::blackbox
