// Black-box test: one `tide serve` answers the same requests over HTTP and gRPC alike, because both
// edges hand their decoded requests to the one request pipeline (src/pipeline): rerank scores,
// TEI predict, KServe infer outputs (Triton's classification included), TEI tokenize ids and byte
// offsets, decode, info, and the kind of an error (the same bad input gets the HTTP status and the
// gRPC code of the same kind, common/error.h's table, and the same error_type).
//   --api-key secret; m: tiny-bert (the default model)
// Skips (with the reason) when tide was built without gRPC.
#include "gtest/gtest.h"

#ifndef TIDE_HAVE_GRPC

TEST(ServeEdgesAgreeTest, Skipped) {
  GTEST_SKIP() << "tide was built without gRPC (libgrpc++-dev / grpc_cpp_plugin missing; run scripts/bootstrap.sh)";
}

#else

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "blackbox_support.h"
#include "gmock/gmock.h"
#include "grpc_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "raw_socket.h"
#include "tei.grpc.pb.h"

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const tide::testing::HeaderList kKey = {{"Authorization", "Bearer secret"}};

std::string Trailer(const grpc::ClientContext& ctx, const std::string& key) {
  const auto& md = ctx.GetServerTrailingMetadata();
  auto it = md.find(key);
  return it == md.end() ? "" : std::string(it->second.data(), it->second.size());
}

class ServeEdgesAgreeTest : public SharedServerSuite<ServeEdgesAgreeTest> {
 protected:
  static void SetUpTestSuite() {
    grpc_port_ = FreePort();
    StartSharedServer([](const fs::path& repository) { return AddTinyBert(repository, "m", TinyBertConfig()); },
                      {"--grpc-port", std::to_string(grpc_port_), "--api-key", "secret", "--log-level", "warn"});
  }

  void SetUp() override {
    SharedServerSuite::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_THAT(server().Stdout(), HasSubstr("tide: grpc listening on 127.0.0.1:" + std::to_string(grpc_port_)));
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port_), grpc::InsecureChannelCredentials());
    kserve_ = inference::GRPCInferenceService::NewStub(channel_);
    rerank_ = tei::v1::Rerank::NewStub(channel_);
    predict_ = tei::v1::Predict::NewStub(channel_);
    tokenize_ = tei::v1::Tokenize::NewStub(channel_);
    info_ = tei::v1::Info::NewStub(channel_);
  }

  static std::unique_ptr<grpc::ClientContext> Ctx(bool key = true) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    if (key) ctx->AddMetadata("authorization", "Bearer secret");
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return ctx;
  }

  // The model's output tensor name (KServe metadata, over HTTP).
  static std::string LogitsName() {
    const auto r = NewClient()->Get("/v2/models/m", kKey);
    EXPECT_EQ(r.status, 200) << r.body;
    return ParseJson(r.body)["outputs"][0]["name"].get<std::string>();
  }

  // A KServe infer of (query, document) rows as BYTES text / text_pair, over each protocol.
  static nlohmann::json HttpInfer(const std::string& model, const std::vector<std::string>& docs,
                                  const nlohmann::json& outputs) {
    nlohmann::json body = {{"id", "agree"},
                           {"inputs",
                            {{{"name", "text"},
                              {"datatype", "BYTES"},
                              {"shape", {docs.size()}},
                              {"data", std::vector<std::string>(docs.size(), "what is a panda?")}},
                             {{"name", "text_pair"}, {"datatype", "BYTES"}, {"shape", {docs.size()}}, {"data", docs}}}}};
    if (!outputs.is_null()) body["outputs"] = outputs;
    const auto r = NewClient()->Post("/v2/models/" + model + "/infer", body.dump(), kKey);
    nlohmann::json out = ParseJson(r.body);
    out["http_status"] = r.status;
    return out;
  }
  static inference::ModelInferRequest GrpcInferRequest(const std::string& model, const std::vector<std::string>& docs) {
    inference::ModelInferRequest r;
    r.set_model_name(model);
    r.set_id("agree");
    auto* text = r.add_inputs();
    text->set_name("text");
    text->set_datatype("BYTES");
    text->add_shape(static_cast<int64_t>(docs.size()));
    auto* pair = r.add_inputs();
    pair->set_name("text_pair");
    pair->set_datatype("BYTES");
    pair->add_shape(static_cast<int64_t>(docs.size()));
    for (const std::string& d : docs) {
      text->mutable_contents()->add_bytes_contents("what is a panda?");
      pair->mutable_contents()->add_bytes_contents(d);
    }
    return r;
  }

  static inline int grpc_port_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> kserve_;
  std::unique_ptr<tei::v1::Rerank::Stub> rerank_;
  std::unique_ptr<tei::v1::Predict::Stub> predict_;
  std::unique_ptr<tei::v1::Tokenize::Stub> tokenize_;
  std::unique_ptr<tei::v1::Info::Stub> info_;
};

const std::vector<std::string> kDocs = {"Paris is in France.", "The giant panda is a bear.", "Bears eat bamboo."};

TEST_F(ServeEdgesAgreeTest, RerankScoresAgree) {
  for (const bool raw : {false, true}) {
    const nlohmann::json body = {{"query", "what is a panda?"}, {"texts", kDocs}, {"raw_scores", raw}};
    const auto http = NewClient()->Post("/rerank", body.dump(), kKey);
    ASSERT_EQ(http.status, 200) << http.body;
    std::map<int, double> http_scores;
    for (const auto& rank : ParseJson(http.body)) http_scores[rank["index"].get<int>()] = rank["score"].get<double>();

    tei::v1::RerankRequest req;
    req.set_query("what is a panda?");
    for (const std::string& d : kDocs) req.add_texts(d);
    req.set_truncate(true);
    req.set_raw_scores(raw);
    tei::v1::RerankResponse r;
    auto ctx = Ctx();
    const grpc::Status s = rerank_->Rerank(ctx.get(), req, &r);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(r.ranks_size(), static_cast<int>(kDocs.size()));
    ASSERT_EQ(http_scores.size(), kDocs.size());
    for (const auto& rank : r.ranks()) {
      ASSERT_TRUE(http_scores.count(static_cast<int>(rank.index())));
      EXPECT_NEAR(http_scores[static_cast<int>(rank.index())], rank.score(), 1e-5) << "raw_scores " << raw;
    }
    EXPECT_EQ(Trailer(*ctx, "x-tide-model-version"), std::string(http.header("x-tide-model-version")));
    EXPECT_EQ(Trailer(*ctx, "x-tide-model-version"), "1");
  }
}

TEST_F(ServeEdgesAgreeTest, PredictAgrees) {
  const auto http = NewClient()->Post("/predict", R"({"inputs": "what is a panda?"})", kKey);
  ASSERT_EQ(http.status, 200) << http.body;
  const nlohmann::json h = ParseJson(http.body);
  tei::v1::PredictRequest req;
  req.set_inputs("what is a panda?");
  req.set_truncate(true);
  tei::v1::PredictResponse r;
  auto ctx = Ctx();
  const grpc::Status s = predict_->Predict(ctx.get(), req, &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(static_cast<size_t>(r.predictions_size()), h.size());
  for (int i = 0; i < r.predictions_size(); ++i) {
    EXPECT_EQ(r.predictions(i).label(), h[i]["label"].get<std::string>());
    EXPECT_NEAR(r.predictions(i).score(), h[i]["score"].get<double>(), 1e-5);
  }
}

TEST_F(ServeEdgesAgreeTest, KServeInferOutputsAndClassificationAgree) {
  const std::string logits = LogitsName();
  // The logits, then Triton's classification (top 1 as "value:index" BYTES strings).
  for (const bool classify : {false, true}) {
    nlohmann::json outputs = {{{"name", logits}}};
    if (classify) outputs[0]["parameters"] = {{"classification", 1}};
    const nlohmann::json http = HttpInfer("m", kDocs, outputs);
    ASSERT_EQ(http["http_status"], 200) << http.dump();

    inference::ModelInferRequest req = GrpcInferRequest("m", kDocs);
    auto* out = req.add_outputs();
    out->set_name(logits);
    if (classify) (*out->mutable_parameters())["classification"].set_int64_param(1);
    inference::ModelInferResponse r;
    auto ctx = Ctx();
    const grpc::Status s = kserve_->ModelInfer(ctx.get(), req, &r);
    ASSERT_TRUE(s.ok()) << s.error_message();

    EXPECT_EQ(r.model_name(), http["model_name"]);
    EXPECT_EQ(r.model_version(), http["model_version"]);
    EXPECT_EQ(r.id(), http["id"]);
    ASSERT_EQ(r.outputs_size(), 1);
    const nlohmann::json& h = http["outputs"][0];
    const auto& g = r.outputs(0);
    EXPECT_EQ(g.name(), h["name"]);
    EXPECT_EQ(g.datatype(), h["datatype"]);
    ASSERT_EQ(static_cast<size_t>(g.shape_size()), h["shape"].size());
    for (int d = 0; d < g.shape_size(); ++d) EXPECT_EQ(g.shape(d), h["shape"][d].get<int64_t>());
    if (classify) {
      EXPECT_EQ(g.datatype(), "BYTES");
      ASSERT_EQ(static_cast<size_t>(g.contents().bytes_contents_size()), kDocs.size());
      for (size_t i = 0; i < kDocs.size(); ++i) {
        const std::string& top = g.contents().bytes_contents(static_cast<int>(i));
        EXPECT_EQ(top, h["data"][i].get<std::string>());
        EXPECT_THAT(top, ::testing::EndsWith(":0"));
      }
    } else {
      EXPECT_EQ(g.datatype(), "FP32");
      ASSERT_EQ(static_cast<size_t>(g.contents().fp32_contents_size()), kDocs.size());
      for (size_t i = 0; i < kDocs.size(); ++i) {
        EXPECT_NEAR(g.contents().fp32_contents(static_cast<int>(i)), h["data"][i].get<double>(), 1e-5);
      }
    }
  }
}

TEST_F(ServeEdgesAgreeTest, TokenizeIdsAndOffsetsAgreeAndDecodeReturnsTheText) {
  const std::string text = "Hello  wonderful world!";
  const auto http = NewClient()->Post("/tokenize", nlohmann::json({{"inputs", text}}).dump(), kKey);
  ASSERT_EQ(http.status, 200) << http.body;
  const nlohmann::json h = ParseJson(http.body)[0];

  tei::v1::EncodeRequest enc;
  enc.set_inputs(text);
  enc.set_add_special_tokens(true);
  tei::v1::EncodeResponse r;
  auto ctx = Ctx();
  const grpc::Status s = tokenize_->Tokenize(ctx.get(), enc, &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(static_cast<size_t>(r.tokens_size()), h.size());
  int with_offsets = 0;
  for (int i = 0; i < r.tokens_size(); ++i) {
    const auto& g = r.tokens(i);
    const nlohmann::json& t = h[i];
    EXPECT_EQ(g.id(), t["id"].get<uint32_t>()) << i;
    EXPECT_EQ(g.text(), t["text"].get<std::string>()) << i;
    EXPECT_EQ(g.special(), t["special"].get<bool>()) << i;
    EXPECT_EQ(g.has_start(), t.contains("start")) << i;
    EXPECT_EQ(g.has_stop(), t.contains("stop")) << i;
    if (g.has_start()) {
      ++with_offsets;
      EXPECT_EQ(g.start(), t["start"].get<uint32_t>()) << i;
      EXPECT_EQ(g.stop(), t["stop"].get<uint32_t>()) << i;
      EXPECT_EQ(text.substr(g.start(), g.stop() - g.start()), g.text()) << i;
    }
  }
  EXPECT_GE(with_offsets, 3);  // every word of the text (the specials have none)

  // Decode the ids back, over both.
  std::vector<uint32_t> ids;
  for (const auto& t : r.tokens()) ids.push_back(t.id());
  const auto hd = NewClient()->Post("/decode", nlohmann::json({{"ids", ids}}).dump(), kKey);
  ASSERT_EQ(hd.status, 200) << hd.body;
  tei::v1::DecodeRequest dec;
  for (uint32_t id : ids) dec.add_ids(id);
  dec.set_skip_special_tokens(true);
  tei::v1::DecodeResponse gd;
  auto dctx = Ctx();
  ASSERT_TRUE(tokenize_->Decode(dctx.get(), dec, &gd).ok());
  EXPECT_EQ(gd.text(), ParseJson(hd.body)[0].get<std::string>());
  EXPECT_THAT(gd.text(), HasSubstr("world"));
}

TEST_F(ServeEdgesAgreeTest, InfoAgrees) {
  const auto http = NewClient()->Get("/info", kKey);
  ASSERT_EQ(http.status, 200) << http.body;
  const nlohmann::json h = ParseJson(http.body);
  tei::v1::InfoResponse r;
  auto ctx = Ctx();
  ASSERT_TRUE(info_->Info(ctx.get(), {}, &r).ok());
  EXPECT_EQ(r.model_id(), h["model_id"]);
  EXPECT_EQ(r.model_dtype(), h["model_dtype"]);
  EXPECT_EQ(r.model_type(), h["model_type"].contains("classifier") ? tei::v1::MODEL_TYPE_CLASSIFIER
                                                                    : tei::v1::MODEL_TYPE_RERANKER);
  EXPECT_EQ(r.max_concurrent_requests(), h["max_concurrent_requests"].get<uint32_t>());
  EXPECT_EQ(r.max_input_length(), h["max_input_length"].get<uint32_t>());
  EXPECT_EQ(r.max_batch_tokens(), h["max_batch_tokens"].get<uint32_t>());
  ASSERT_FALSE(h["max_batch_requests"].is_null());
  ASSERT_TRUE(r.has_max_batch_requests());
  EXPECT_EQ(r.max_batch_requests(), h["max_batch_requests"].get<uint32_t>());
  EXPECT_EQ(r.max_client_batch_size(), h["max_client_batch_size"].get<uint32_t>());
  EXPECT_EQ(r.tokenization_workers(), h["tokenization_workers"].get<uint32_t>());
  EXPECT_EQ(r.version(), h["version"]);
}

// The same bad input over both edges: an error of the same kind (error_type), with that kind's
// HTTP status and gRPC code.
TEST_F(ServeEdgesAgreeTest, ErrorsHaveTheSameKindOnBothEdges) {
  struct Case {
    Case(const char* w, int s, grpc::StatusCode g, const char* t) : what(w), http_status(s), grpc_code(g), error_type(t) {}
    const char* what;
    int http_status;
    grpc::StatusCode grpc_code;
    const char* error_type;
    tide::testing::ClientResponse http{};
    grpc::Status grpc{};
    std::string grpc_type{};
  };
  std::vector<Case> cases;
  const std::string logits = LogitsName();
  {  // an empty query
    Case c{"empty query", 422, grpc::StatusCode::INVALID_ARGUMENT, "validation"};
    c.http = NewClient()->Post("/rerank", R"({"query": "", "texts": ["a"]})", kKey);
    tei::v1::RerankRequest req;
    req.add_texts("a");
    tei::v1::RerankResponse r;
    auto ctx = Ctx();
    c.grpc = rerank_->Rerank(ctx.get(), req, &r);
    c.grpc_type = Trailer(*ctx, "x-tide-error-type");
    cases.push_back(std::move(c));
  }
  {  // no API key
    Case c{"no key", 401, grpc::StatusCode::UNAUTHENTICATED, "unauthorized"};
    c.http = NewClient()->Post("/rerank", R"({"query": "q", "texts": ["a"]})");
    tei::v1::RerankRequest req;
    req.set_query("q");
    req.add_texts("a");
    tei::v1::RerankResponse r;
    auto ctx = Ctx(/*key=*/false);
    c.grpc = rerank_->Rerank(ctx.get(), req, &r);
    c.grpc_type = Trailer(*ctx, "x-tide-error-type");
    cases.push_back(std::move(c));
  }
  // KServe infer: an unknown model, an unknown output, a classification count that is not >= 1.
  struct InferCase {
    const char* what;
    std::string model;
    std::string output;
    int64_t classification;  // < 0: not asked
    int http_status;
    grpc::StatusCode grpc_code;
    const char* error_type;
  };
  const std::vector<InferCase> infer_cases = {
      {"unknown model", "nope", logits, -1, 404, grpc::StatusCode::NOT_FOUND, "not_found"},
      {"unknown output", "m", "probabilities", -1, 422, grpc::StatusCode::INVALID_ARGUMENT, "validation"},
      {"classification 0", "m", logits, 0, 422, grpc::StatusCode::INVALID_ARGUMENT, "validation"},
  };
  for (const InferCase& ic : infer_cases) {
    Case c{ic.what, ic.http_status, ic.grpc_code, ic.error_type};
    nlohmann::json outputs = {{{"name", ic.output}}};
    if (ic.classification >= 0) outputs[0]["parameters"] = {{"classification", ic.classification}};
    nlohmann::json body = {{"inputs",
                            {{{"name", "text"}, {"datatype", "BYTES"}, {"shape", {1}}, {"data", {"q"}}},
                             {{"name", "text_pair"}, {"datatype", "BYTES"}, {"shape", {1}}, {"data", {"d"}}}}},
                           {"outputs", outputs}};
    c.http = NewClient()->Post("/v2/models/" + ic.model + "/infer", body.dump(), kKey);
    inference::ModelInferRequest req = GrpcInferRequest(ic.model, {"d"});
    auto* out = req.add_outputs();
    out->set_name(ic.output);
    if (ic.classification >= 0) (*out->mutable_parameters())["classification"].set_int64_param(ic.classification);
    inference::ModelInferResponse r;
    auto ctx = Ctx();
    c.grpc = kserve_->ModelInfer(ctx.get(), req, &r);
    c.grpc_type = Trailer(*ctx, "x-tide-error-type");
    cases.push_back(std::move(c));
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(c.http.status, c.http_status) << c.http.body;
    EXPECT_EQ(ParseJson(c.http.body)["error_type"], std::string(c.error_type)) << c.http.body;
    EXPECT_EQ(c.grpc.error_code(), c.grpc_code) << c.grpc.error_message();
    EXPECT_EQ(c.grpc_type, c.error_type);
  }
}

}  // namespace
}  // namespace tide::blackbox

#endif  // TIDE_HAVE_GRPC
