// Black-box tests of embedding models (docs/embeddings.md) against the real `tide serve`: TEI
// /embed, OpenAI /v1/embeddings and Cohere v2 /v2/embed shapes and errors in each API's own body,
// Matryoshka cuts and normalization, prompts, Cohere's quantized types against their definition
// (computed here from the float answer), token-id inputs, the task checks between rerank and embed
// routes, max_client_batch_size, metrics, gRPC tei.v1.Embed / EmbedStream, and the token states of
// /embed_all (gRPC EmbedAll / EmbedAllStream). One server:
//   --max-documents 8 --grpc-port P
//   reranker         tiny-bert (the default model: first by name)
//   tiny-bert-embed  tools/export_model.py's embedding preset (mean pooling in the graph, normalize,
//                    matryoshka 16,32, prompts query / passage) with the export's config.pbtxt
// The vectors themselves are checked against PyTorch in tools/test_biencoder_export.py.
// A second server (ServeEmbedCacheRolloutTest) holds one embedding model `emb` in three versions
// (1 and 2 the same weights, 3 exported with another seed) with --embed-cache-bytes: the embedding
// cache's hits and misses, and rollouts judged by the cosine similarity of the versions' vectors.
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "blackbox_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http_client.h"
#include "raw_socket.h"

#ifdef TIDE_HAVE_GRPC
#include "grpcpp/grpcpp.h"
#include "tei.grpc.pb.h"
#endif

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;
using tide::testing::ClientResponse;

constexpr char kEmbedder[] = "tiny-bert-embed";
constexpr size_t kDim = 64;

std::vector<float> Row(const json& j) {
  std::vector<float> out;
  for (const json& v : j) out.push_back(v.get<float>());
  return out;
}

double Norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

std::vector<float> Normalized(std::vector<float> v, size_t keep) {
  v.resize(keep);
  const double n = Norm(v);
  for (float& x : v) x = static_cast<float>(x / n);
  return v;
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

class ServeEmbedTest : public SharedServerSuite<ServeEmbedTest> {
 protected:
  static void SetUpTestSuite() {
    grpc_port_ = FreePort();
    StartSharedServer(
        [](const fs::path& repository) -> absl::Status {
          if (absl::Status s = AddTinyBert(repository, "reranker", TinyBertConfig()); !s.ok()) return s;
          auto entry = ExportedPreset(kEmbedder);
          if (!entry.ok()) return entry.status();
          std::ifstream in(*entry / "config.pbtxt");
          std::stringstream config;
          config << in.rdbuf();
          return AddModel(repository, kEmbedder, *entry / "1" / "model.onnx", *entry / "tokenizer.json",
                          config.str());
        },
        {"--max-documents", "8", "--grpc-port", std::to_string(grpc_port_), "--log-level", "warn"});
  }

  ClientResponse Post(std::string_view path, const json& body) {
    return NewClient()->Post(path, body.dump(), {{"Content-Type", "application/json"}});
  }
  json Ok(const ClientResponse& r) {
    EXPECT_EQ(r.status, 200) << r.body;
    return ParseJson(r.body);
  }
  std::vector<float> Tei(const json& body) {
    const json j = Ok(Post("/embed", body));
    if (!j.is_array() || j.empty()) {
      ADD_FAILURE() << j.dump();
      return {};
    }
    return Row(j[0]);
  }

  static inline uint16_t grpc_port_ = 0;
};

TEST_F(ServeEmbedTest, TeiEmbedShapesNormalizationAndMatryoshka) {
  const json both = Ok(Post("/embed", {{"inputs", json::array({"what is a panda?", "a bear"})}}));
  ASSERT_TRUE(both.is_array());
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].size(), kDim);
  EXPECT_NEAR(Norm(Row(both[0])), 1.0, 1e-5);
  // A single string is still a list of one vector (TEI).
  const json one = Ok(Post("/embed", {{"inputs", "what is a panda?"}}));
  ASSERT_EQ(one.size(), 1u);
  ExpectNear(Row(one[0]), Row(both[0]));
  // normalize false: the pooled vector as the graph answers it; its normalization is the default.
  const std::vector<float> raw = Tei({{"inputs", "what is a panda?"}, {"normalize", false}});
  ASSERT_EQ(raw.size(), kDim);
  EXPECT_GT(std::fabs(Norm(raw) - 1.0), 1e-3);
  ExpectNear(Row(both[0]), Normalized(raw, kDim));
  // Matryoshka: cut first, then normalized.
  for (size_t d : {16u, 32u}) {
    const std::vector<float> cut = Tei({{"inputs", "what is a panda?"}, {"dimensions", d}});
    ExpectNear(cut, Normalized(raw, d));
  }
  // A dimension the model does not list, one larger than the model's, zero: 422, TEI's body.
  for (int d : {20, 65, 0}) {
    const ClientResponse r = Post("/embed", {{"inputs", "x"}, {"dimensions", d}});
    EXPECT_EQ(r.status, 422) << d << " " << r.body;
    EXPECT_EQ(ParseJson(r.body)["error_type"], "validation") << r.body;
  }
  EXPECT_EQ(Post("/embed", {{"inputs", "x"}, {"dimensions", 64}}).status, 200);
}

TEST_F(ServeEmbedTest, KServeInferAnswersThePooledVector) {
  // BYTES in, FP32 out: the graph's vector, not normalized (as /embed with normalize false).
  const json r = Ok(Post(std::string("/v2/models/") + kEmbedder + "/infer",
                         {{"inputs", json::array({{{"name", "text"}, {"shape", {1}}, {"datatype", "BYTES"},
                                                   {"data", {"what is a panda?"}}}})}}));
  ASSERT_EQ(r["outputs"].size(), 1u) << r.dump();
  EXPECT_EQ(r["outputs"][0]["name"], "sentence_embedding");
  EXPECT_EQ(r["outputs"][0]["shape"], json::array({1, kDim}));
  ExpectNear(Row(r["outputs"][0]["data"]), Tei({{"inputs", "what is a panda?"}, {"normalize", false}}));
}

TEST_F(ServeEmbedTest, PromptsAndTruncation) {
  // prompt_name puts the model's prompt before the text.
  ExpectNear(Tei({{"inputs", "a panda"}, {"prompt_name", "query"}}), Tei({{"inputs", "query: a panda"}}));
  ExpectNear(Tei({{"inputs", "a panda"}, {"prompt_name", "passage"}}), Tei({{"inputs", "passage: a panda"}}));
  const ClientResponse unknown = Post("/embed", {{"inputs", "a panda"}, {"prompt_name", "title"}});
  EXPECT_EQ(unknown.status, 422);
  EXPECT_THAT(unknown.body, HasSubstr("prompt_name"));
  // An input over max_sequence_length (128): cut by default, refused with truncate false.
  std::string words;
  for (int i = 0; i < 300; ++i) words += "panda ";
  EXPECT_EQ(Post("/embed", {{"inputs", words}}).status, 200);
  const ClientResponse refused = Post("/embed", {{"inputs", words}, {"truncate", false}});
  EXPECT_EQ(refused.status, 422);
  EXPECT_THAT(refused.body, HasSubstr("truncate"));
}

TEST_F(ServeEmbedTest, TeiErrors) {
  const ClientResponse empty = Post("/embed", {{"inputs", json::array()}});
  EXPECT_EQ(empty.status, 400);
  EXPECT_EQ(ParseJson(empty.body)["error_type"], "empty");
  const ClientResponse over = Post("/embed", {{"inputs", json::array({"a", "b", "c", "d", "e", "f", "g", "h", "i"})}});
  EXPECT_EQ(over.status, 422) << over.body;
  EXPECT_THAT(over.body, HasSubstr("max_client_batch_size 8"));
  EXPECT_EQ(Post("/embed", {{"inputs", 3}}).status, 422);
  EXPECT_EQ(NewClient()->Post("/embed", "{\"inputs\":", {{"Content-Type", "application/json"}}).status, 400);
}

TEST_F(ServeEmbedTest, OpenAiShapesBase64TokensAndErrors) {
  const json r = Ok(Post("/v1/embeddings", {{"input", json::array({"what is a panda?", "a bear"})},
                                            {"model", kEmbedder}}));
  EXPECT_EQ(r["object"], "list");
  EXPECT_EQ(r["model"], kEmbedder);
  ASSERT_EQ(r["data"].size(), 2u);
  EXPECT_EQ(r["data"][1]["object"], "embedding");
  EXPECT_EQ(r["data"][1]["index"], 1);
  const std::vector<float> first = Row(r["data"][0]["embedding"]);
  ExpectNear(first, Tei({{"inputs", "what is a panda?"}}));
  EXPECT_GT(r["usage"]["prompt_tokens"].get<int>(), 4);
  EXPECT_EQ(r["usage"]["total_tokens"], r["usage"]["prompt_tokens"]);
  // No model: the server's embedding model. dimensions: cut and normalized.
  const json cut = Ok(Post("/v1/embeddings", {{"input", "what is a panda?"}, {"dimensions", 16}}));
  ExpectNear(Row(cut["data"][0]["embedding"]), Tei({{"inputs", "what is a panda?"}, {"dimensions", 16}}));
  // base64: little-endian float32, decoded here.
  const json b64 = Ok(Post("/v1/embeddings", {{"input", "what is a panda?"}, {"encoding_format", "base64"}}));
  const std::string text = b64["data"][0]["embedding"].get<std::string>();
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=') break;
    acc = (acc << 6) | static_cast<uint32_t>(alphabet.find(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  ASSERT_EQ(bytes.size(), kDim * 4);
  std::vector<float> decoded(kDim);
  std::memcpy(decoded.data(), bytes.data(), bytes.size());
  ExpectNear(decoded, first);  // another batch (its own padding): within float rounding
  // Token ids: the ids /tokenize gives (special tokens included) embed as the text does.
  const json tokens = Ok(Post("/tokenize", {{"inputs", "what is a panda?"}}));
  json ids = json::array();
  for (const json& t : tokens[0]) ids.push_back(t["id"]);
  const json by_ids = Ok(Post("/v1/embeddings", {{"input", json::array({ids})}, {"model", kEmbedder}}));
  ExpectNear(Row(by_ids["data"][0]["embedding"]), first);
  EXPECT_EQ(by_ids["usage"]["prompt_tokens"], ids.size());

  // Errors in OpenAI's shape, 400 for an invalid request.
  auto expect_error = [&](const json& body, int status, std::string_view type, std::string_view says) {
    const ClientResponse e = Post("/v1/embeddings", body);
    EXPECT_EQ(e.status, status) << body.dump() << " -> " << e.body;
    const json j = ParseJson(e.body);
    ASSERT_TRUE(j.contains("error") && j["error"].is_object()) << e.body;
    EXPECT_EQ(j["error"]["type"], type) << e.body;
    EXPECT_THAT(j["error"]["message"].get<std::string>(), HasSubstr(says));
    EXPECT_TRUE(j["error"].contains("param") && j["error"].contains("code")) << e.body;
  };
  expect_error({{"input", json::array()}}, 400, "invalid_request_error", "input");
  expect_error({{"input", "x"}, {"encoding_format", "int4"}}, 400, "invalid_request_error", "encoding_format");
  expect_error({{"input", "x"}, {"dimensions", 1000}}, 400, "invalid_request_error", "dimensions");
  expect_error({{"input", json::array({"a", "b", "c", "d", "e", "f", "g", "h", "i"})}}, 400, "invalid_request_error",
               "max_client_batch_size");
  expect_error({{"input", json::array({json::array({999999999})})}}, 400, "invalid_request_error", "vocabulary");
  expect_error({{"input", "x"}, {"model", "no-such-model"}}, 404, "not_found_error", "no-such-model");
  // A reranker is not an embedding model.
  expect_error({{"input", "x"}, {"model", "reranker"}}, 400, "invalid_request_error", "not an embedding model");
}

TEST_F(ServeEmbedTest, CohereTypesAsDefined) {
  const json r = Ok(Post("/v2/embed", {{"texts", json::array({"what is a panda?", "a bear"})},
                                       {"model", kEmbedder},
                                       {"input_type", "search_document"},
                                       {"embedding_types", json::array({"float", "int8", "uint8", "binary", "ubinary"})}}));
  EXPECT_EQ(r["response_type"], "embeddings_by_type");
  EXPECT_EQ(r["texts"], json::array({"what is a panda?", "a bear"}));
  EXPECT_EQ(r["meta"]["api_version"]["version"], "2");
  EXPECT_GT(r["meta"]["billed_units"]["input_tokens"].get<int>(), 4);
  EXPECT_TRUE(r["id"].is_string());
  const json& e = r["embeddings"];
  ASSERT_EQ(e["float"].size(), 2u);
  // search_document picks the model's "passage" prompt (it has no "document").
  ExpectNear(Row(e["float"][0]), Tei({{"inputs", "passage: what is a panda?"}}));
  for (size_t row = 0; row < 2; ++row) {
    const std::vector<float> f = Row(e["float"][row]);
    ASSERT_EQ(f.size(), kDim);
    ASSERT_EQ(e["int8"][row].size(), kDim);
    ASSERT_EQ(e["ubinary"][row].size(), kDim / 8);
    for (size_t i = 0; i < kDim; ++i) {
      EXPECT_EQ(e["int8"][row][i].get<int>(), static_cast<int>(std::nearbyint(f[i] * 127.0))) << i;
      EXPECT_EQ(e["uint8"][row][i].get<int>(), static_cast<int>(std::nearbyint((f[i] + 1.0) * 127.5))) << i;
      const int byte = e["ubinary"][row][i / 8].get<int>();
      EXPECT_EQ((byte >> (7 - i % 8)) & 1, f[i] > 0 ? 1 : 0) << i;
    }
    for (size_t b = 0; b < kDim / 8; ++b) {
      EXPECT_EQ(e["binary"][row][b].get<int>(), e["ubinary"][row][b].get<int>() - 128);
    }
  }
  // search_query: the "query" prompt; output_dimension cuts.
  const json q = Ok(Post("/v2/embed", {{"texts", json::array({"a panda"})}, {"input_type", "search_query"},
                                       {"output_dimension", 32}}));
  ExpectNear(Row(q["embeddings"]["float"][0]), Tei({{"inputs", "query: a panda"}, {"dimensions", 32}}));
  // Errors in Cohere's shape: {"message"} with 400.
  for (const json& bad : {json{{"texts", json::array()}}, json{{"texts", json::array({"a"})}, {"embedding_types", {"int4"}}},
                          json{{"texts", json::array({"a"})}, {"output_dimension", 128}}}) {
    const ClientResponse err = Post("/v2/embed", bad);
    EXPECT_EQ(err.status, 400) << bad.dump() << " -> " << err.body;
    EXPECT_TRUE(ParseJson(err.body)["message"].is_string()) << err.body;
  }
}

TEST_F(ServeEmbedTest, RerankAndEmbedRoutesPickTheirModelAndRefuseTheOther) {
  // The default model is the reranker; /rerank answers with it and /embed with the embedder.
  const ClientResponse rerank = Post("/rerank", {{"query", "q"}, {"texts", json::array({"a", "b"})}});
  EXPECT_EQ(rerank.status, 200) << rerank.body;
  EXPECT_EQ(Post("/embed", {{"inputs", "a"}}).status, 200);
  EXPECT_EQ(Post("/v1/embeddings", {{"input", "a"}}).status, 200);
  EXPECT_EQ(Post("/v2/embed", {{"texts", {"a"}}}).status, 200);
  // Named the wrong way round: 422 naming the task.
  const ClientResponse cohere = Post("/v2/rerank", {{"model", kEmbedder}, {"query", "q"}, {"documents", {"a"}}});
  EXPECT_EQ(cohere.status, 422) << cohere.body;
  EXPECT_THAT(cohere.body, HasSubstr("embedding model"));
  const ClientResponse wrong = Post("/v2/embed", {{"model", "reranker"}, {"texts", {"a"}}});
  EXPECT_EQ(wrong.status, 400) << wrong.body;
  EXPECT_THAT(wrong.body, HasSubstr("not an embedding model"));
  // /metrics counts each route under the model that answered it.
  const std::string metrics = NewClient()->Get("/metrics").body;
  auto counted = [&](const std::string& model, const std::string& endpoint) {
    std::istringstream lines(metrics);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("tide_requests_total{", 0) == 0 && line.find("model=\"" + model + "\"") != std::string::npos &&
          line.find("endpoint=\"" + endpoint + "\"") != std::string::npos) {
        return true;
      }
    }
    return false;
  };
  EXPECT_TRUE(counted("reranker", "rerank")) << metrics;
  EXPECT_TRUE(counted(kEmbedder, "embed")) << metrics;
  EXPECT_TRUE(counted(kEmbedder, "v1_embeddings")) << metrics;
  EXPECT_TRUE(counted(kEmbedder, "v2_embed")) << metrics;
}

#ifdef TIDE_HAVE_GRPC
TEST_F(ServeEmbedTest, GrpcEmbedAnswersAsHttp) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port_), grpc::InsecureChannelCredentials());
  auto embed = tei::v1::Embed::NewStub(channel);
  tei::v1::EmbedRequest req;
  req.set_inputs("what is a panda?");
  req.set_truncate(true);
  req.set_dimensions(32);
  tei::v1::EmbedResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  const grpc::Status s = embed->Embed(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ExpectNear(std::vector<float>(resp.embeddings().begin(), resp.embeddings().end()),
             Tei({{"inputs", "what is a panda?"}, {"dimensions", 32}}));
  EXPECT_GT(resp.metadata().compute_tokens(), 4u);
  // A stream: one answer per message, in order.
  grpc::ClientContext sctx;
  sctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto stream = embed->EmbedStream(&sctx);
  for (const char* text : {"a panda", "a bear"}) {
    tei::v1::EmbedRequest m;
    m.set_inputs(text);
    m.set_truncate(true);
    ASSERT_TRUE(stream->Write(m));
    tei::v1::EmbedResponse out;
    ASSERT_TRUE(stream->Read(&out));
    ExpectNear(std::vector<float>(out.embeddings().begin(), out.embeddings().end()), Tei({{"inputs", text}}));
  }
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  // An empty input: TEI's empty error (INVALID_ARGUMENT).
  tei::v1::EmbedRequest empty;
  grpc::ClientContext ectx;
  EXPECT_EQ(embed->Embed(&ectx, empty, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}
#endif

// ---- /embed_all: per-token states -------------------------------------------------------------------

// The token states of TEI's /embed_all: one vector per real token (special tokens included, as many
// as /tokenize gives), raw (mean pooling over them is /embed's vector with normalize false, which
// also proves that a shorter input's padding is dropped), prompts and truncation as /embed's.
// Their values against PyTorch: tools/test_biencoder_export.py.
TEST_F(ServeEmbedTest, TeiEmbedAllAnswersEveryTokensState) {
  const std::vector<std::string> texts = {"what is a panda?", "a bear"};
  const json all = Ok(Post("/embed_all", {{"inputs", texts}}));
  ASSERT_TRUE(all.is_array()) << all.dump();
  ASSERT_EQ(all.size(), 2u);
  const json tokens = Ok(Post("/tokenize", {{"inputs", texts}}));
  for (size_t i = 0; i < texts.size(); ++i) {
    SCOPED_TRACE(texts[i]);
    ASSERT_EQ(all[i].size(), tokens[i].size());
    std::vector<float> mean(kDim, 0.0f);
    for (const json& token : all[i]) {
      ASSERT_EQ(token.size(), kDim);
      for (size_t d = 0; d < kDim; ++d) mean[d] += token[d].get<float>() / static_cast<float>(all[i].size());
    }
    ExpectNear(mean, Tei({{"inputs", texts[i]}, {"normalize", false}}), 1e-4);
  }
  EXPECT_GT(std::fabs(Norm(Row(all[0][0])) - 1.0), 1e-3);  // raw, not normalized
  // A single string is a list of one; normalize and dimensions are not /embed_all's fields.
  const json one = Ok(Post("/embed_all", {{"inputs", texts[1]}, {"normalize", true}, {"dimensions", 16}}));
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(one[0].size(), all[1].size());
  for (size_t t = 0; t < one[0].size(); ++t) ExpectNear(Row(one[0][t]), Row(all[1][t]));
  // prompt_name: the model's prompt before the text.
  const json prompted = Ok(Post("/embed_all", {{"inputs", "a panda"}, {"prompt_name", "query"}}));
  const json spelled = Ok(Post("/embed_all", {{"inputs", "query: a panda"}}));
  ASSERT_EQ(prompted[0].size(), spelled[0].size());
  for (size_t t = 0; t < spelled[0].size(); ++t) ExpectNear(Row(prompted[0][t]), Row(spelled[0][t]));
  // Over max_sequence_length (128): cut to it by default, refused with truncate false.
  std::string words;
  for (int i = 0; i < 300; ++i) words += "panda ";
  EXPECT_EQ(Ok(Post("/embed_all", {{"inputs", words}}))[0].size(), 128u);
  const ClientResponse refused = Post("/embed_all", {{"inputs", words}, {"truncate", false}});
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_THAT(refused.body, HasSubstr("truncate"));
  // TEI's errors.
  const ClientResponse empty = Post("/embed_all", {{"inputs", json::array()}});
  EXPECT_EQ(empty.status, 400);
  EXPECT_EQ(ParseJson(empty.body)["error_type"], "empty");
  const ClientResponse over = Post("/embed_all", {{"inputs", json::array({"a", "b", "c", "d", "e", "f", "g", "h", "i"})}});
  EXPECT_EQ(over.status, 422) << over.body;
  EXPECT_EQ(Post("/embed_all", {{"inputs", 3}}).status, 422);
  EXPECT_EQ(Post("/embed_all", {{"inputs", "a"}, {"prompt_name", "title"}}).status, 422);
  EXPECT_EQ(NewClient()->Post("/embed_all", "{\"inputs\":", {{"Content-Type", "application/json"}}).status, 400);
  const std::string metrics = NewClient()->Get("/metrics").body;
  EXPECT_GT(MetricSum(metrics, "tide_requests_total", {absl::StrCat("model=\"", kEmbedder, "\""),
                                                       "endpoint=\"embed_all\""}),
            0.0)
      << metrics;
}

#ifdef TIDE_HAVE_GRPC
TEST_F(ServeEmbedTest, GrpcEmbedAllAnswersAsHttp) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port_), grpc::InsecureChannelCredentials());
  auto embed = tei::v1::Embed::NewStub(channel);
  auto expect_as_http = [&](const tei::v1::EmbedAllResponse& resp, const std::string& text) {
    const json http = Ok(Post("/embed_all", {{"inputs", text}}));
    ASSERT_EQ(static_cast<size_t>(resp.token_embeddings_size()), http[0].size());
    for (int t = 0; t < resp.token_embeddings_size(); ++t) {
      const auto& e = resp.token_embeddings(t).embeddings();
      ExpectNear(std::vector<float>(e.begin(), e.end()), Row(http[0][t]));
    }
  };
  tei::v1::EmbedAllRequest req;
  req.set_inputs("what is a panda?");
  req.set_truncate(true);
  tei::v1::EmbedAllResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  const grpc::Status s = embed->EmbedAll(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  expect_as_http(resp, "what is a panda?");
  EXPECT_EQ(resp.metadata().compute_tokens(), static_cast<uint32_t>(resp.token_embeddings_size()));
  grpc::ClientContext sctx;
  sctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto stream = embed->EmbedAllStream(&sctx);
  for (const char* text : {"a panda", "a bear that eats bamboo"}) {
    tei::v1::EmbedAllRequest m;
    m.set_inputs(text);
    m.set_truncate(true);
    ASSERT_TRUE(stream->Write(m));
    tei::v1::EmbedAllResponse out;
    ASSERT_TRUE(stream->Read(&out));
    expect_as_http(out, text);
  }
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  tei::v1::EmbedAllRequest empty;
  grpc::ClientContext ectx;
  EXPECT_EQ(embed->EmbedAll(&ectx, empty, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}
#endif

// An embedding model whose graph has no token_embeddings output (here the tiny reranker's graph
// served as task embed, its one-value output the "vector"): /embed answers, /embed_all is TEI's 424
// (gRPC FAILED_PRECONDITION).
class ServeEmbedAllUnsupportedTest : public SharedServerSuite<ServeEmbedAllUnsupportedTest> {
 protected:
  static void SetUpTestSuite() {
    grpc_port_ = FreePort();
    StartSharedServer(
        [](const fs::path& repository) {
          return AddTinyBert(repository, "pooled-only",
                             TinyBertConfig("parameters { key: \"task\" value { string_value: \"embed\" } }\n"));
        },
        {"--grpc-port", std::to_string(grpc_port_), "--log-level", "warn"});
  }
  static inline uint16_t grpc_port_ = 0;
};

TEST_F(ServeEmbedAllUnsupportedTest, EmbedAllIsTeisFailedDependency) {
  const auto post = [](std::string_view path, const json& body) {
    return NewClient()->Post(path, body.dump(), {{"Content-Type", "application/json"}});
  };
  const ClientResponse embed = post("/embed", {{"inputs", "a panda"}});
  EXPECT_EQ(embed.status, 200) << embed.body;
  const ClientResponse all = post("/embed_all", {{"inputs", "a panda"}});
  EXPECT_EQ(all.status, 424) << all.body;
  const json body = ParseJson(all.body);
  EXPECT_EQ(body["error_type"], "backend") << all.body;
  EXPECT_THAT(body["error"].get<std::string>(), HasSubstr("token_embeddings"));
#ifdef TIDE_HAVE_GRPC
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port_), grpc::InsecureChannelCredentials());
  auto stub = tei::v1::Embed::NewStub(channel);
  tei::v1::EmbedAllRequest req;
  req.set_inputs("a panda");
  tei::v1::EmbedAllResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  EXPECT_EQ(stub->EmbedAll(&ctx, req, &resp).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
#endif
}

// ---- The embedding cache and embedding rollouts ------------------------------------------------

constexpr char kAdminKey[] = "embed-admin";
constexpr int kOtherSeed = 7;

// emb: versions 1 and 2 the preset's weights, 3 another seed's; the preset's config.pbtxt.
absl::Status PopulateEmbedVersions(const fs::path& repository) {
  auto entry = ExportedPreset(kEmbedder);
  if (!entry.ok()) return entry.status();
  auto other = ExportedPreset(kEmbedder, kOtherSeed);
  if (!other.ok()) return other.status();
  std::ifstream in(*entry / "config.pbtxt");
  std::stringstream read;
  read << in.rdbuf();
  std::string config = read.str();
  const std::string name = absl::StrCat("name: \"", kEmbedder, "\"");
  if (const size_t at = config.find(name); at != std::string::npos) config.replace(at, name.size(), "name: \"emb\"");
  config += "\nversion_policy { all { } }\n";
  if (absl::Status s = AddModel(repository, "emb", *entry / "1" / "model.onnx", *entry / "tokenizer.json", config);
      !s.ok()) {
    return s;
  }
  for (const auto& [version, file] : {std::pair{"2", *entry / "1" / "model.onnx"},
                                      std::pair{"3", *other / "1" / "model.onnx"}}) {
    std::error_code ec;
    fs::create_directories(repository / "emb" / version, ec);
    if (!ec) fs::create_symlink(fs::absolute(file), repository / "emb" / version / "model.onnx", ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot add version ", version, ": ", ec.message()));
  }
  return absl::OkStatus();
}

class ServeEmbedCacheRolloutTest : public SharedServerSuite<ServeEmbedCacheRolloutTest> {
 protected:
  static void SetUpTestSuite() {
    StartSharedServer(PopulateEmbedVersions,
                      // Shadow lanes at the inference threads' priority (as tide_serve_rollout_test).
                      {"--embed-cache-bytes", "1000000", "--admin-api-key", kAdminKey, "--shadow-scheduling",
                       "normal", "--log-level", "warn"});
  }
  static tide::testing::HeaderList Admin() {
    return {{"Authorization", std::string("Bearer ") + kAdminKey}, {"Content-Type", "application/json"}};
  }
  static json Rollout() { return ParseJson(NewClient()->Get("/v2/models/emb/rollout", Admin()).body); }
  static ClientResponse Put(const std::string& body) {
    return NewClient()->Send("PUT", "/v2/models/emb/rollout", body, Admin());
  }
  static double Metric(std::string_view name, const std::vector<std::string>& labels) {
    return MetricSum(NewClient()->Get("/metrics").body, name, labels);
  }
  static json Embed(const json& body, const tide::testing::HeaderList& headers = {}) {
    tide::testing::HeaderList h = headers;
    h.push_back({"Content-Type", "application/json"});
    const ClientResponse r = NewClient()->Post("/embed", body.dump(), h);
    EXPECT_EQ(r.status, 200) << r.body;
    return ParseJson(r.body);
  }
  // Sends `n` /embed requests of two inputs each (a few distinct texts), pausing between them so
  // that the shadow lane finds the versions idle.
  static void Traffic(int n) {
    for (int i = 0; i < n; ++i) {
      Embed({{"inputs", json::array({absl::StrCat("what is a panda number ", i % 13, "?"),
                                     absl::StrCat("a bear that eats bamboo ", i % 7)})}});
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
  }
};

TEST_F(ServeEmbedCacheRolloutTest, TheCacheAnswersWhatItHoldsAndMissesWhatChangesTheInput) {
  const std::vector<std::string> emb = {R"(model="emb")"};
  auto hits = [&] { return Metric("tide_embed_cache_hits_total", emb); };
  auto misses = [&] { return Metric("tide_embed_cache_misses_total", emb); };
  const double hits0 = hits(), misses0 = misses();
  const json first = Embed({{"inputs", json::array({"cache me", "and me"})}});
  EXPECT_EQ(misses(), misses0 + 2);
  EXPECT_EQ(hits(), hits0);
  const json again = Embed({{"inputs", json::array({"cache me", "and me"})}});
  EXPECT_EQ(hits(), hits0 + 2);
  EXPECT_EQ(again, first);
  // The cached vector is the raw one: another dimensions and normalize are cut from it.
  const std::vector<float> cut = Row(Embed({{"inputs", json::array({"cache me", "a new one"})}, {"dimensions", 16}})[0]);
  EXPECT_EQ(hits(), hits0 + 3);
  EXPECT_EQ(misses(), misses0 + 3);
  ExpectNear(cut, Normalized(Row(first[0]), 16));
  // OpenAI's route reads the same token ids: a hit.
  const ClientResponse openai = NewClient()->Post("/v1/embeddings", json{{"input", "cache me"}}.dump(),
                                                  {{"Content-Type", "application/json"}});
  ASSERT_EQ(openai.status, 200) << openai.body;
  EXPECT_EQ(hits(), hits0 + 4);
  ExpectNear(Row(ParseJson(openai.body)["data"][0]["embedding"]), Row(first[0]));
  // A prompt changes what the model reads: a miss, and another vector.
  const std::vector<float> query = Row(Embed({{"inputs", "cache me"}, {"prompt_name", "query"}})[0]);
  EXPECT_EQ(misses(), misses0 + 4);
  EXPECT_GT(std::fabs(query[0] - Row(first[0])[0]) + std::fabs(query[1] - Row(first[0])[1]), 1e-6);
  // Cache-Control: no-cache reads nothing from it.
  Embed({{"inputs", "cache me"}}, {{"Cache-Control", "no-cache"}});
  EXPECT_EQ(hits(), hits0 + 4);
  EXPECT_GT(Metric("tide_embed_cache_bytes", {}), 0);
}

TEST_F(ServeEmbedCacheRolloutTest, ACandidateWithOtherWeightsIsRolledBackOnCosine) {
  const double before = Metric("tide_rollout_rollbacks_total", {R"(model="emb")", R"(reason="cosine")"});
  const ClientResponse put = Put(R"({"candidate": "3", "stable": "1", "mode": "shadow", "percent": 100,
      "guard": {"min_requests": 20, "min_cosine": 0.9, "max_p99_ratio": 1000}})");
  ASSERT_EQ(put.status, 200) << put.body;
  for (int round = 0; round < 20 && Rollout().value("state", "") == "running"; ++round) Traffic(20);
  const json status = Rollout();
  ASSERT_EQ(status.value("state", ""), "rolled_back") << status.dump();
  EXPECT_THAT(status.value("reason", ""), HasSubstr("cosine"));
  EXPECT_EQ(status["agreement"].value("pairs", 0), 20) << status.dump();
  EXPECT_LT(status["agreement"].value("cosine", 1.0), 0.9) << status.dump();
  EXPECT_EQ(Metric("tide_rollout_rollbacks_total", {R"(model="emb")", R"(reason="cosine")"}), before + 1);
}

TEST_F(ServeEmbedCacheRolloutTest, ACandidateWithTheSameWeightsKeepsRunning) {
  const ClientResponse put = Put(R"({"candidate": "2", "stable": "1", "mode": "shadow", "percent": 100,
      "guard": {"min_requests": 20, "min_cosine": 0.999, "max_p99_ratio": 1000}})");
  ASSERT_EQ(put.status, 200) << put.body;
  for (int round = 0; round < 20 && Rollout()["agreement"].value("pairs", 0) < 30; ++round) Traffic(20);
  const json status = Rollout();
  EXPECT_EQ(status.value("state", ""), "running") << status.dump();
  EXPECT_GE(status["agreement"].value("pairs", 0), 30) << status.dump();
  EXPECT_GT(status["agreement"].value("cosine", 0.0), 0.999) << status.dump();
  EXPECT_GT(Metric("tide_rollout_agreement", {R"(model="emb")", R"(measure="cosine")"}), 0.999);
  ASSERT_EQ(NewClient()->Post("/v2/models/emb/rollout/rollback", "", Admin()).status, 200);
}

}  // namespace
}  // namespace tide::blackbox
