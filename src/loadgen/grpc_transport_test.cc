// GrpcTransport: the request messages, the server-timing parser, and calls against an in-process
// fake tei.v1 Rerank / KServe ModelInfer server on a free loopback port (no tide, no model).
#include "loadgen/grpc_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "grpc_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "loadgen/load_driver.h"
#include "tei.grpc.pb.h"
#include "wait_for.h"

namespace tide::loadgen {
namespace {

using tide::test_support::WaitFor;

RerankWorkload Workload(std::string query, std::vector<std::string> docs) {
  RerankWorkload w;
  w.query = std::move(query);
  w.documents = std::move(docs);
  return w;
}

std::vector<std::string> SplitLengthPrefixed(const std::string& raw) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at + 4 <= raw.size()) {
    const uint32_t n = static_cast<uint8_t>(raw[at]) | static_cast<uint8_t>(raw[at + 1]) << 8 |
                       static_cast<uint8_t>(raw[at + 2]) << 16 | static_cast<uint32_t>(static_cast<uint8_t>(raw[at + 3])) << 24;
    out.push_back(raw.substr(at + 4, n));
    at += 4 + n;
  }
  EXPECT_EQ(at, raw.size());
  return out;
}

TEST(GrpcTransportMessages, ModelInferSendsTextAndTextPairAsRawBytesTensors) {
  const auto message = BuildModelInferRequest("m", Workload("q?", {"doc one", "", "doc three"}));
  const auto& req = static_cast<const inference::ModelInferRequest&>(*message);
  EXPECT_EQ(req.model_name(), "m");
  ASSERT_EQ(req.inputs_size(), 2);
  EXPECT_EQ(req.inputs(0).name(), "text");
  EXPECT_EQ(req.inputs(1).name(), "text_pair");
  for (const auto& in : req.inputs()) {
    EXPECT_EQ(in.datatype(), "BYTES");
    ASSERT_EQ(in.shape_size(), 1);
    EXPECT_EQ(in.shape(0), 3);
    EXPECT_FALSE(in.has_contents());
  }
  ASSERT_EQ(req.raw_input_contents_size(), 2);
  EXPECT_EQ(SplitLengthPrefixed(req.raw_input_contents(0)), (std::vector<std::string>{"q?", "q?", "q?"}));
  EXPECT_EQ(SplitLengthPrefixed(req.raw_input_contents(1)), (std::vector<std::string>{"doc one", "", "doc three"}));
}

TEST(GrpcTransportMessages, TeiRerankTruncatesLikeHttpRerankByDefault) {
  const auto message = BuildTeiRerankRequest(Workload("q", {"a", "b"}));
  const auto& req = static_cast<const tei::v1::RerankRequest&>(*message);
  EXPECT_EQ(req.query(), "q");
  ASSERT_EQ(req.texts_size(), 2);
  EXPECT_EQ(req.texts(1), "b");
  EXPECT_TRUE(req.truncate());
  EXPECT_FALSE(req.raw_scores());
  EXPECT_FALSE(req.return_text());
}

TEST(GrpcTransportMessages, ServerTimingAddsEveryStageButTotal) {
  StageTotals totals;
  AddServerTiming("tokenize;dur=0.500, queue;dur=2.000, inference;dur=10.250, postprocess;dur=0.010, total;dur=13.0",
                  &totals);
  AddServerTiming("tokenize;dur=1.500,queue;dur=x, bogus, inference;dur=-1, ;dur=3", &totals);
  EXPECT_EQ(totals.count("total"), 0u);
  EXPECT_EQ(totals.count(""), 0u);
  ASSERT_EQ(totals.count("tokenize"), 1u);
  EXPECT_DOUBLE_EQ(totals["tokenize"].count, 2);
  EXPECT_DOUBLE_EQ(totals["tokenize"].sum_seconds, 0.002);
  EXPECT_DOUBLE_EQ(totals["queue"].count, 1);  // "x" is skipped
  EXPECT_DOUBLE_EQ(totals["inference"].count, 1);  // a negative duration is skipped
  EXPECT_DOUBLE_EQ(totals["inference"].sum_seconds, 0.01025);
  const auto split = DiffStageTotals({}, totals);
  ASSERT_GE(split.size(), 4u);
  EXPECT_EQ(split[0].stage, "tokenize");
  EXPECT_DOUBLE_EQ(split[0].mean_ms, 1.0);
}

TEST(GrpcTransportMessages, CodeNames) {
  EXPECT_EQ(GrpcCodeName(0), "OK");
  EXPECT_EQ(GrpcCodeName(8), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(GrpcCodeName(14), "UNAVAILABLE");
  EXPECT_EQ(GrpcCodeName(16), "UNAUTHENTICATED");
  EXPECT_EQ(GrpcCodeName(99), "CODE 99");
  EXPECT_EQ(GrpcMethodFor(Endpoint::kRerank), "tei.v1.Rerank/Rerank");
  EXPECT_EQ(GrpcMethodFor(Endpoint::kKServe), "inference.GRPCInferenceService/ModelInfer");
  EXPECT_EQ(GrpcMethodFor(Endpoint::kCohereRerank), "");
}

TEST(GrpcTransportCreate, RejectsWhatGrpcCannotSend) {
  AsioEventLoop loop;
  GrpcTransportOptions o;
  EXPECT_EQ(GrpcTransport::Create(&loop, o).status().code(), absl::StatusCode::kInvalidArgument);  // no workloads
  o.workloads = {Workload("q", {"d"})};
  o.max_in_flight = 0;
  EXPECT_EQ(GrpcTransport::Create(&loop, o).status().code(), absl::StatusCode::kInvalidArgument);
  o.max_in_flight = 1;
  for (Endpoint e : {Endpoint::kCohereRerank, Endpoint::kTemplate}) {
    o.endpoint = e;
    EXPECT_EQ(GrpcTransport::Create(&loop, o).status().code(), absl::StatusCode::kInvalidArgument);
  }
  o.endpoint = Endpoint::kKServe;
  EXPECT_EQ(GrpcTransport::Create(&loop, o).status().code(), absl::StatusCode::kInvalidArgument);  // no model
  o.model = "m";
  EXPECT_TRUE(GrpcTransport::Create(&loop, o).ok());
}

// tei.v1 Rerank and ModelInfer on one port. Query "shed": UNAVAILABLE; "hang": no answer until the
// call is cancelled. OK answers carry a server-timing trailer. Counts the calls in progress.
class FakeServer {
 public:
  FakeServer() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&rerank_);
    builder.RegisterService(&kserve_);
    server_ = builder.BuildAndStart();
  }
  ~FakeServer() { server_->Shutdown(std::chrono::system_clock::now()); }
  int port() const { return port_; }
  int max_in_progress() const { return state_.max_in_progress.load(); }
  int calls() const { return state_.calls.load(); }
  int cancelled_calls() const { return state_.cancelled.load(); }  // "hang" calls the client cancelled

 private:
  struct State {
    std::atomic<int> in_progress{0}, max_in_progress{0}, calls{0}, cancelled{0};
    grpc::Status Answer(grpc::ServerContext* context, const std::string& query) {
      ++calls;
      const int now = ++in_progress;
      int seen = max_in_progress.load();
      while (now > seen && !max_in_progress.compare_exchange_weak(seen, now)) {
      }
      grpc::Status status = grpc::Status::OK;
      if (query == "shed") {
        status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "shed");
      } else if (query == "hang") {
        // Polls for the cancellation the client sends (the sync API has no cancellation callback).
        if (WaitFor([context] { return context->IsCancelled(); }, std::chrono::seconds(5))) ++cancelled;
        status = grpc::Status(grpc::StatusCode::CANCELLED, "gone");
      } else {
        // Held briefly so that the client's calls overlap and the in-flight bound shows.
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        context->AddTrailingMetadata("server-timing",
                                     "tokenize;dur=1.000, queue;dur=2.000, inference;dur=3.000, "
                                     "postprocess;dur=0.500, total;dur=6.5");
      }
      --in_progress;
      return status;
    }
  };
  class RerankImpl final : public tei::v1::Rerank::Service {
   public:
    explicit RerankImpl(State* state) : state_(state) {}
    grpc::Status Rerank(grpc::ServerContext* context, const tei::v1::RerankRequest* request,
                        tei::v1::RerankResponse* response) override {
      for (int i = 0; i < request->texts_size(); ++i) response->add_ranks()->set_index(i);
      return state_->Answer(context, request->query());
    }
    State* state_;
  };
  class KServe final : public inference::GRPCInferenceService::Service {
   public:
    explicit KServe(State* state) : state_(state) {}
    grpc::Status ModelInfer(grpc::ServerContext* context, const inference::ModelInferRequest* request,
                            inference::ModelInferResponse* response) override {
      response->set_model_name(request->model_name());
      const std::string& raw = request->raw_input_contents_size() > 0 ? request->raw_input_contents(0) : "";
      return state_->Answer(context, raw.size() > 4 ? raw.substr(4, raw.size() - 4) : "");
    }
    State* state_;
  };

  State state_;
  RerankImpl rerank_{&state_};
  KServe kserve_{&state_};
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// Sends `n` requests on a fresh loop and runs it until every done callback ran.
std::vector<TransportResult> SendAll(GrpcTransportOptions o, size_t n, StageTotals* stages = nullptr) {
  AsioEventLoop loop;
  auto transport = GrpcTransport::Create(&loop, o);
  EXPECT_TRUE(transport.ok()) << transport.status();
  std::vector<TransportResult> results;
  loop.RunAt(0, [&] {
    for (size_t i = 0; i < n; ++i) {
      (*transport)->Send(i, [&, n](const TransportResult& r) {
        results.push_back(r);
        if (results.size() == n) loop.Stop();
      });
    }
  });
  loop.Run();
  if (stages != nullptr) *stages = (*transport)->stage_totals();
  transport->reset();
  return results;
}

TEST(GrpcTransport, RerankCallsAnswerOnceEachWithinTheInFlightBound) {
  FakeServer server;
  GrpcTransportOptions o;
  o.port = static_cast<uint16_t>(server.port());
  o.workloads = {Workload("q", {"a", "b"}), Workload("shed", {"a"}), Workload("q2", {"c"})};
  o.max_in_flight = 2;
  StageTotals stages;
  const auto results = SendAll(o, 12, &stages);
  ASSERT_EQ(results.size(), 12u);
  int ok = 0, shed = 0;
  for (const TransportResult& r : results) {
    EXPECT_EQ(r.http_status, 0);
    if (r.ok()) {
      ++ok;
      EXPECT_GT(r.response_bytes, 0u);
    } else {
      ++shed;
      EXPECT_EQ(r.grpc_status, 14);
      EXPECT_EQ(r.error, "grpc UNAVAILABLE");
    }
  }
  EXPECT_EQ(ok, 8);
  EXPECT_EQ(shed, 4);
  EXPECT_EQ(server.calls(), 12);
  EXPECT_LE(server.max_in_progress(), 2);
  // Every OK answer's trailer, none of the shed ones'.
  EXPECT_DOUBLE_EQ(stages["inference"].count, 8);
  EXPECT_NEAR(stages["inference"].sum_seconds, 8 * 0.003, 1e-9);
  EXPECT_EQ(stages.count("total"), 0u);
}

TEST(GrpcTransport, ModelInferReachesTheServer) {
  FakeServer server;
  GrpcTransportOptions o;
  o.port = static_cast<uint16_t>(server.port());
  o.endpoint = Endpoint::kKServe;
  o.model = "m";
  o.workloads = {Workload("q", {"a"}), Workload("shed", {"b"})};
  o.max_in_flight = 4;
  const auto results = SendAll(o, 4);
  ASSERT_EQ(results.size(), 4u);
  int ok = 0;
  for (const TransportResult& r : results) ok += r.ok() ? 1 : 0;
  EXPECT_EQ(ok, 2);
}

TEST(GrpcTransport, NoServerIsUnavailableNotAHang) {
  // A port nothing listens on: bind one, note it, close it.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  close(fd);
  const int port = ntohs(addr.sin_port);
  GrpcTransportOptions o;
  o.port = static_cast<uint16_t>(port);
  o.workloads = {Workload("q", {"a"})};
  o.timeout_ms = 5000;
  const auto results = SendAll(o, 2);
  ASSERT_EQ(results.size(), 2u);
  for (const TransportResult& r : results) {
    EXPECT_FALSE(r.ok());
    EXPECT_TRUE(r.grpc_status == 14 || r.grpc_status == 4) << r.error;
  }
}

TEST(GrpcTransport, DestroyingItCancelsCallsStillOutWithoutCallingBack) {
  FakeServer server;
  GrpcTransportOptions o;
  o.port = static_cast<uint16_t>(server.port());
  o.workloads = {Workload("hang", {"a"})};
  o.max_in_flight = 2;
  AsioEventLoop loop;
  auto transport = GrpcTransport::Create(&loop, o);
  ASSERT_TRUE(transport.ok());
  int called = 0;
  loop.RunAt(0, [&] {
    for (int i = 0; i < 3; ++i) (*transport)->Send(i, [&](const TransportResult&) { ++called; });
  });
  // Stop once both calls reached the server (the third waits for a free slot).
  std::function<void()> poll = [&] {
    if (server.calls() >= 2) return loop.Stop();
    loop.RunAt(loop.Now() + 1'000'000, poll);
  };
  loop.RunAt(0, poll);
  loop.Run();
  transport->reset();
  EXPECT_EQ(called, 0);
  // The server saw both calls cancelled (an uncancelled "hang" call ends after 5 s uncancelled).
  EXPECT_TRUE(WaitFor([&] { return server.cancelled_calls() >= 2; }, std::chrono::seconds(10),
                      "the server to see both calls cancelled"));
}

TEST(GrpcTransport, DrivesAClosedLoopRun) {
  FakeServer server;
  GrpcTransportOptions o;
  o.port = static_cast<uint16_t>(server.port());
  o.workloads = {Workload("q", {"a"}), Workload("shed", {"a"})};
  o.max_in_flight = 2;
  AsioEventLoop loop;
  auto transport = GrpcTransport::Create(&loop, o);
  ASSERT_TRUE(transport.ok());
  LoadOptions lo;
  lo.concurrency = 2;
  lo.warmup_ns = 0;
  lo.duration_ns = 300'000'000;
  auto r = RunLoad(&loop, transport->get(), lo);
  transport->reset();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->completed, 0u);
  ASSERT_EQ(r->errors.count("grpc UNAVAILABLE"), 1u);
  EXPECT_EQ(r->shed_latency.count(), r->errors.at("grpc UNAVAILABLE"));
}

}  // namespace
}  // namespace tide::loadgen
