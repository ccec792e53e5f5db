// Black-box tests of drop-in compatibility: every route and field real clients of
// Cohere (v1, v2), TEI and KServe/Triton use, against the real binary, and the OpenAPI
// description: every route of the route table is described, and every example in it succeeds.
// One server:
//   --max-body-bytes 1048576 (for the zip bomb)
//   minilm-l6   tiny-bert (named as the OpenAPI examples name the model), max_batch_size 8
//   spare       tiny-bert, two versions (the rollout and repository examples)
//   tiny-bert-embed  the embedding preset (the embedding routes' examples)

#include <cmath>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "blackbox_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "deflate.h"
#include "http_client.h"
#include "server/access/access_table.h"

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;
using tide::testing::ClientResponse;
using tide::testing::HeaderList;

constexpr const char* kModel = "minilm-l6";

std::string Gzip(const std::string& in, int window_bits = 31) { return tide::testing::Deflate(in, window_bits); }

class ServeCompatTest : public SharedServerSuite<ServeCompatTest> {
 protected:
  static void SetUpTestSuite() {
    StartSharedServer(
        [](const fs::path& repository) {
          absl::Status s = AddTinyBert(repository, kModel,
                                       "backend: \"onnxruntime\"\nmax_batch_size: 8\n"
                                       "parameters { key: \"max_sequence_length\" value { string_value: \"64\" } }\n");
          // The rollout examples move "spare" between its two versions; the repository API's examples
          // then load and unload it (explicit model control).
          if (s.ok()) s = AddTinyBert(repository, "spare", TinyBertConfig("version_policy: { all: {} }\n"));
          // The embedding routes' examples (/embed, /v1/embeddings, /v2/embed) need an embedding model.
          if (s.ok()) {
            auto embedder = ExportedPreset("tiny-bert-embed");
            s = embedder.status();
            if (s.ok()) {
              std::ifstream in(*embedder / "config.pbtxt");
              std::stringstream config;
              config << in.rdbuf();
              s = AddModel(repository, "tiny-bert-embed", *embedder / "1" / "model.onnx", *embedder / "tokenizer.json",
                           config.str());
            }
          }
          if (s.ok()) {
            std::error_code ec;
            fs::create_directories(repository / "spare" / "2", ec);
            fs::copy_file(repository / "spare" / "1" / "model.onnx", repository / "spare" / "2" / "model.onnx", ec);
            if (ec) s = absl::InternalError(ec.message());
          }
          return s;
        },
        {"--max-body-bytes", "1048576", "--model-control-mode", "explicit", "--load-model", "*", "--log-level",
         "warn"});
  }

  void SetUp() override {
    SharedServerSuite::SetUp();
    if (HasFatalFailure()) return;
    client_ = NewClient();
  }

  ClientResponse Get(std::string_view path) { return client_->Get(path); }
  ClientResponse Post(std::string_view path, const json& body, const HeaderList& headers = {}) {
    return client_->Post(path, body.dump(), headers);
  }
  static json Ok(const ClientResponse& r) {
    EXPECT_EQ(r.status, 200) << r.error << " " << r.body;
    return ParseJson(r.body);
  }
  static void ExpectError(const ClientResponse& r, int status, std::string_view error_type) {
    EXPECT_EQ(r.status, status) << r.body;
    const json body = ParseJson(r.body);
    ASSERT_TRUE(body.is_object()) << r.body;
    EXPECT_TRUE(body["error"].is_string()) << r.body;
    EXPECT_EQ(body["error_type"], error_type) << r.body;
  }
  static json TextInfer(const std::vector<std::string>& queries, const std::vector<std::string>& docs) {
    return {{"inputs",
             {{{"name", "text"}, {"shape", {queries.size()}}, {"datatype", "BYTES"}, {"data", queries}},
              {{"name", "text_pair"}, {"shape", {docs.size()}}, {"datatype", "BYTES"}, {"data", docs}}}}};
  }

  std::unique_ptr<tide::testing::HttpClient> client_;
};

// ---- OpenAPI ---------------------------------------------------------------------------------------

TEST_F(ServeCompatTest, OpenApiDescribesEveryRouteAndEveryExampleSucceeds) {
  const json doc = Ok(Get("/api-doc/openapi.json"));
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["openapi"].get<std::string>().substr(0, 2), "3.");
  for (const server::RouteEntry& e : server::RouteTable()) {
    const std::string method = absl::AsciiStrToLower(e.method);
    EXPECT_TRUE(doc["paths"].contains(e.pattern) && doc["paths"][e.pattern].contains(method))
        << "not described: " << e.method << " " << e.pattern;
  }
  const json& parameters = doc["components"]["parameters"];
  int sent = 0;
  for (const auto& [path, item] : doc["paths"].items()) {
    for (const auto& [method, op] : item.items()) {
      std::string concrete = path;
      for (const auto& ref : op.value("parameters", json::array())) {
        const std::string name = ref["$ref"].get<std::string>().substr(ref["$ref"].get<std::string>().rfind('/') + 1);
        const json& p = parameters[name];
        const std::string placeholder = absl::StrCat("{", p["name"].get<std::string>(), "}");
        concrete.replace(concrete.find(placeholder), placeholder.size(), p["example"].get<std::string>());
      }
      std::string body;
      if (op.contains("requestBody")) body = op["requestBody"]["content"]["application/json"]["example"].dump();
      const ClientResponse r = client_->Send(absl::AsciiStrToUpper(method), concrete, body,
                                             {{"Content-Type", "application/json"}});
      EXPECT_EQ(r.status, 200) << absl::AsciiStrToUpper(method) << " " << concrete << " " << body << " -> " << r.body;
      ++sent;
    }
  }
  EXPECT_EQ(sent, static_cast<int>(server::RouteTable().size()));
}

TEST_F(ServeCompatTest, DocsPageIsSelfContained) {
  const ClientResponse r = Get("/docs");
  EXPECT_EQ(r.status, 200);
  EXPECT_THAT(std::string(r.header("Content-Type")), HasSubstr("text/html"));
  EXPECT_THAT(r.body, HasSubstr("api-doc/openapi.json"));
  EXPECT_EQ(r.body.find("http://"), std::string::npos);
  EXPECT_EQ(r.body.find("https://"), std::string::npos);
}

// ---- Cohere -----------------------------------------------------------------------------------------

TEST_F(ServeCompatTest, CohereV2RerankHasV2MetaAndTheSameScoresAsV1) {
  const json request = {{"model", kModel}, {"query", "what is a panda?"},
                        {"documents", {"The giant panda is a bear.", "Paris is in France."}}, {"top_n", 1}};
  const json v2 = Ok(Post("/v2/rerank", request));
  const json v1 = Ok(Post("/v1/rerank", request));
  ASSERT_EQ(v2["results"].size(), 1u) << v2;
  EXPECT_EQ(v2["results"][0]["index"], v1["results"][0]["index"]);
  EXPECT_NEAR(v2["results"][0]["relevance_score"].get<double>(), v1["results"][0]["relevance_score"].get<double>(), 1e-6);
  EXPECT_TRUE(v2["id"].is_string());
  EXPECT_EQ(v2["meta"]["api_version"]["version"], "2");
  EXPECT_EQ(v1["meta"]["api_version"]["version"], "1");
  EXPECT_EQ(v2["meta"]["billed_units"]["search_units"], 1);
  EXPECT_FALSE(v2["results"][0].contains("document"));  // Cohere's default: no documents
}

TEST_F(ServeCompatTest, CohereObjectDocumentsKeepEveryFieldAndRankFieldsChooseWhatIsScored) {
  const json doc = {{"text", "The giant panda is a bear."}, {"title", "Panda"}, {"url", "https://example.org/panda"}};
  const json r = Ok(Post("/v1/rerank", {{"query", "panda"}, {"documents", {doc}}, {"return_documents", true}}));
  EXPECT_EQ(r["results"][0]["document"], doc) << r;
  // rank_fields: the document is scored as the lines "title: Panda\ntext: ...".
  const json ranked = Ok(Post("/v2/rerank", {{"query", "panda"}, {"documents", {doc}}, {"rank_fields", {"title", "text"}}}));
  const json plain = Ok(Post("/v2/rerank", {{"query", "panda"}, {"documents", {"title: Panda\ntext: The giant panda is a bear."}}}));
  EXPECT_NEAR(ranked["results"][0]["relevance_score"].get<double>(), plain["results"][0]["relevance_score"].get<double>(), 1e-6);
  ExpectError(Post("/v1/rerank", {{"query", "panda"}, {"documents", {doc}}, {"rank_fields", {"author"}}}), 422, "validation");
}

// ---- TEI ----------------------------------------------------------------------------------------------

TEST_F(ServeCompatTest, TeiInfoPingAndTheDefaultRoutes) {
  const json info = Ok(Get("/info"));
  EXPECT_EQ(info["model_id"], kModel);
  EXPECT_TRUE(info["model_type"].contains("reranker")) << info;
  EXPECT_EQ(info["max_input_length"], 64);
  EXPECT_EQ(info["max_batch_requests"], 8);
  EXPECT_TRUE(info["version"].is_string());
  const ClientResponse ping = Get("/ping");
  EXPECT_EQ(ping.status, 200);
  EXPECT_TRUE(ping.body.empty());
  const json request = {{"query", "what is a panda?"}, {"texts", {"a bear", "a city"}}};
  const json rerank = Ok(Post("/rerank", request));
  EXPECT_EQ(Ok(Post("/", request)), rerank);
  EXPECT_EQ(Ok(Post("/invocations", request)), rerank);
}

TEST_F(ServeCompatTest, TeiPredictScoresPairsAsRerankDoes) {
  const json rerank = Ok(Post("/rerank", {{"query", "what is a panda?"}, {"texts", {"a bear", "a city"}}}));
  double by_index[2];
  for (const json& r : rerank) by_index[r["index"].get<int>()] = r["score"].get<double>();
  // Two strings are ONE pair (TEI); the answer is that input's labels.
  const json one = Ok(Post("/predict", {{"inputs", {"what is a panda?", "a bear"}}}));
  ASSERT_TRUE(one.is_array() && one.size() == 1) << one;
  EXPECT_EQ(one[0]["label"], "LABEL_0");
  EXPECT_NEAR(one[0]["score"].get<double>(), by_index[0], 1e-6);
  const json batch = Ok(Post("/predict", {{"inputs", json::array({json::array({"what is a panda?", "a bear"}),
                                                                        json::array({"what is a panda?", "a city"})})}}));
  ASSERT_EQ(batch.size(), 2u) << batch;
  EXPECT_NEAR(batch[1][0]["score"].get<double>(), by_index[1], 1e-6);
  const json raw = Ok(Post("/predict", {{"inputs", json::array({json::array({"what is a panda?", "a bear"})})}, {"raw_scores", true}}));
  EXPECT_NEAR(Sigmoid(raw[0][0]["score"].get<double>()), by_index[0], 1e-5);
  // truncate: false refuses an input over the model's 64 tokens.
  std::string long_text;
  for (int i = 0; i < 100; ++i) long_text += "word ";
  ExpectError(Post("/predict", {{"inputs", long_text}, {"truncate", false}}), 422, "validation");
  EXPECT_EQ(Post("/predict", {{"inputs", long_text}}).status, 200);
}

TEST_F(ServeCompatTest, TeiEmptyBatchesAre400Empty) {
  const std::vector<std::pair<std::string, json>> empty = {
      {"/rerank", {{"query", "q"}, {"texts", json::array()}}},
      {"/predict", {{"inputs", json::array()}}},
      {"/tokenize", {{"inputs", json::array()}}},
      {"/decode", {{"ids", json::array()}}},
      {"/v1/rerank", {{"query", "q"}, {"documents", json::array()}}},
      {"/v2/rerank", {{"query", "q"}, {"documents", json::array()}}},
  };
  for (const auto& [path, body] : empty) {
    const ClientResponse r = Post(path, body);
    EXPECT_EQ(r.status, 400) << path << ": " << r.body;
    const json error = ParseJson(r.body);
    ASSERT_TRUE(error.is_object()) << path << ": " << r.body;
    EXPECT_EQ(error["error_type"], "empty") << path << ": " << r.body;
    EXPECT_TRUE(error["error"].is_string() && !error["error"].get<std::string>().empty()) << path;
  }
}

TEST_F(ServeCompatTest, TeiTokenizeGivesOffsetsAndTheInputsOwnTextAndDecodeInvertsIt) {
  const std::string text = "The Panda  EATS bamboo.";
  const json tokens = Ok(Post("/tokenize", {{"inputs", text}}));
  ASSERT_EQ(tokens.size(), 1u);
  std::vector<int64_t> ids;
  int aligned = 0;
  for (const json& t : tokens[0]) {
    ids.push_back(t["id"].get<int64_t>());
    if (t["special"].get<bool>()) {
      EXPECT_FALSE(t.contains("start")) << t;
      continue;
    }
    ASSERT_TRUE(t.contains("start") && t.contains("stop")) << t;
    const size_t start = t["start"], stop = t["stop"];
    EXPECT_EQ(t["text"], text.substr(start, stop - start)) << t;
    ++aligned;
  }
  EXPECT_GE(aligned, 4);
  EXPECT_EQ(tokens[0][1]["text"], "The");  // the input's own case, not the lower-cased piece
  const json decoded = Ok(Post("/decode", {{"ids", ids}}));
  ASSERT_EQ(decoded.size(), 1u);
  EXPECT_EQ(decoded[0], "the panda eats bamboo.") << decoded;  // the uncased tokenizer's text
  const json with_special = Ok(Post("/decode", {{"ids", {ids}}, {"skip_special_tokens", false}}));
  EXPECT_THAT(with_special[0].get<std::string>(), HasSubstr("[CLS]"));
}

// ---- KServe v2 / Triton -------------------------------------------------------------------------------

TEST_F(ServeCompatTest, ModelReadyNamesTheModelAndIdIsOnlyEchoed) {
  const json ready = Ok(Get(absl::StrCat("/v2/models/", kModel, "/ready")));
  EXPECT_EQ(ready, json({{"name", kModel}, {"ready", true}}));
  const json no_id = Ok(Post(absl::StrCat("/v2/models/", kModel, "/infer"), TextInfer({"q"}, {"d"})));
  EXPECT_FALSE(no_id.contains("id")) << no_id;
  json with_id = TextInfer({"q"}, {"d"});
  with_id["id"] = "req-7";
  EXPECT_EQ(Ok(Post(absl::StrCat("/v2/models/", kModel, "/infer"), with_id))["id"], "req-7");
}

TEST_F(ServeCompatTest, TritonModelConfigAndAllModelStats) {
  for (const std::string path : {absl::StrCat("/v2/models/", kModel, "/config"), absl::StrCat("/v2/models/", kModel, "/versions/1/config")}) {
    const json config = Ok(Get(path));
    EXPECT_EQ(config["name"], kModel) << config;
    EXPECT_EQ(config["max_batch_size"], 8);
    ASSERT_FALSE(config["input"].empty());
    EXPECT_TRUE(config["input"][0]["dims"][0].is_number_integer()) << config["input"];
  }
  ExpectError(Get("/v2/models/nope/config"), 404, "not_found");
  const json extensions = Ok(Get("/v2"))["extensions"];
  EXPECT_THAT(extensions.get<std::vector<std::string>>(),
              ::testing::IsSupersetOf({"classification", "model_configuration", "statistics"}));
  // Every loaded model (minilm-l6 and the embedding model; spare once the repository examples
  // unloaded it is not).
  const json all = Ok(Get("/v2/models/stats"));
  std::set<std::string> names;
  for (const json& m : all["model_stats"]) names.insert(m["name"].get<std::string>());
  EXPECT_TRUE(names.count(kModel)) << all;
  EXPECT_TRUE(names.count("tiny-bert-embed")) << all;
}

TEST_F(ServeCompatTest, StatisticsCountEachRequestOnceAsTritonDoes) {
  const std::string stats_path = absl::StrCat("/v2/models/", kModel, "/stats");
  const json before = Ok(Get(stats_path))["model_stats"][0];
  Ok(Post(absl::StrCat("/v2/models/", kModel, "/infer"), TextInfer({"q", "q", "q"}, {"a", "b", "c"})));
  const json after = Ok(Get(stats_path))["model_stats"][0];
  auto delta = [&](const char* stat) {
    return after["inference_stats"][stat]["count"].get<int64_t>() - before["inference_stats"][stat]["count"].get<int64_t>();
  };
  EXPECT_EQ(delta("success"), 1);
  EXPECT_EQ(delta("queue"), 1);  // per request, not per row
  EXPECT_EQ(delta("compute_input"), 1);
  EXPECT_EQ(delta("compute_infer"), 1);
  EXPECT_EQ(delta("compute_output"), 1);
  EXPECT_EQ(after["inference_count"].get<int64_t>() - before["inference_count"].get<int64_t>(), 3);  // rows
  EXPECT_TRUE(after["inference_stats"].contains("cache_hit") && after["inference_stats"].contains("cache_miss"));
  EXPECT_TRUE(after["response_stats"].is_object());
  EXPECT_TRUE(after["memory_usage"].is_array());
}

TEST_F(ServeCompatTest, GzipAndDeflateBodiesAreInflatedAndBounded) {
  const std::string infer = absl::StrCat("/v2/models/", kModel, "/infer");
  const std::string body = TextInfer({"q", "q"}, {"a", "b"}).dump();
  const json plain = Ok(client_->Post(infer, body));
  EXPECT_EQ(Ok(client_->Post(infer, Gzip(body), {{"Content-Type", "application/json"}, {"Content-Encoding", "gzip"}})), plain);
  EXPECT_EQ(Ok(client_->Post(infer, Gzip(body, 15), {{"Content-Type", "application/json"}, {"Content-Encoding", "deflate"}})), plain);
  const std::string rerank = R"({"query":"q","texts":["a","b"]})";
  EXPECT_EQ(Ok(client_->Post("/rerank", Gzip(rerank), {{"Content-Type", "application/json"}, {"Content-Encoding", "gzip"}})),
            Ok(client_->Post("/rerank", rerank)));
  // A zip bomb: 64 KiB that would inflate to 64 MiB, over --max-body-bytes (1 MiB).
  const std::string bomb = Gzip(std::string(64 << 20, ' '));
  ASSERT_LT(bomb.size(), 1u << 20);
  ExpectError(client_->Post(infer, bomb, {{"Content-Type", "application/json"}, {"Content-Encoding", "gzip"}}), 413, "validation");
  ExpectError(client_->Post(infer, "not gzip", {{"Content-Type", "application/json"}, {"Content-Encoding", "gzip"}}), 400, "validation");
  ExpectError(client_->Post(infer, body, {{"Content-Type", "application/json"}, {"Content-Encoding", "br"}}), 501, "unimplemented");
}

TEST_F(ServeCompatTest, ClassificationOutputParameterIsHonouredOrRefused) {
  const std::string infer = absl::StrCat("/v2/models/", kModel, "/infer");
  json request = TextInfer({"q", "q"}, {"a", "b"});
  const json logits = Ok(Post(infer, request))["outputs"][0];
  request["outputs"] = {{{"name", logits["name"]}, {"parameters", {{"classification", 1}}}}};
  const json top = Ok(Post(infer, request))["outputs"][0];
  EXPECT_EQ(top["datatype"], "BYTES");
  EXPECT_EQ(top["shape"], json({2, 1}));
  const std::string first = top["data"][0];
  EXPECT_NEAR(std::stod(first.substr(0, first.find(':'))), logits["data"][0].get<double>(), 1e-5) << first;
  EXPECT_EQ(first.substr(first.find(':')), ":0");
  request["outputs"][0]["parameters"]["classification"] = 0;
  ExpectError(Post(infer, request), 422, "validation");
}

TEST_F(ServeCompatTest, UnknownPathsAndMethodsAnswerWithErrorType) {
  ExpectError(Get("/no/such/route"), 404, "not_found");
  const ClientResponse r = client_->Send("DELETE", "/v2/rerank", "", {});
  ExpectError(r, 405, "validation");
  EXPECT_EQ(r.header("Allow"), "POST");
}

// A classifier (task "classify"): TEI's default routes answer as /predict, and /info says so.
class ServeCompatClassifierTest : public SharedServerSuite<ServeCompatClassifierTest> {
 protected:
  static void SetUpTestSuite() {
    StartSharedServer(
        [](const fs::path& repository) {
          return AddTinyBert(repository, "classifier",
                             "backend: \"onnxruntime\"\nmax_batch_size: 8\n"
                             "parameters { key: \"task\" value { string_value: \"classify\" } }\n"
                             "parameters { key: \"max_sequence_length\" value { string_value: \"64\" } }\n");
        },
        {"--log-level", "warn"});
  }
};

TEST_F(ServeCompatClassifierTest, DefaultRoutesPredictAndInfoSaysClassifier) {
  auto client = NewClient();
  const std::string request = R"({"inputs": [["what is a panda?", "a bear"], "a city"]})";
  const ClientResponse predict = client->Post("/predict", request);
  ASSERT_EQ(predict.status, 200) << predict.body;
  const json expected = ParseJson(predict.body);
  ASSERT_EQ(expected.size(), 2u) << predict.body;
  for (const char* path : {"/", "/invocations"}) {
    const ClientResponse r = client->Post(path, request);
    EXPECT_EQ(r.status, 200) << path << " " << r.body;
    EXPECT_EQ(ParseJson(r.body), expected) << path;
  }
  const ClientResponse info = client->Get("/info");
  ASSERT_EQ(info.status, 200);
  EXPECT_TRUE(ParseJson(info.body)["model_type"].contains("classifier")) << info.body;
}

}  // namespace
}  // namespace tide::blackbox
