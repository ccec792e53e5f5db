// Black-box tests of tide's gRPC edge against the real `tide serve`, with a C++ gRPC
// client built from the project's protos (proto/): every RPC of KServe v2 GRPCInferenceService (and
// Triton's extensions), tei.v1 and grpc.health.v1; every error code; the client's deadline;
// cancellation; the message size limit; the stream; 2x overload where every call gets exactly one
// answer; SIGTERM drain. One server for most tests:
//   --api-key secret --admin-api-key adm1n --max-concurrent-requests 4 --grpc-max-message-bytes 65536
//   m     tiny-bert, max_queue_delay 1 ms (TEI's default model: first by name)
//   slow  tiny-bert, max_queue_delay 400 ms: a call's rows wait long enough for deadlines,
//         cancellation and overload to happen while they are queued
//   verdict  tiny-bert as a classifier whose breaker opens when a call fills its 2-row queue past
//         half, then answers breaker_default_result [-1.5] marked degraded (as in the guard test)
// Separate servers: the repository RPCs (explicit model control), and a canary whose sticky_header
// is read from gRPC metadata (two versions of m).
// Skips (with the reason) when tide was built without gRPC.
#include "gtest/gtest.h"

#ifndef TIDE_HAVE_GRPC

TEST(ServeGrpcTest, Skipped) {
  GTEST_SKIP() << "tide was built without gRPC (libgrpc++-dev / grpc_cpp_plugin missing; run scripts/bootstrap.sh)";
}

#else

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "blackbox_support.h"
#include "raw_socket.h"
#include "gmock/gmock.h"
#include "grpc_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "health.grpc.pb.h"
#include "tei.grpc.pb.h"

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Steady = std::chrono::steady_clock;

std::string Common(int delay_us) {
  return "backend: \"onnxruntime\"\nmax_batch_size: 16\n"
         "parameters { key: \"max_sequence_length\" value { string_value: \"64\" } }\n"
         "dynamic_batching { max_queue_delay_microseconds: " +
         std::to_string(delay_us) + " }\n";
}

std::string Trailer(const grpc::ClientContext& ctx, const std::string& key) {
  const auto& md = ctx.GetServerTrailingMetadata();
  auto it = md.find(key);
  return it == md.end() ? "" : std::string(it->second.data(), it->second.size());
}

inference::ModelInferRequest TextInfer(const std::string& model, const std::string& query,
                                       const std::vector<std::string>& docs, const std::string& id = "") {
  inference::ModelInferRequest r;
  r.set_model_name(model);
  r.set_id(id);
  auto* text = r.add_inputs();
  text->set_name("text");
  text->set_datatype("BYTES");
  text->add_shape(static_cast<int64_t>(docs.size()));
  auto* pair = r.add_inputs();
  pair->set_name("text_pair");
  pair->set_datatype("BYTES");
  pair->add_shape(static_cast<int64_t>(docs.size()));
  for (const std::string& d : docs) {
    text->mutable_contents()->add_bytes_contents(query);
    pair->mutable_contents()->add_bytes_contents(d);
  }
  return r;
}

std::string LengthPrefixed(const std::vector<std::string>& elements) {
  std::string out;
  for (const std::string& e : elements) {
    const uint32_t n = static_cast<uint32_t>(e.size());
    char b[4];
    std::memcpy(b, &n, 4);
    out.append(b, 4);
    out.append(e);
  }
  return out;
}

class ServeGrpcTest : public SharedServerSuite<ServeGrpcTest> {
 protected:
  static void SetUpTestSuite() {
    grpc_port_ = FreePort();
    StartSharedServer(
        [](const fs::path& repository) {
          absl::Status s = AddTinyBert(repository, "m", Common(1000));
          if (s.ok()) s = AddTinyBert(repository, "slow", Common(400000));
          if (s.ok()) {
            s = AddTinyBert(repository, "verdict",
                            "backend: \"onnxruntime\"\nmax_batch_size: 16\n"
                            "parameters { key: \"max_sequence_length\" value { string_value: \"64\" } }\n"
                            "dynamic_batching { max_queue_delay_microseconds: 1000\n"
                            "  default_queue_policy { max_queue_size: 2 } }\n"
                            "parameters { key: \"task\" value { string_value: \"classify\" } }\n"
                            "parameters { key: \"breaker_queue_fullness\" value { string_value: \"0.5\" } }\n"
                            "parameters { key: \"breaker_open_s\" value { string_value: \"60\" } }\n"
                            "parameters { key: \"breaker_default_result\" value { string_value: \"[-1.5]\" } }\n");
          }
          return s;
        },
        {"--grpc-port", std::to_string(grpc_port_), "--api-key", "secret", "--admin-api-key", "adm1n",
         "--max-concurrent-requests", "4", "--grpc-max-message-bytes", "65536", "--log-level", "warn"});
  }

  void SetUp() override {
    SharedServerSuite::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_THAT(server().Stdout(), HasSubstr("tide: grpc listening on 127.0.0.1:" + std::to_string(grpc_port_)));
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port_), grpc::InsecureChannelCredentials());
    kserve_ = inference::GRPCInferenceService::NewStub(channel_);
    rerank_ = tei::v1::Rerank::NewStub(channel_);
    info_ = tei::v1::Info::NewStub(channel_);
    tokenize_ = tei::v1::Tokenize::NewStub(channel_);
    health_ = grpc::health::v1::Health::NewStub(channel_);
  }

  // A context with the API key and a generous deadline (a loaded test machine).
  static std::unique_ptr<grpc::ClientContext> Ctx(bool key = true,
                                                   std::chrono::milliseconds timeout = std::chrono::seconds(30),
                                                   const char* bearer = "secret") {
    auto ctx = std::make_unique<grpc::ClientContext>();
    if (key) ctx->AddMetadata("authorization", std::string("Bearer ") + bearer);
    ctx->set_deadline(std::chrono::system_clock::now() + timeout);
    return ctx;
  }

  static std::string Metrics() { return NewClient()->Get("/metrics").body; }

  static inline int grpc_port_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> kserve_;
  std::unique_ptr<tei::v1::Rerank::Stub> rerank_;
  std::unique_ptr<tei::v1::Info::Stub> info_;
  std::unique_ptr<tei::v1::Tokenize::Stub> tokenize_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

TEST_F(ServeGrpcTest, HealthAndServerMetadataNeedNoKey) {
  {
    inference::ServerLiveResponse r;
    auto ctx = Ctx(false);
    ASSERT_TRUE(kserve_->ServerLive(ctx.get(), {}, &r).ok());
    EXPECT_TRUE(r.live());
  }
  {
    inference::ServerReadyResponse r;
    auto ctx = Ctx(false);
    ASSERT_TRUE(kserve_->ServerReady(ctx.get(), {}, &r).ok());
    EXPECT_TRUE(r.ready());
  }
  {
    inference::ModelReadyRequest req;
    req.set_name("slow");
    inference::ModelReadyResponse r;
    auto ctx = Ctx(false);
    ASSERT_TRUE(kserve_->ModelReady(ctx.get(), req, &r).ok());
    EXPECT_TRUE(r.ready());
    req.set_name("absent");
    auto ctx2 = Ctx(false);
    EXPECT_EQ(kserve_->ModelReady(ctx2.get(), req, &r).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    inference::ServerMetadataResponse r;
    auto ctx = Ctx(false);
    ASSERT_TRUE(kserve_->ServerMetadata(ctx.get(), {}, &r).ok());
    EXPECT_EQ(r.name(), "tide");
    EXPECT_FALSE(r.version().empty());
  }
  {
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse r;
    auto ctx = Ctx(false);
    ASSERT_TRUE(health_->Check(ctx.get(), req, &r).ok());
    EXPECT_EQ(r.status(), grpc::health::v1::HealthCheckResponse::SERVING);
    req.set_service("inference.GRPCInferenceService");
    auto ctx2 = Ctx(false);
    ASSERT_TRUE(health_->Check(ctx2.get(), req, &r).ok());
    EXPECT_EQ(r.status(), grpc::health::v1::HealthCheckResponse::SERVING);
    req.set_service("no.such.Service");
    auto ctx3 = Ctx(false);
    EXPECT_EQ(health_->Check(ctx3.get(), req, &r).error_code(), grpc::StatusCode::NOT_FOUND);
    // Kubernetes' probe names: liveness and readiness.
    for (const char* name : {"liveness", "readiness"}) {
      req.set_service(name);
      auto c = Ctx(false);
      ASSERT_TRUE(health_->Check(c.get(), req, &r).ok()) << name;
      EXPECT_EQ(r.status(), grpc::health::v1::HealthCheckResponse::SERVING) << name;
    }
  }
  {
    // Watch: the status at once; an unknown name streams SERVICE_UNKNOWN (not an error).
    for (const auto& [name, want] :
         std::vector<std::pair<std::string, grpc::health::v1::HealthCheckResponse::ServingStatus>>{
             {"", grpc::health::v1::HealthCheckResponse::SERVING},
             {"tei.v1.Rerank", grpc::health::v1::HealthCheckResponse::SERVING},
             {"no.such.Service", grpc::health::v1::HealthCheckResponse::SERVICE_UNKNOWN}}) {
      grpc::health::v1::HealthCheckRequest req;
      req.set_service(name);
      auto ctx = Ctx(false, std::chrono::seconds(10));
      auto reader = health_->Watch(ctx.get(), req);
      grpc::health::v1::HealthCheckResponse r;
      ASSERT_TRUE(reader->Read(&r)) << name;
      EXPECT_EQ(r.status(), want) << name;
      ctx->TryCancel();
      while (reader->Read(&r)) {
      }
      EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED) << name;
    }
  }
}

TEST_F(ServeGrpcTest, ModelMetadataConfigStatisticsAndRepository) {
  {
    inference::ModelMetadataRequest req;
    req.set_name("m");
    inference::ModelMetadataResponse r;
    auto no_key = Ctx(false);
    EXPECT_EQ(kserve_->ModelMetadata(no_key.get(), req, &r).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    auto ctx = Ctx();
    ASSERT_TRUE(kserve_->ModelMetadata(ctx.get(), req, &r).ok());
    EXPECT_EQ(r.name(), "m");
    EXPECT_EQ(r.platform(), "onnxruntime_onnx");
    std::vector<std::string> inputs;
    for (const auto& t : r.inputs()) inputs.push_back(t.name());
    EXPECT_THAT(inputs, ::testing::IsSupersetOf({"input_ids", "text", "text_pair"}));
    ASSERT_EQ(r.outputs_size(), 1);
    EXPECT_EQ(r.outputs(0).datatype(), "FP32");
  }
  {
    inference::ModelConfigRequest req;
    req.set_name("slow");
    inference::ModelConfigResponse r;
    auto ctx = Ctx();
    ASSERT_TRUE(kserve_->ModelConfig(ctx.get(), req, &r).ok());
    EXPECT_EQ(r.config().name(), "slow");
    EXPECT_EQ(r.config().max_batch_size(), 16);
  }
  {
    inference::ModelStatisticsResponse r;
    auto ctx = Ctx();
    ASSERT_TRUE(kserve_->ModelStatistics(ctx.get(), {}, &r).ok());
    EXPECT_EQ(r.model_stats_size(), 3);
    inference::ModelStatisticsRequest req;
    req.set_name("absent");
    auto ctx2 = Ctx();
    EXPECT_EQ(kserve_->ModelStatistics(ctx2.get(), req, &r).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    inference::RepositoryIndexResponse r;
    // The repository RPCs are admin RPCs: the tenant's key is forbidden, the admin key passes.
    auto tenant = Ctx();
    EXPECT_EQ(kserve_->RepositoryIndex(tenant.get(), {}, &r).error_code(), grpc::StatusCode::PERMISSION_DENIED);
    auto ctx = Ctx(true, std::chrono::seconds(30), "adm1n");
    ASSERT_TRUE(kserve_->RepositoryIndex(ctx.get(), {}, &r).ok());
    ASSERT_EQ(r.models_size(), 3);
    EXPECT_EQ(r.models(0).state(), "READY");
    // Model control mode none: load and unload are refused as Triton does (explicit mode only).
    inference::RepositoryModelLoadRequest load;
    load.set_model_name("m");
    inference::RepositoryModelLoadResponse lr;
    auto ctx2 = Ctx(true, std::chrono::seconds(30), "adm1n");
    EXPECT_EQ(kserve_->RepositoryModelLoad(ctx2.get(), load, &lr).error_code(), grpc::StatusCode::PERMISSION_DENIED);
    inference::RepositoryModelUnloadRequest unload;
    unload.set_model_name("m");
    inference::RepositoryModelUnloadResponse ur;
    auto ctx3 = Ctx(true, std::chrono::seconds(30), "adm1n");
    EXPECT_EQ(kserve_->RepositoryModelUnload(ctx3.get(), unload, &ur).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
}

TEST_F(ServeGrpcTest, ModelInferTextMatchesHttpAndEchoesTheId) {
  const std::vector<std::string> docs = {"The giant panda is a bear.", "Paris is in France."};
  inference::ModelInferResponse r;
  auto ctx = Ctx();
  const grpc::Status s = kserve_->ModelInfer(ctx.get(), TextInfer("m", "what is a panda?", docs, "req-7"), &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(r.id(), "req-7");
  EXPECT_EQ(r.model_name(), "m");
  EXPECT_EQ(r.model_version(), "1");
  ASSERT_EQ(r.outputs_size(), 1);
  EXPECT_EQ(r.outputs(0).datatype(), "FP32");
  EXPECT_THAT(r.outputs(0).shape(), ::testing::ElementsAre(2, 1));
  ASSERT_EQ(r.outputs(0).contents().fp32_contents_size(), 2);
  EXPECT_EQ(r.raw_output_contents_size(), 0) << "typed contents in, typed contents out";
  // Timing trailers and the answering version, as HTTP's headers.
  EXPECT_EQ(Trailer(*ctx, "x-tide-model-version"), "1");
  EXPECT_FALSE(Trailer(*ctx, "x-total-time").empty());
  EXPECT_THAT(Trailer(*ctx, "server-timing"), HasSubstr("inference;dur="));

  // The same pairs over HTTP KServe JSON: the same logits.
  const nlohmann::json body = {
      {"inputs",
       {{{"name", "text"}, {"datatype", "BYTES"}, {"shape", {2}}, {"data", {"what is a panda?", "what is a panda?"}}},
        {{"name", "text_pair"}, {"datatype", "BYTES"}, {"shape", {2}}, {"data", docs}}}}};
  const auto http = NewClient()->Post("/v2/models/m/infer", body.dump(), {{"Authorization", "Bearer secret"}});
  ASSERT_EQ(http.status, 200) << http.body;
  const nlohmann::json out = ParseJson(http.body);
  EXPECT_NEAR(out["outputs"][0]["data"][0].get<double>(), r.outputs(0).contents().fp32_contents(0), 1e-5);
  EXPECT_NEAR(out["outputs"][0]["data"][1].get<double>(), r.outputs(0).contents().fp32_contents(1), 1e-5);

  // Raw in, raw out (what tritonclient.grpc sends and reads): the same numbers.
  inference::ModelInferRequest raw = TextInfer("m", "", {});
  raw.mutable_inputs(0)->clear_shape();
  raw.mutable_inputs(0)->clear_contents();
  raw.mutable_inputs(0)->add_shape(2);
  raw.mutable_inputs(1)->clear_shape();
  raw.mutable_inputs(1)->clear_contents();
  raw.mutable_inputs(1)->add_shape(2);
  raw.add_raw_input_contents(LengthPrefixed({"what is a panda?", "what is a panda?"}));
  raw.add_raw_input_contents(LengthPrefixed(docs));
  inference::ModelInferResponse rr;
  auto ctx2 = Ctx();
  ASSERT_TRUE(kserve_->ModelInfer(ctx2.get(), raw, &rr).ok());
  ASSERT_EQ(rr.raw_output_contents_size(), 1);
  ASSERT_EQ(rr.raw_output_contents(0).size(), 8u);
  float f[2];
  std::memcpy(f, rr.raw_output_contents(0).data(), 8);
  EXPECT_NEAR(f[0], r.outputs(0).contents().fp32_contents(0), 1e-5);
  EXPECT_NEAR(f[1], r.outputs(0).contents().fp32_contents(1), 1e-5);

  // Token tensors with a requested output.
  inference::ModelInferRequest tokens;
  tokens.set_model_name("m");
  auto* ids = tokens.add_inputs();
  ids->set_name("input_ids");
  ids->set_datatype("INT64");
  ids->add_shape(1);
  ids->add_shape(4);
  for (int64_t v : {101, 2000, 2001, 102}) ids->mutable_contents()->add_int64_contents(v);
  tokens.add_outputs()->set_name(r.outputs(0).name());
  inference::ModelInferResponse tr;
  auto ctx3 = Ctx();
  const grpc::Status ts = kserve_->ModelInfer(ctx3.get(), tokens, &tr);
  ASSERT_TRUE(ts.ok()) << ts.error_message();
  EXPECT_EQ(tr.outputs(0).contents().fp32_contents_size(), 1);
}

TEST_F(ServeGrpcTest, ErrorCodesComeFromTheOneTable) {
  inference::ModelInferResponse r;
  {
    auto ctx = Ctx(false);
    const grpc::Status s = kserve_->ModelInfer(ctx.get(), TextInfer("m", "q", {"d"}), &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  }
  {
    auto wrong = std::make_unique<grpc::ClientContext>();
    wrong->AddMetadata("authorization", "Bearer wrong");
    EXPECT_EQ(kserve_->ModelInfer(wrong.get(), TextInfer("m", "q", {"d"}), &r).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    auto ctx = Ctx();
    const grpc::Status s = kserve_->ModelInfer(ctx.get(), TextInfer("absent", "q", {"d"}), &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("absent"));
  }
  {
    auto ctx = Ctx();
    inference::ModelInferRequest bad = TextInfer("m", "q", {"d"});
    bad.mutable_inputs(1)->mutable_contents()->add_bytes_contents("extra");
    const grpc::Status s = kserve_->ModelInfer(ctx.get(), bad, &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("inputs[1].contents.bytes_contents"));
    EXPECT_EQ(Trailer(*ctx, "x-tide-error-type"), "validation");
  }
  {
    auto ctx = Ctx();
    inference::ModelInferRequest bad = TextInfer("m", "q", {"d"});
    bad.add_outputs()->set_name("embeddings");
    EXPECT_EQ(kserve_->ModelInfer(ctx.get(), bad, &r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    auto ctx = Ctx();
    ctx->AddMetadata("x-priority", "high");
    EXPECT_EQ(kserve_->ModelInfer(ctx.get(), TextInfer("m", "q", {"d"}), &r).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    // TEI: an empty query, as HTTP's 422.
    tei::v1::RerankRequest req;
    req.add_texts("d");
    tei::v1::RerankResponse rr;
    auto ctx = Ctx();
    const grpc::Status s = rerank_->Rerank(ctx.get(), req, &rr);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("'query' must not be empty"));
  }
  {
    // TEI: truncate=false (proto3's default) refuses an over-long pair, as TEI does.
    tei::v1::RerankRequest req;
    req.set_query("q");
    std::string long_text;
    for (int i = 0; i < 200; ++i) long_text += "word ";
    req.add_texts(long_text);
    tei::v1::RerankResponse rr;
    auto ctx = Ctx();
    EXPECT_EQ(rerank_->Rerank(ctx.get(), req, &rr).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    req.set_truncate(true);
    auto ctx2 = Ctx();
    EXPECT_TRUE(rerank_->Rerank(ctx2.get(), req, &rr).ok());
  }
}

// While a model's breaker is open, ModelInfer answers its fallback marked degraded: the response
// parameter "degraded" and the x-tide-degraded trailer (no timing trailers).
TEST_F(ServeGrpcTest, DegradedAnswersAreFlagged) {
  inference::ModelInferResponse first;
  auto ctx = Ctx();
  const grpc::Status s = kserve_->ModelInfer(ctx.get(), TextInfer("verdict", "panda", {"a", "b", "c"}), &first);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(Trailer(*ctx, "x-tide-degraded"), "");
  EXPECT_EQ(first.parameters().count("degraded"), 0u);

  inference::ModelInferResponse r;
  auto ctx2 = Ctx();
  const grpc::Status s2 = kserve_->ModelInfer(ctx2.get(), TextInfer("verdict", "panda", {"bears", "cities"}, "q1"), &r);
  ASSERT_TRUE(s2.ok()) << s2.error_message();
  EXPECT_EQ(Trailer(*ctx2, "x-tide-degraded"), "default");
  EXPECT_EQ(Trailer(*ctx2, "x-total-time"), "");
  ASSERT_EQ(r.parameters().count("degraded"), 1u);
  EXPECT_TRUE(r.parameters().at("degraded").bool_param());
  EXPECT_EQ(r.id(), "q1");
  ASSERT_EQ(r.outputs(0).contents().fp32_contents_size(), 2);
  EXPECT_EQ(r.outputs(0).contents().fp32_contents(0), -1.5f);
}

TEST_F(ServeGrpcTest, OversizedMessageIsRefusedResourceExhausted) {
  std::vector<std::string> docs(40, std::string(2000, 'x'));  // ~80 KB > 64 KiB
  inference::ModelInferResponse r;
  auto ctx = Ctx();
  const grpc::Status s = kserve_->ModelInfer(ctx.get(), TextInfer("m", "q", docs), &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("larger than max"));
  // The server carries on.
  auto ctx2 = Ctx();
  EXPECT_TRUE(kserve_->ModelInfer(ctx2.get(), TextInfer("m", "q", {"d"}), &r).ok());
}

TEST_F(ServeGrpcTest, TeiRerankInfoTokenizeAndRerankStream) {
  tei::v1::RerankRequest req;
  req.set_query("what is a panda?");
  req.add_texts("Paris is in France.");
  req.add_texts("The giant panda is a bear.");
  req.set_truncate(true);
  req.set_return_text(true);
  tei::v1::RerankResponse r;
  auto ctx = Ctx();
  const grpc::Status s = rerank_->Rerank(ctx.get(), req, &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(r.ranks_size(), 2);
  EXPECT_GE(r.ranks(0).score(), r.ranks(1).score());
  EXPECT_EQ(r.ranks(0).text(), req.texts(r.ranks(0).index()));
  EXPECT_GT(r.metadata().compute_tokens(), 0u);
  EXPECT_GT(r.metadata().total_time_ns(), 0u);
  EXPECT_EQ(Trailer(*ctx, "x-tide-model-version"), "1");

  // The same request over HTTP /rerank: the same scores.
  const nlohmann::json body = {{"query", req.query()}, {"texts", {req.texts(0), req.texts(1)}}};
  const auto http = NewClient()->Post("/rerank", body.dump(), {{"Authorization", "Bearer secret"}});
  ASSERT_EQ(http.status, 200) << http.body;
  const nlohmann::json ranks = ParseJson(http.body);
  for (const auto& rank : r.ranks()) {
    for (const auto& h : ranks) {
      if (h["index"] == rank.index()) EXPECT_NEAR(h["score"].get<double>(), rank.score(), 1e-5);
    }
  }

  // RerankStream: one text per message, one answer.
  auto sctx = Ctx();
  tei::v1::RerankResponse sr;
  auto writer = rerank_->RerankStream(sctx.get(), &sr);
  for (const std::string& t : {req.texts(0), req.texts(1)}) {
    tei::v1::RerankStreamRequest m;
    m.set_query(req.query());
    m.set_text(t);
    m.set_truncate(true);
    ASSERT_TRUE(writer->Write(m));
  }
  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  ASSERT_EQ(sr.ranks_size(), 2);
  EXPECT_EQ(sr.ranks(0).index(), r.ranks(0).index());
  EXPECT_NEAR(sr.ranks(0).score(), r.ranks(0).score(), 1e-5);

  tei::v1::InfoResponse info;
  auto ictx = Ctx();
  ASSERT_TRUE(info_->Info(ictx.get(), {}, &info).ok());
  EXPECT_EQ(info.model_id(), "m");
  EXPECT_EQ(info.model_type(), tei::v1::MODEL_TYPE_RERANKER);
  EXPECT_EQ(info.max_input_length(), 64u);

  tei::v1::EncodeRequest enc;
  enc.set_inputs("hello world");
  enc.set_add_special_tokens(true);
  tei::v1::EncodeResponse tokens;
  auto tctx = Ctx();
  ASSERT_TRUE(tokenize_->Tokenize(tctx.get(), enc, &tokens).ok());
  ASSERT_GE(tokens.tokens_size(), 3);
  EXPECT_TRUE(tokens.tokens(0).special());
  EXPECT_TRUE(tokens.tokens(tokens.tokens_size() - 1).special());
}

// tei.v1 Predict / PredictPair (as POST /predict), Decode (as POST /decode), the one-at-a-time
// streams, and Embed on a model that is not an embedding model.
TEST_F(ServeGrpcTest, TeiPredictDecodeStreamsAndEmbed) {
  auto predict = tei::v1::Predict::NewStub(channel_);
  auto embed = tei::v1::Embed::NewStub(channel_);
  {
    tei::v1::PredictRequest req;
    req.set_inputs("hello world");
    req.set_truncate(true);
    tei::v1::PredictResponse r;
    auto ctx = Ctx();
    const grpc::Status s = predict->Predict(ctx.get(), req, &r);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(r.predictions_size(), 1);  // a one-label reranker: sigmoid
    EXPECT_GT(r.predictions(0).score(), 0.0f);
    EXPECT_LT(r.predictions(0).score(), 1.0f);
    EXPECT_GT(r.metadata().compute_tokens(), 0u);
    EXPECT_FALSE(Trailer(*ctx, "server-timing").empty());
    const auto http = NewClient()->Post("/predict", R"({"inputs": "hello world"})", {{"Authorization", "Bearer secret"}});
    ASSERT_EQ(http.status, 200) << http.body;
    const nlohmann::json h = ParseJson(http.body);
    EXPECT_EQ(h[0]["label"], r.predictions(0).label());
    EXPECT_NEAR(h[0]["score"].get<double>(), r.predictions(0).score(), 1e-5);
    auto nokey = Ctx(false);
    EXPECT_EQ(predict->Predict(nokey.get(), req, &r).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    tei::v1::PredictPairRequest req;
    req.add_inputs("what is a panda?");
    req.add_inputs("The giant panda is a bear.");
    req.set_raw_scores(true);
    tei::v1::PredictResponse r;
    auto ctx = Ctx();
    ASSERT_TRUE(predict->PredictPair(ctx.get(), req, &r).ok());
    ASSERT_EQ(r.predictions_size(), 1);
    const auto http = NewClient()->Post(
        "/predict", R"({"inputs": ["what is a panda?", "The giant panda is a bear."], "raw_scores": true})",
        {{"Authorization", "Bearer secret"}});
    ASSERT_EQ(http.status, 200) << http.body;
    EXPECT_NEAR(ParseJson(http.body)[0]["score"].get<double>(), r.predictions(0).score(), 1e-5);
    req.add_inputs("a third text");
    auto bad = Ctx();
    EXPECT_EQ(predict->PredictPair(bad.get(), req, &r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  tei::v1::EncodeRequest enc;
  enc.set_inputs("hello world");
  enc.set_add_special_tokens(true);
  tei::v1::EncodeResponse tokens;
  {
    auto ctx = Ctx();
    ASSERT_TRUE(tokenize_->Tokenize(ctx.get(), enc, &tokens).ok());
    tei::v1::DecodeRequest dec;
    for (const auto& t : tokens.tokens()) dec.add_ids(t.id());
    dec.set_skip_special_tokens(true);
    tei::v1::DecodeResponse text;
    auto dctx = Ctx();
    ASSERT_TRUE(tokenize_->Decode(dctx.get(), dec, &text).ok());
    EXPECT_EQ(text.text(), "hello world");
    dec.clear_ids();
    auto ectx = Ctx();
    EXPECT_EQ(tokenize_->Decode(ectx.get(), dec, &text).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    // TokenizeStream: answers in order, one per message.
    auto ctx = Ctx();
    auto stream = tokenize_->TokenizeStream(ctx.get());
    const std::vector<std::string> inputs = {"hello world", "a", "the giant panda"};
    for (const std::string& in : inputs) {
      tei::v1::EncodeRequest m;
      m.set_inputs(in);
      m.set_add_special_tokens(false);
      ASSERT_TRUE(stream->Write(m));
    }
    stream->WritesDone();
    std::vector<size_t> sizes, unary;
    tei::v1::EncodeResponse out;
    while (stream->Read(&out)) sizes.push_back(static_cast<size_t>(out.tokens_size()));
    ASSERT_TRUE(stream->Finish().ok());
    for (const std::string& in : inputs) {
      tei::v1::EncodeRequest m;
      m.set_inputs(in);
      auto c = Ctx();
      ASSERT_TRUE(tokenize_->Tokenize(c.get(), m, &out).ok());
      unary.push_back(static_cast<size_t>(out.tokens_size()));
    }
    EXPECT_EQ(sizes, unary);
    EXPECT_NE(unary[0], unary[1]);  // distinct answers, so the order shows
  }
  {
    // DecodeStream and PredictStream; an invalid message ends the stream with its error.
    auto ctx = Ctx();
    auto stream = tokenize_->DecodeStream(ctx.get());
    tei::v1::DecodeRequest m;
    for (const auto& t : tokens.tokens()) m.add_ids(t.id());
    m.set_skip_special_tokens(true);
    ASSERT_TRUE(stream->Write(m));
    tei::v1::DecodeResponse out;
    ASSERT_TRUE(stream->Read(&out));
    EXPECT_EQ(out.text(), "hello world");
    ASSERT_TRUE(stream->Write(tei::v1::DecodeRequest()));  // no ids
    EXPECT_FALSE(stream->Read(&out));
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);

    auto pctx = Ctx();
    auto pstream = predict->PredictStream(pctx.get());
    for (const char* in : {"first", "second"}) {
      tei::v1::PredictRequest p;
      p.set_inputs(in);
      ASSERT_TRUE(pstream->Write(p));
    }
    pstream->WritesDone();
    int answers = 0;
    tei::v1::PredictResponse pr;
    while (pstream->Read(&pr)) answers += pr.predictions_size() == 1 ? 1 : 0;
    ASSERT_TRUE(pstream->Finish().ok());
    EXPECT_EQ(answers, 2);
  }
  {
    // Embed on a server without an embedding model: 422's INVALID_ARGUMENT naming a model that is not
    // an embedding model (embeddings: tide_serve_embed_test), EmbedAll alike; EmbedSparse is not served.
    tei::v1::EmbedRequest req;
    req.set_inputs("hello");
    tei::v1::EmbedResponse r;
    auto ctx = Ctx();
    const grpc::Status s = embed->Embed(ctx.get(), req, &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("not an embedding model"));
    tei::v1::EmbedAllRequest all_req;
    all_req.set_inputs("hello");
    tei::v1::EmbedAllResponse all_resp;
    auto actx = Ctx();
    const grpc::Status all = embed->EmbedAll(actx.get(), all_req, &all_resp);
    EXPECT_EQ(all.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(all.error_message(), HasSubstr("not an embedding model"));
    auto sctx = Ctx();
    auto stream = embed->EmbedSparseStream(sctx.get());
    tei::v1::EmbedSparseRequest m;
    m.set_inputs("hello");
    stream->Write(m);
    tei::v1::EmbedSparseResponse out;
    EXPECT_FALSE(stream->Read(&out));
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNIMPLEMENTED);
  }
}

TEST_F(ServeGrpcTest, StreamAnswersEveryMessageInOrder) {
  auto ctx = Ctx();
  auto stream = kserve_->ModelStreamInfer(ctx.get());
  // Each message is a call of its own (admission included): at most --max-concurrent-requests (4)
  // are in flight at once here, so all are admitted. The first is slow, so later answers are
  // ready first and must wait for it.
  constexpr int kMessages = 4;
  for (int i = 0; i < kMessages; ++i) {
    // Message 1 is malformed, message 2 names an unknown model: answered with error_message, in place.
    const std::string model = i == 0 ? "slow" : (i == 2 ? "absent" : "m");
    inference::ModelInferRequest req = TextInfer(model, "q", {"doc " + std::to_string(i)}, "id-" + std::to_string(i));
    if (i == 1) req.mutable_inputs(0)->set_datatype("FP16");
    ASSERT_TRUE(stream->Write(req));
  }
  stream->WritesDone();
  inference::ModelStreamInferResponse answer;
  std::vector<std::string> ids, errors;
  while (stream->Read(&answer)) {
    ids.push_back(answer.infer_response().id());
    errors.push_back(answer.error_message());
  }
  const grpc::Status s = stream->Finish();
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(ids.size(), static_cast<size_t>(kMessages));
  for (int i = 0; i < kMessages; ++i) {
    EXPECT_EQ(ids[i], "id-" + std::to_string(i)) << "answers come in request order";
    if (i == 1 || i == 2) {
      EXPECT_FALSE(errors[i].empty()) << i;
    } else {
      EXPECT_TRUE(errors[i].empty()) << i << ": " << errors[i];
    }
  }
  EXPECT_THAT(errors[2], HasSubstr("absent"));
  EXPECT_THAT(errors[1], HasSubstr("FP16"));
}

TEST_F(ServeGrpcTest, DeadlineIsTidesDeadlineAndQueuedRowsAreDropped) {
  // At the deadline the core's deadline timer and gRPC's own cancellation of the server side race:
  // the rows are dropped unrun under either reason.
  const std::vector<std::string> deadline = {R"(model="slow")", R"(reason="deadline_exceeded")"};
  const std::vector<std::string> cancelled = {R"(model="slow")", R"(reason="cancelled")"};
  auto drops = [&](const std::string& m) {
    return MetricSum(m, "tide_dropped_tasks_total", deadline) + MetricSum(m, "tide_dropped_tasks_total", cancelled);
  };
  const std::string before = Metrics();
  inference::ModelInferResponse r;
  auto ctx = Ctx(true, std::chrono::milliseconds(100));
  const grpc::Status s = kserve_->ModelInfer(ctx.get(), TextInfer("slow", "q", {"a", "b"}), &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  // The server answered (its 504 is counted; 499 when gRPC's cancellation of the server side won
  // the same race, as seen on a loaded machine) and dropped the rows unrun when the deadline passed
  // (rows that waited for the 400 ms batch window would have run, not been dropped).
  double dropped = 0;
  double answered = 0;
  const std::vector<std::string> gateway = {R"(endpoint="infer")", R"(status="504")", R"(protocol="grpc")"};
  const std::vector<std::string> gone = {R"(endpoint="infer")", R"(status="499")", R"(protocol="grpc")"};
  auto answers = [&](const std::string& m) {
    return MetricSum(m, "tide_requests_total", gateway) + MetricSum(m, "tide_requests_total", gone);
  };
  std::string last;
  WaitFor(
      [&] {
        last = Metrics();
        dropped = drops(last) - drops(before);
        answered = answers(last) - answers(before);
        return dropped >= 2 && answered >= 1;
      },
      std::chrono::seconds(10));
  EXPECT_EQ(dropped, 2) << "both rows dropped at the deadline";
  std::string infer_answers;  // for the failure message: what the infer answers were counted as
  for (const std::string& line : std::vector<std::string>(absl::StrSplit(last, '\n'))) {
    if (line.starts_with("tide_requests_total{") && line.find(R"(endpoint="infer")") != std::string::npos &&
        line.find(R"(protocol="grpc")") != std::string::npos) {
      infer_answers += line + "\n";
    }
  }
  EXPECT_EQ(answered, 1) << infer_answers;
}

TEST_F(ServeGrpcTest, CancelledCallHasItsRowsDroppedUnrun) {
  const std::vector<std::string> cancelled = {R"(model="slow")", R"(reason="cancelled")"};
  const double before = MetricSum(Metrics(), "tide_dropped_tasks_total", cancelled);
  inference::ModelInferResponse r;
  auto ctx = Ctx();
  grpc::ClientContext* raw = ctx.get();
  std::thread canceller([raw] {
    // Received and queued (in the slow model's 400 ms batching window), not yet run.
    WaitFor([] { return MetricSum(Metrics(), "tide_queue_tasks", {R"(model="slow")"}) >= 3; },
            std::chrono::seconds(10));
    raw->TryCancel();
  });
  const grpc::Status s = kserve_->ModelInfer(ctx.get(), TextInfer("slow", "q", {"a", "b", "c"}), &r);
  canceller.join();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED);
  double dropped = before;
  WaitFor(
      [&] {
        dropped = MetricSum(Metrics(), "tide_dropped_tasks_total", cancelled);
        return dropped >= before + 3;
      },
      std::chrono::seconds(10));
  EXPECT_EQ(dropped, before + 3) << "the rows of a cancelled call are dropped unrun";
}

TEST_F(ServeGrpcTest, TwiceTheConcurrencyLimitGetsExactlyOneAnswerEach) {
  // --max-concurrent-requests 4; 8 calls at once on the slow model (each holds its permit ~400 ms).
  constexpr int kCalls = 8;
  std::vector<grpc::StatusCode> codes(kCalls, grpc::StatusCode::UNKNOWN);
  std::vector<std::string> retry(kCalls);
  std::vector<int> answers(kCalls, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCalls; ++i) {
    threads.emplace_back([&, i] {
      inference::ModelInferResponse r;
      auto ctx = Ctx();
      const grpc::Status s = kserve_->ModelInfer(ctx.get(), TextInfer("slow", "q", {"d" + std::to_string(i)}), &r);
      codes[i] = s.error_code();
      retry[i] = Trailer(*ctx, "retry-after");
      ++answers[i];
    });
  }
  for (auto& t : threads) t.join();
  int ok = 0, shed = 0;
  for (int i = 0; i < kCalls; ++i) {
    EXPECT_EQ(answers[i], 1);
    if (codes[i] == grpc::StatusCode::OK) ++ok;
    if (codes[i] == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++shed;
      EXPECT_EQ(retry[i], "1") << "a shed answer carries its retry hint";
    }
  }
  EXPECT_EQ(ok + shed, kCalls) << "every call is served or shed, nothing else";
  EXPECT_GE(ok, 1);
  EXPECT_GE(shed, 1);
  EXPECT_LE(ok, kCalls - 1);
}

// SIGTERM: readiness turns NOT_SERVING at once, a call in flight still gets its answer, new calls
// are refused, and the process exits 0. Its own server (it is stopped).
TEST(ServeGrpcDrainTest, SigtermDrainsGrpcWithHttp) {
  TempDir dir;
  const fs::path repo = dir.path() / "repo";
  ASSERT_TRUE(AddTinyBert(repo, "slow", Common(400000)).ok());
  const int port = FreePort();
  auto server = StartTideServe(repo, {"--grpc-port", std::to_string(port), "--shutdown-grace-ms", "5000",
                                      "--log-level", "warn"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  auto kserve = inference::GRPCInferenceService::NewStub(channel);
  // A Watch open across the drain: SERVING, then NOT_SERVING at SIGTERM, then the stream ends
  // (it does not hold the shutdown).
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext watch_ctx;
  watch_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto watch = health->Watch(&watch_ctx, {});
  grpc::health::v1::HealthCheckResponse watched;
  ASSERT_TRUE(watch->Read(&watched));
  EXPECT_EQ(watched.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  grpc::Status in_flight;
  std::thread call([&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    inference::ModelInferResponse r;
    in_flight = kserve->ModelInfer(&ctx, TextInfer("slow", "q", {"d"}), &r);
  });
  {
    // The call is queued (in the slow model's 400 ms batching window) before the signal.
    tide::testing::HttpClient http((*server)->host(), (*server)->port(), std::chrono::milliseconds(5000));
    EXPECT_TRUE(WaitFor([&] { return MetricSum(http.Get("/metrics").body, "tide_queue_tasks", {R"(model="slow")"}) >= 1; },
                        std::chrono::seconds(10), "the call to be queued"));
  }
  EXPECT_TRUE((*server)->Signal(SIGTERM).ok());
  // The signal is handled asynchronously: readiness turns NOT_SERVING.
  EXPECT_TRUE(WaitFor(
      [&] {
        grpc::ClientContext hctx;
        grpc::health::v1::HealthCheckResponse hr;
        return health->Check(&hctx, {}, &hr).ok() && hr.status() == grpc::health::v1::HealthCheckResponse::NOT_SERVING;
      },
      std::chrono::seconds(10), "readiness to turn NOT_SERVING"));
  {
    // During the grace period: health NOT_SERVING, a new call UNAVAILABLE with its retry hint.
    auto health = grpc::health::v1::Health::NewStub(channel);
    grpc::ClientContext hctx;
    grpc::health::v1::HealthCheckResponse hr;
    const grpc::Status hs = health->Check(&hctx, {}, &hr);
    EXPECT_TRUE(hs.ok()) << hs.error_code() << " " << hs.error_message();
    EXPECT_EQ(hr.status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
    // Liveness stays SERVING while draining (the process is alive: no restart).
    grpc::ClientContext lctx;
    grpc::health::v1::HealthCheckRequest live;
    live.set_service("liveness");
    ASSERT_TRUE(health->Check(&lctx, live, &hr).ok());
    EXPECT_EQ(hr.status(), grpc::health::v1::HealthCheckResponse::SERVING);
    ASSERT_TRUE(watch->Read(&watched));
    EXPECT_EQ(watched.status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    inference::ModelInferResponse r;
    const grpc::Status s = kserve->ModelInfer(&ctx, TextInfer("slow", "q", {"d"}), &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
    EXPECT_EQ(Trailer(ctx, "grpc-retry-pushback-ms"), "1000");
  }
  call.join();
  EXPECT_TRUE(in_flight.ok()) << "a call in flight at SIGTERM is answered: " << in_flight.error_message();
  EXPECT_FALSE(watch->Read(&watched)) << "no status after NOT_SERVING: " << watched.status();
  EXPECT_EQ(watch->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  auto code = (*server)->WaitExit(std::chrono::seconds(15));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

// The repository RPCs over the same controller as the HTTP repository API: explicit model
// control, the admin key, load and unload with the index following.
class ServeGrpcRepositoryTest : public SharedServerSuite<ServeGrpcRepositoryTest> {
 protected:
  static void SetUpTestSuite() {
    grpc_port_ = FreePort();
    StartSharedServer(
        [](const fs::path& repository) {
          absl::Status s = AddTinyBert(repository, "m", Common(1000));
          if (s.ok()) s = AddTinyBert(repository, "n", Common(1000));
          return s;
        },
        {"--grpc-port", std::to_string(grpc_port_), "--model-control-mode", "explicit", "--load-model", "m",
         "--admin-api-key", "admin", "--log-level", "warn"});
  }
  void SetUp() override {
    SharedServerSuite::SetUp();
    if (HasFatalFailure()) return;
    kserve_ = inference::GRPCInferenceService::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port_), grpc::InsecureChannelCredentials()));
  }
  static std::unique_ptr<grpc::ClientContext> Admin(bool key = true) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    if (key) ctx->AddMetadata("authorization", "Bearer admin");
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return ctx;
  }
  std::string StateOf(const std::string& model) {
    inference::RepositoryIndexResponse r;
    auto ctx = Admin();
    if (!kserve_->RepositoryIndex(ctx.get(), {}, &r).ok()) return "error";
    for (const auto& m : r.models()) {
      if (m.name() == model) return m.state();
    }
    return "absent";
  }
  static inline int grpc_port_ = 0;
  std::unique_ptr<inference::GRPCInferenceService::Stub> kserve_;
};

TEST_F(ServeGrpcRepositoryTest, LoadAndUnloadFollowTheIndex) {
  EXPECT_EQ(StateOf("m"), "READY");
  EXPECT_EQ(StateOf("n"), "UNAVAILABLE");  // in the repository, not loaded
  inference::RepositoryModelLoadRequest load;
  load.set_model_name("n");
  inference::RepositoryModelLoadResponse lr;
  auto no_key = Admin(false);
  EXPECT_EQ(kserve_->RepositoryModelLoad(no_key.get(), load, &lr).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  auto ctx = Admin();
  const grpc::Status loaded = kserve_->RepositoryModelLoad(ctx.get(), load, &lr);
  ASSERT_TRUE(loaded.ok()) << loaded.error_message();
  EXPECT_EQ(StateOf("n"), "READY");
  inference::ModelReadyRequest ready;
  ready.set_name("n");
  inference::ModelReadyResponse rr;
  auto ctx2 = Admin();
  ASSERT_TRUE(kserve_->ModelReady(ctx2.get(), ready, &rr).ok());
  EXPECT_TRUE(rr.ready());

  inference::RepositoryModelUnloadRequest unload;
  unload.set_model_name("n");
  inference::RepositoryModelUnloadResponse ur;
  auto ctx3 = Admin();
  const grpc::Status unloaded = kserve_->RepositoryModelUnload(ctx3.get(), unload, &ur);
  ASSERT_TRUE(unloaded.ok()) << unloaded.error_message();
  EXPECT_NE(StateOf("n"), "READY");
  load.set_model_name("absent");
  auto ctx4 = Admin();
  EXPECT_EQ(kserve_->RepositoryModelLoad(ctx4.get(), load, &lr).error_code(), grpc::StatusCode::NOT_FOUND);
}


// The load RPC's parameters.config gets the HTTP load's bounds: INVALID_ARGUMENT,
// and the served model is untouched.
TEST_F(ServeGrpcRepositoryTest, ALoadConfigOutOfBoundsIsInvalidArgumentAndChangesNothing) {
  ASSERT_EQ(StateOf("m"), "READY");
  auto load_with = [&](const std::string& config) {
    inference::RepositoryModelLoadRequest load;
    load.set_model_name("m");
    (*load.mutable_parameters())["config"].set_string_param(config);
    inference::RepositoryModelLoadResponse lr;
    auto ctx = Admin();
    return kserve_->RepositoryModelLoad(ctx.get(), load, &lr);
  };
  const grpc::Status deep = load_with(std::string(10000, '[') + std::string(10000, ']'));
  EXPECT_EQ(deep.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(deep.error_message(), ::testing::HasSubstr("parameters.config: request JSON nests"));
  const grpc::Status big = load_with(std::string(2 << 20, ' '));
  EXPECT_EQ(big.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  const grpc::Status many = load_with(R"({"backend": "onnxruntime", "instance_group": [{"count": 100000}]})");
  EXPECT_EQ(many.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(many.error_message(), ::testing::HasSubstr("instance_group[0].count: 100000 is outside 1..64"));
  const grpc::Status outside = load_with(R"({"backend": "onnxruntime", "default_model_filename": "/etc/hostname"})");
  const grpc::Status missing = load_with(R"({"backend": "onnxruntime", "default_model_filename": "absent.onnx"})");
  EXPECT_EQ(outside.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(outside.error_message(), missing.error_message());
  // A failed override leaves a whole-model UNAVAILABLE entry beside the version that still serves;
  // a plain load clears it.
  inference::RepositoryModelLoadRequest plain;
  plain.set_model_name("m");
  inference::RepositoryModelLoadResponse lr;
  auto ctx = Admin();
  ASSERT_TRUE(kserve_->RepositoryModelLoad(ctx.get(), plain, &lr).ok());
  EXPECT_EQ(StateOf("m"), "READY");
}


// A canary's sticky_header is read from gRPC metadata as from HTTP headers: one user lands on one
// version over both edges; calls without it are drawn.
class ServeGrpcStickyTest : public SharedServerSuite<ServeGrpcStickyTest> {
 protected:
  static void SetUpTestSuite() {
    grpc_port_ = FreePort();
    StartSharedServer(
        [](const fs::path& repository) -> absl::Status {
          if (absl::Status s = AddTinyBert(repository, "m", Common(1000) + "version_policy { all { } }\n"); !s.ok()) {
            return s;
          }
          std::error_code ec;
          fs::create_directories(repository / "m" / "2", ec);
          if (!ec) fs::create_symlink(fs::read_symlink(repository / "m" / "1" / "model.onnx"),
                                      repository / "m" / "2" / "model.onnx", ec);
          if (ec) return absl::InternalError("cannot add version 2: " + ec.message());
          return absl::OkStatus();
        },
        {"--grpc-port", std::to_string(grpc_port_), "--admin-api-key", "admin", "--log-level", "warn"});
  }
  void SetUp() override {
    SharedServerSuite::SetUp();
    if (HasFatalFailure()) return;
    rerank_ = tei::v1::Rerank::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port_), grpc::InsecureChannelCredentials()));
  }
  // The version that answered a tei.v1 Rerank carrying `user` in x-user-id ("" : no metadata).
  std::string GrpcVersion(const std::string& user) {
    tei::v1::RerankRequest req;
    req.set_query("what is a panda?");
    req.add_texts("a bear");
    req.add_texts("a city");
    tei::v1::RerankResponse r;
    grpc::ClientContext ctx;
    if (!user.empty()) ctx.AddMetadata("x-user-id", user);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    const grpc::Status s = rerank_->Rerank(&ctx, req, &r);
    if (!s.ok()) return "error: " + s.error_message();
    return Trailer(ctx, "x-tide-model-version");
  }
  static inline int grpc_port_ = 0;
  std::unique_ptr<tei::v1::Rerank::Stub> rerank_;
};

TEST_F(ServeGrpcStickyTest, TheCanarysStickyHeaderIsReadFromMetadata) {
  auto client = NewClient();
  auto put = client->Send("PUT", "/v2/models/m/rollout",
                          R"({"candidate": "2", "stable": "1", "mode": "canary", "percent": 50,
                              "sticky_header": "x-user-id", "guard": {"min_requests": 100000}})",
                          {{"Authorization", "Bearer admin"}, {"Content-Type", "application/json"}});
  ASSERT_EQ(put.status, 200) << put.body;
  std::map<std::string, int> users_per_version;
  for (int u = 0; u < 30; ++u) {
    const std::string user = "user-" + std::to_string(u);
    const std::string first = GrpcVersion(user);
    ASSERT_TRUE(first == "1" || first == "2") << first;
    for (int k = 0; k < 4; ++k) ASSERT_EQ(GrpcVersion(user), first) << user;
    // The same value over HTTP lands on the same version.
    auto http = client->Post("/rerank", R"({"query": "q", "texts": ["a", "b"]})", {{"x-user-id", user}});
    ASSERT_EQ(http.status, 200) << http.body;
    EXPECT_EQ(http.header("x-tide-model-version"), first) << user;
    users_per_version[first]++;
  }
  // 30 users at 50%: both versions have users (all on one: p = 2^-29).
  EXPECT_GT(users_per_version["1"], 0);
  EXPECT_GT(users_per_version["2"], 0);
  // Without the metadata each call is drawn: both versions answer over 60 calls.
  std::map<std::string, int> drawn;
  for (int i = 0; i < 60; ++i) drawn[GrpcVersion("")]++;
  EXPECT_GT(drawn["1"], 0);
  EXPECT_GT(drawn["2"], 0);
}

}  // namespace
}  // namespace tide::blackbox

#endif  // TIDE_HAVE_GRPC
