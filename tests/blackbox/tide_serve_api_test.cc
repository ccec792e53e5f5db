// Black-box tests of every HTTP endpoint of `tide serve` and their errors, against
// the real binary on a free loopback port with two real models:
//   bert        tools/export_model.py's tiny-bert (1 label, token_type_ids), max_sequence_length 48
//   distilbert  the third-party DistilBERT export in ../shared/assets (no token_type_ids, 2 labels,
//               no config.pbtxt: tide generates it)
// The server is started once for the suite. Scores are checked against single-row KServe runs of
// the token ids that `tide tokenize` (a separate process) computes for the same pairs.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "blackbox_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http_client.h"
#include "shared_assets.h"

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;
using tide::testing::ClientResponse;
using tide::testing::HttpClient;

constexpr int kMaxSequenceLength = 48;
constexpr size_t kMaxBodyBytes = 65536;

// The ids `tide tokenize` gives for one (text, text_pair).
struct CliEncoding {
  std::vector<int64_t> input_ids, token_type_ids, attention_mask;
};

class ServeApiTest : public SharedServerSuite<ServeApiTest> {
 protected:
  static void SetUpTestSuite() {
    StartSharedServer(AddModels, {"--max-body-bytes", std::to_string(kMaxBodyBytes), "--max-batch-tokens", "1024",
                                  "--log-level", "warn"});
  }

  static absl::Status AddModels(const fs::path& repository) {
    auto tiny = ExportedTinyBert();
    if (!tiny.ok()) return tiny.status();
    bert_tokenizer_ = *tiny / "tokenizer.json";
    const std::string bert_config = absl::StrCat(
        "name: \"bert\"\nbackend: \"onnxruntime\"\nmax_batch_size: 8\n",
        "parameters { key: \"max_sequence_length\" value { string_value: \"", kMaxSequenceLength, "\" } }\n");
    absl::Status s = AddModel(repository, "bert", *tiny / "1" / "model.onnx", bert_tokenizer_, bert_config);
    // The same model whose truncation_direction parameter is left: the default of its requests.
    if (s.ok()) {
      s = AddModel(repository, "bert-left", *tiny / "1" / "model.onnx", bert_tokenizer_,
                   absl::StrCat("name: \"bert-left\"\nbackend: \"onnxruntime\"\nmax_batch_size: 8\n",
                                "parameters { key: \"max_sequence_length\" value { string_value: \"",
                                kMaxSequenceLength, "\" } }\n",
                                "parameters { key: \"truncation_direction\" value { string_value: \"left\" } }\n"));
    }
    if (s.ok() && SharedAssets().has_value()) {
      const fs::path assets = *SharedAssets();
      s = AddModel(repository, "distilbert", assets / "models" / "tiny-distilbert-classification" / "model.onnx",
                   assets / "tokenizers" / "bert-base-uncased" / "tokenizer.json", std::nullopt);
      have_distilbert_ = s.ok();
    }
    return s;
  }

  void SetUp() override {
    SharedServerSuite::SetUp();
    if (HasFatalFailure()) return;
    client_ = NewClient();
  }

  ClientResponse Get(std::string_view path) { return client_->Get(path); }
  ClientResponse Post(std::string_view path, const json& body) { return client_->Post(path, body.dump()); }
  ClientResponse PostText(std::string_view path, std::string_view body) { return client_->Post(path, body); }

  // Parses a 200 response's body; fails the test (with the body) otherwise.
  static json Ok(const ClientResponse& r) {
    EXPECT_EQ(r.status, 200) << r.error << r.body;
    json j = ParseJson(r.body);
    EXPECT_FALSE(j.is_discarded()) << r.body;
    return j;
  }

  // An error response: the status and a JSON body {"error": non-empty string}.
  static void ExpectJsonError(const ClientResponse& r, int status, std::string_view message_part = {}) {
    EXPECT_EQ(r.status, status) << r.error << r.body;
    const json j = ParseJson(r.body);
    ASSERT_TRUE(j.is_object()) << r.body;
    ASSERT_TRUE(j.contains("error") && j["error"].is_string()) << r.body;
    EXPECT_FALSE(j["error"].get<std::string>().empty());
    if (!message_part.empty()) {
      EXPECT_THAT(j["error"].get<std::string>(), HasSubstr(message_part));
    }
  }

  // Runs `tide tokenize --tokenizer <tokenizer>` on (text, pair) lines.
  using TextPairs = std::vector<std::pair<std::string, std::optional<std::string>>>;
  static std::vector<CliEncoding> CliTokenize(const fs::path& tokenizer, const TextPairs& in) {
    std::string lines;
    for (const auto& [text, pair] : in) {
      json line = {{"text", text}};
      if (pair.has_value()) line["text_pair"] = *pair;
      absl::StrAppend(&lines, line.dump(), "\n");
    }
    auto run = RunCommand({TideBinary().string(), "tokenize", "--tokenizer", tokenizer.string()}, lines);
    EXPECT_TRUE(run.ok()) << run.status();
    if (!run.ok()) return {};
    EXPECT_EQ(run->exit_code, 0) << run->output;
    std::vector<CliEncoding> out;
    const std::vector<std::string> out_lines = absl::StrSplit(run->output, '\n', absl::SkipEmpty());
    for (const std::string& line : out_lines) {
      const json j = ParseJson(line);
      EXPECT_TRUE(j.is_object() && j.contains("input_ids")) << line;
      if (!j.is_object() || !j.contains("input_ids")) continue;
      out.push_back({j["input_ids"].get<std::vector<int64_t>>(), j["token_type_ids"].get<std::vector<int64_t>>(),
                     j["attention_mask"].get<std::vector<int64_t>>()});
    }
    EXPECT_EQ(out.size(), in.size()) << run->output;
    return out;
  }

  static json Int64Input(std::string name, const std::vector<int64_t>& data) {
    return {{"name", std::move(name)},
            {"shape", {1, static_cast<int64_t>(data.size())}},
            {"datatype", "INT64"},
            {"data", data}};
  }

  // logits of one row run alone through KServe infer on model `model` (a batch of 1).
  std::vector<float> InferOneRow(const std::string& model, const CliEncoding& e, bool with_types) {
    json inputs = json::array({Int64Input("input_ids", e.input_ids), Int64Input("attention_mask", e.attention_mask)});
    if (with_types) inputs.push_back(Int64Input("token_type_ids", e.token_type_ids));
    const json out = Ok(Post(absl::StrCat("/v2/models/", model, "/infer"), {{"inputs", inputs}}));
    if (!out.contains("outputs")) return {};
    return out["outputs"][0]["data"].get<std::vector<float>>();
  }

  // Whole lowercase words of the bert tokenizer's vocabulary, each one token.
  static std::vector<std::string> VocabWords(size_t count) {
    std::vector<std::string> words;
    std::ifstream in(bert_tokenizer_);
    const json t = json::parse(in, nullptr, false);
    if (t.is_discarded()) return words;
    std::vector<std::pair<int64_t, std::string>> by_id;
    for (const auto& [piece, id] : t["model"]["vocab"].items()) {
      if (piece.size() < 3 || piece.size() > 8) continue;
      if (!std::all_of(piece.begin(), piece.end(), [](char c) { return c >= 'a' && c <= 'z'; })) continue;
      by_id.emplace_back(id.get<int64_t>(), piece);
    }
    std::sort(by_id.begin(), by_id.end());
    for (size_t i = 0; i < by_id.size() && words.size() < count; ++i) words.push_back(by_id[i].second);
    return words;
  }

  static std::map<int64_t, double> ScoresByIndex(const json& results, const char* key) {
    std::map<int64_t, double> m;
    for (const json& r : results) m[r["index"].get<int64_t>()] = r[key].get<double>();
    return m;
  }

  static inline fs::path bert_tokenizer_;
  static inline bool have_distilbert_ = false;
  std::unique_ptr<HttpClient> client_;
};

const std::string kQuery = "what is a panda?";
const std::vector<std::string> kDocs = {"the giant panda is a bear", "paris is the capital of france",
                                        "pandas eat bamboo"};

// ---- KServe v2 health and metadata ------------------------------------------------------------

TEST_F(ServeApiTest, ServerMetadataAndHealth) {
  const json md = Ok(Get("/v2"));
  EXPECT_EQ(md["name"], "tide") << md;
  EXPECT_TRUE(md["version"].is_string()) << md;
  EXPECT_THAT(md["extensions"].get<std::vector<std::string>>(), ::testing::Contains("binary_tensor_data"));
  EXPECT_EQ(Ok(Get("/v2/health/live")), json({{"live", true}}));
  EXPECT_EQ(Ok(Get("/v2/health/ready")), json({{"ready", true}}));
}

TEST_F(ServeApiTest, ModelMetadataAndReadiness) {
  const json md = Ok(Get("/v2/models/bert"));
  EXPECT_EQ(md["name"], "bert");
  EXPECT_EQ(md["versions"], json::array({"1"}));
  EXPECT_EQ(md["platform"], "onnxruntime_onnx");
  std::set<std::string> inputs;
  for (const json& in : md["inputs"]) inputs.insert(in["name"].get<std::string>());
  EXPECT_THAT(inputs, ::testing::IsSupersetOf({"input_ids", "attention_mask", "token_type_ids", "text", "text_pair"}));
  ASSERT_EQ(md["outputs"].size(), 1u) << md;
  EXPECT_EQ(md["outputs"][0]["name"], "logits");
  EXPECT_EQ(md["outputs"][0]["datatype"], "FP32");
  EXPECT_EQ(md["outputs"][0]["shape"], json::array({-1, 1}));
  EXPECT_EQ(Ok(Get("/v2/models/bert/versions/1")), md);
  EXPECT_EQ(Ok(Get("/v2/models/bert/ready")), json({{"name", "bert"}, {"ready", true}}));
  EXPECT_EQ(Ok(Get("/v2/models/bert/versions/1/ready")), json({{"name", "bert"}, {"ready", true}}));
}

TEST_F(ServeApiTest, UnknownModelOrVersionIs404Json) {
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Get("/v2/models/no-such-model"), 404, "no-such-model"));
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Get("/v2/models/no-such-model/ready"), 404));
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Get("/v2/models/bert/versions/7"), 404));
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Get("/v2/models/bert/versions/7/ready"), 404));
  const json body = {{"inputs", json::array({Int64Input("input_ids", {101, 102})})}};
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Post("/v2/models/no-such-model/infer", body), 404));
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Post("/v2/models/bert/versions/7/infer", body), 404));
}

TEST_F(ServeApiTest, UnknownPathIs404AndWrongMethodIs405) {
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Get("/no/such/path"), 404));
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(PostText("/v3/rerank", "{}"), 404));
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Get("/rerank"), 405));
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(client_->Send("DELETE", "/v2/models/bert", "", {}), 405));
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Get("/v2/models/bert/infer"), 405));
}

// ---- TEI /rerank --------------------------------------------------------------------------------

TEST_F(ServeApiTest, RerankSortsByScoreWithIndicesAndText) {
  const json res = Ok(Post("/rerank", {{"query", kQuery}, {"texts", kDocs}, {"return_text", true}}));
  ASSERT_TRUE(res.is_array()) << res;
  ASSERT_EQ(res.size(), kDocs.size()) << res;
  std::set<int64_t> indices;
  for (size_t i = 0; i < res.size(); ++i) {
    const int64_t index = res[i]["index"].get<int64_t>();
    ASSERT_GE(index, 0);
    ASSERT_LT(index, static_cast<int64_t>(kDocs.size()));
    indices.insert(index);
    EXPECT_EQ(res[i]["text"], kDocs[index]) << res;
    const double score = res[i]["score"].get<double>();
    EXPECT_GT(score, 0.0);  // sigmoid by default
    EXPECT_LT(score, 1.0);
    if (i > 0) {
      EXPECT_GE(res[i - 1]["score"].get<double>(), score) << res;
    }
  }
  EXPECT_EQ(indices.size(), kDocs.size()) << res;
  const json plain = Ok(Post("/rerank", {{"query", kQuery}, {"texts", kDocs}}));
  for (const json& r : plain) EXPECT_FALSE(r.contains("text")) << plain;
}

TEST_F(ServeApiTest, RerankDefaultScoreIsSigmoidOfRawScore) {
  const auto sig = ScoresByIndex(Ok(Post("/rerank", {{"query", kQuery}, {"texts", kDocs}})), "score");
  const auto raw =
      ScoresByIndex(Ok(Post("/rerank", {{"query", kQuery}, {"texts", kDocs}, {"raw_scores", true}})), "score");
  ASSERT_EQ(sig.size(), kDocs.size());
  ASSERT_EQ(raw.size(), kDocs.size());
  for (size_t i = 0; i < kDocs.size(); ++i) {
    EXPECT_NEAR(sig.at(i), Sigmoid(raw.at(i)), 1e-6) << "document " << i;
    EXPECT_NE(sig.at(i), raw.at(i));
  }
}

// /rerank raw scores are the logits of a direct single-row run of the same ids.
TEST_F(ServeApiTest, RerankRawScoresEqualSingleRowInferOfTheSameIds) {
  std::vector<std::pair<std::string, std::optional<std::string>>> pairs;
  for (const std::string& d : kDocs) pairs.emplace_back(kQuery, d);
  const std::vector<CliEncoding> enc = CliTokenize(bert_tokenizer_, pairs);
  ASSERT_EQ(enc.size(), kDocs.size());
  const auto raw =
      ScoresByIndex(Ok(Post("/rerank", {{"query", kQuery}, {"texts", kDocs}, {"raw_scores", true}})), "score");
  ASSERT_EQ(raw.size(), kDocs.size());
  for (size_t i = 0; i < kDocs.size(); ++i) {
    EXPECT_THAT(enc[i].token_type_ids, ::testing::Contains(1)) << "pair " << i << " has no segment B";
    const std::vector<float> logits = InferOneRow("bert", enc[i], /*with_types=*/true);
    ASSERT_EQ(logits.size(), 1u);
    EXPECT_NEAR(raw.at(i), logits[0], 1e-5) << "document " << i;
  }
}

TEST_F(ServeApiTest, RerankTruncateFalseRefusesOverLongInput) {
  const std::vector<std::string> words = VocabWords(100);
  ASSERT_EQ(words.size(), 100u);
  const std::string long_doc = absl::StrJoin(words, " ");  // 100 tokens > 48
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Post("/rerank", {{"query", kQuery}, {"texts", {kDocs[0], long_doc}}, {"truncate", false}}), 422));
  EXPECT_EQ(Ok(Post("/rerank", {{"query", kQuery}, {"texts", {kDocs[0]}}, {"truncate", false}})).size(), 1u);
  EXPECT_EQ(Ok(Post("/rerank", {{"query", kQuery}, {"texts", {kDocs[0], long_doc}}})).size(), 2u);
}

// With truncation_direction Left the model sees the end of an over-long document, with Right its
// beginning: the long document scores exactly like the kept part sent on its own.
TEST_F(ServeApiTest, RerankTruncationDirectionKeepsTheRightEnd) {
  const std::vector<std::string> words = VocabWords(81);
  ASSERT_EQ(words.size(), 81u);
  // The words must be single tokens for the arithmetic below; check it on the server.
  // (/tokenize truncates to max_sequence_length too, so in chunks of 27 words.)
  const json chunks = {absl::StrJoin(words.begin(), words.begin() + 27, " "),
                       absl::StrJoin(words.begin() + 27, words.begin() + 54, " "),
                       absl::StrJoin(words.begin() + 54, words.end(), " ")};
  const json tok = Ok(Post("/tokenize", {{"inputs", chunks}, {"add_special_tokens", false}}));
  ASSERT_EQ(tok.size(), 3u) << tok;
  for (const json& chunk : tok) ASSERT_EQ(chunk.size(), 27u) << tok;
  const std::string query = words[0];
  const std::vector<std::string> doc_words(words.begin() + 1, words.end());  // 80 tokens
  const size_t kept = kMaxSequenceLength - 3 - 1;                           // [CLS] q [SEP] doc [SEP]
  const std::string long_doc = absl::StrJoin(doc_words, " ");
  const std::string head = absl::StrJoin(doc_words.begin(), doc_words.begin() + kept, " ");
  const std::string tail = absl::StrJoin(doc_words.end() - kept, doc_words.end(), " ");
  for (const char* direction : {"Left", "Right"}) {
    SCOPED_TRACE(direction);
    const auto s = ScoresByIndex(Ok(Post("/rerank", {{"query", query},
                                                     {"texts", {long_doc, tail, head}},
                                                     {"raw_scores", true},
                                                     {"truncation_direction", direction}})),
                                 "score");
    ASSERT_EQ(s.size(), 3u);
    EXPECT_GT(std::abs(s.at(1) - s.at(2)), 1e-6) << "head and tail must score differently for this test to work";
    EXPECT_NEAR(s.at(0), std::string(direction) == "Left" ? s.at(1) : s.at(2), 1e-5);
  }
  ExpectJsonError(Post("/rerank", {{"query", query}, {"texts", {long_doc}}, {"truncation_direction", "Middle"}}),
                  422);
}

// A model's truncation_direction parameter is the default of requests that set none: "bert-left"
// keeps the end of an over-long document, "bert" its beginning (Cohere's /v1/rerank names the model).
TEST_F(ServeApiTest, ModelTruncationDirectionIsTheRequestDefault) {
  const std::vector<std::string> words = VocabWords(81);
  ASSERT_EQ(words.size(), 81u);
  const std::string query = words[0];
  const std::vector<std::string> doc_words(words.begin() + 1, words.end());  // 80 tokens
  const size_t kept = kMaxSequenceLength - 3 - 1;                           // [CLS] q [SEP] doc [SEP]
  const std::string long_doc = absl::StrJoin(doc_words, " ");
  const std::string head = absl::StrJoin(doc_words.begin(), doc_words.begin() + kept, " ");
  const std::string tail = absl::StrJoin(doc_words.end() - kept, doc_words.end(), " ");
  for (const char* model : {"bert-left", "bert"}) {
    SCOPED_TRACE(model);
    const auto s = ScoresByIndex(
        Ok(Post("/v1/rerank", {{"model", model}, {"query", query}, {"documents", {long_doc, tail, head}}}))["results"],
        "relevance_score");
    ASSERT_EQ(s.size(), 3u);
    EXPECT_GT(std::abs(s.at(1) - s.at(2)), 1e-7) << "head and tail must score differently for this test to work";
    EXPECT_NEAR(s.at(0), std::string(model) == "bert-left" ? s.at(1) : s.at(2), 1e-6);
  }
}

TEST_F(ServeApiTest, RerankRequestErrors) {
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(PostText("/rerank", R"({"query": "q", "texts": [)"), 400));
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Post("/rerank", {{"query", 5}, {"texts", kDocs}}), 422, "query"));
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Post("/rerank", {{"query", kQuery}, {"texts", json::array()}}), 400, "texts"));  // TEI's Empty
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Post("/rerank", {{"query", kQuery}}), 422, "texts"));
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Post("/rerank", {{"query", kQuery}, {"texts", {1, 2}}}), 422));
}

// ---- Cohere /v1/rerank ----------------------------------------------------------------------------

TEST_F(ServeApiTest, CohereRerankTopNDocumentsAndUsage) {
  const json docs = json::array({kDocs[0], {{"text", kDocs[1]}}, kDocs[2]});
  const json res = Ok(Post("/v1/rerank", {{"model", "bert"},
                                          {"query", kQuery},
                                          {"documents", docs},
                                          {"top_n", 2},
                                          {"return_documents", true}}));
  EXPECT_EQ(res["model"], "bert");
  EXPECT_TRUE(res["id"].is_string() && !res["id"].get<std::string>().empty()) << res;
  ASSERT_EQ(res["results"].size(), 2u) << res;
  for (const json& r : res["results"]) {
    EXPECT_EQ(r["document"]["text"], kDocs[r["index"].get<size_t>()]) << res;
  }
  EXPECT_GE(res["results"][0]["relevance_score"].get<double>(), res["results"][1]["relevance_score"].get<double>());

  // The top 2 of the full ranking, with the scores of /rerank.
  const json all = Ok(Post("/rerank", {{"query", kQuery}, {"texts", kDocs}}));
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(res["results"][i]["index"], all[i]["index"]) << res << all;
    EXPECT_NEAR(res["results"][i]["relevance_score"].get<double>(), all[i]["score"].get<double>(), 1e-6);
  }

  // usage.total_tokens counts every token of every (query, document) row.
  std::vector<std::pair<std::string, std::optional<std::string>>> pairs;
  for (const std::string& d : kDocs) pairs.emplace_back(kQuery, d);
  size_t tokens = 0;
  for (const CliEncoding& e : CliTokenize(bert_tokenizer_, pairs)) tokens += e.input_ids.size();
  EXPECT_EQ(res["usage"]["total_tokens"].get<size_t>(), tokens) << res;

  const json without = Ok(Post("/v1/rerank", {{"query", kQuery}, {"documents", docs}}));
  ASSERT_EQ(without["results"].size(), kDocs.size()) << without;
  for (const json& r : without["results"]) EXPECT_FALSE(r.contains("document")) << without;
}

// max_tokens_per_doc cuts each document to its first n tokens.
TEST_F(ServeApiTest, CohereRerankMaxTokensPerDocCutsDocuments) {
  const std::vector<std::string> words = VocabWords(12);
  ASSERT_EQ(words.size(), 12u);
  const std::string query = words[0];
  const std::string long_doc = absl::StrJoin(words.begin() + 1, words.end(), " ");
  const std::string head = absl::StrJoin(words.begin() + 1, words.begin() + 4, " ");
  auto scores = [&](std::optional<int> max_tokens) {
    json body = {{"query", query}, {"documents", {long_doc, head}}};
    if (max_tokens.has_value()) body["max_tokens_per_doc"] = *max_tokens;
    return ScoresByIndex(Ok(Post("/v1/rerank", body))["results"], "relevance_score");
  };
  const auto cut = scores(3);
  ASSERT_EQ(cut.size(), 2u);
  EXPECT_NEAR(cut.at(0), cut.at(1), 1e-6);
  const auto whole = scores(std::nullopt);
  ASSERT_EQ(whole.size(), 2u);
  EXPECT_GT(std::abs(whole.at(0) - whole.at(1)), 1e-7) << "the whole document should score differently";
}

TEST_F(ServeApiTest, CohereRerankErrors) {
  ExpectJsonError(Post("/v1/rerank", {{"model", "no-such-model"}, {"query", kQuery}, {"documents", kDocs}}), 404,
                  "no-such-model");
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Post("/v1/rerank", {{"query", kQuery}, {"documents", kDocs}, {"top_n", 0}}), 422, "top_n"));
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Post("/v1/rerank", {{"query", kQuery}, {"documents", {{{"txt", "x"}}}}}), 422));
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(PostText("/v1/rerank", "not json"), 400));
}

// ---- /tokenize ------------------------------------------------------------------------------------

TEST_F(ServeApiTest, TokenizeMatchesTheTokenizeCommand) {
  const std::vector<std::pair<std::string, std::optional<std::string>>> in = {
      {kQuery, std::nullopt}, {kQuery, kDocs[0]}, {"Hello, World! naïve café", std::nullopt}};
  const std::vector<CliEncoding> cli = CliTokenize(bert_tokenizer_, in);
  ASSERT_EQ(cli.size(), in.size());
  const json res = Ok(Post("/tokenize", {{"inputs", {in[0].first, {in[1].first, *in[1].second}, in[2].first}}}));
  ASSERT_TRUE(res.is_array());
  ASSERT_EQ(res.size(), in.size()) << res;
  for (size_t i = 0; i < in.size(); ++i) {
    std::vector<int64_t> ids;
    for (const json& t : res[i]) ids.push_back(t["id"].get<int64_t>());
    EXPECT_EQ(ids, cli[i].input_ids) << "input " << i << ": " << res[i];
    ASSERT_GE(res[i].size(), 2u);
    EXPECT_TRUE(res[i].front()["special"].get<bool>()) << res[i];
    EXPECT_TRUE(res[i].back()["special"].get<bool>()) << res[i];
    EXPECT_FALSE(res[i][1]["special"].get<bool>()) << res[i];
  }
  // A bare string is a batch of one; add_special_tokens=false drops [CLS]/[SEP].
  const json bare = Ok(Post("/tokenize", {{"inputs", kQuery}, {"add_special_tokens", false}}));
  ASSERT_EQ(bare.size(), 1u);
  EXPECT_EQ(bare[0].size(), cli[0].input_ids.size() - 2) << bare;
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Post("/tokenize", {{"inputs", json::array()}}), 400));  // TEI's Empty
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(PostText("/tokenize", "{"), 400));
}

// ---- KServe v2 infer ------------------------------------------------------------------------------

class ServeInferTest : public ServeApiTest {
 protected:
  // Two pairs padded to one length (pad id 0, mask 0): INT64 rows of a batch of 2.
  void SetUp() override {
    ServeApiTest::SetUp();
    if (HasFatalFailure()) return;
    enc_ = CliTokenize(bert_tokenizer_, {{kQuery, kDocs[0]}, {kQuery, kDocs[2]}});
    ASSERT_EQ(enc_.size(), 2u);
    seq_ = std::max(enc_[0].input_ids.size(), enc_[1].input_ids.size());
    for (const CliEncoding& e : enc_) {
      for (size_t c = 0; c < seq_; ++c) {
        const bool real = c < e.input_ids.size();
        ids_.push_back(real ? e.input_ids[c] : 0);
        types_.push_back(real ? e.token_type_ids[c] : 0);
        mask_.push_back(real ? 1 : 0);
      }
    }
  }

  json Inputs(const char* datatype) const {
    const json shape = {2, static_cast<int64_t>(seq_)};
    return json::array({{{"name", "input_ids"}, {"shape", shape}, {"datatype", datatype}, {"data", ids_}},
                        {{"name", "attention_mask"}, {"shape", shape}, {"datatype", datatype}, {"data", mask_}},
                        {{"name", "token_type_ids"}, {"shape", shape}, {"datatype", datatype}, {"data", types_}}});
  }

  static std::vector<float> Logits(const json& response) {
    EXPECT_EQ(response["outputs"].size(), 1u) << response;
    if (response["outputs"].empty()) return {};
    EXPECT_EQ(response["outputs"][0]["name"], "logits");
    EXPECT_EQ(response["outputs"][0]["datatype"], "FP32");
    return response["outputs"][0]["data"].get<std::vector<float>>();
  }

  std::vector<CliEncoding> enc_;
  size_t seq_ = 0;
  std::vector<int64_t> ids_, types_, mask_;
};

TEST_F(ServeInferTest, Int64Int32AndTextInputsGiveTheSameLogits) {
  const json int64 = Ok(Post("/v2/models/bert/infer", {{"id", "req-7"}, {"inputs", Inputs("INT64")}}));
  EXPECT_EQ(int64["model_name"], "bert");
  EXPECT_EQ(int64["model_version"], "1");
  EXPECT_EQ(int64["id"], "req-7");
  EXPECT_EQ(int64["outputs"][0]["shape"], json::array({2, 1})) << int64;
  const std::vector<float> expected = Logits(int64);
  ASSERT_EQ(expected.size(), 2u);

  const std::vector<float> int32 = Logits(Ok(Post("/v2/models/bert/infer", {{"inputs", Inputs("INT32")}})));
  ASSERT_EQ(int32.size(), 2u);
  const json text_inputs = json::array(
      {{{"name", "text"}, {"shape", {2}}, {"datatype", "BYTES"}, {"data", {kQuery, kQuery}}},
       {{"name", "text_pair"}, {"shape", {2}}, {"datatype", "BYTES"}, {"data", {kDocs[0], kDocs[2]}}}});
  const std::vector<float> text = Logits(Ok(Post("/v2/models/bert/infer", {{"inputs", text_inputs}})));
  ASSERT_EQ(text.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_NEAR(int32[i], expected[i], 1e-6) << "row " << i;
    EXPECT_NEAR(text[i], expected[i], 1e-5) << "row " << i;
    // The padded batch row equals the row run alone, unpadded.
    const std::vector<float> alone = InferOneRow("bert", enc_[i], true);
    ASSERT_EQ(alone.size(), 1u);
    EXPECT_NEAR(alone[0], expected[i], 1e-5) << "row " << i;
  }
  EXPECT_GT(std::abs(expected[0] - expected[1]), 1e-6) << "two different pairs should not score the same";
}

TEST_F(ServeInferTest, BinaryTensorRequestAndBinaryOutputMatchJson) {
  const std::vector<float> expected = Logits(Ok(Post("/v2/models/bert/infer", {{"inputs", Inputs("INT64")}})));
  ASSERT_EQ(expected.size(), 2u);

  // Binary request: JSON header, then each input's raw little-endian int64 data in input order.
  const json shape = {2, static_cast<int64_t>(seq_)};
  const size_t bytes = ids_.size() * sizeof(int64_t);
  json header = {{"inputs", json::array()}};
  std::string data;
  for (const auto& [name, values] : std::vector<std::pair<std::string, const std::vector<int64_t>*>>{
           {"input_ids", &ids_}, {"attention_mask", &mask_}, {"token_type_ids", &types_}}) {
    header["inputs"].push_back({{"name", name},
                                {"shape", shape},
                                {"datatype", "INT64"},
                                {"parameters", {{"binary_data_size", bytes}}}});
    for (int64_t v : *values) {
      for (int b = 0; b < 8; ++b) data.push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * b)) & 0xff));
    }
  }
  const std::string header_text = header.dump();
  const ClientResponse r = client_->Send(
      "POST", "/v2/models/bert/infer", header_text + data,
      {{"Content-Type", "application/octet-stream"},
       {"Inference-Header-Content-Length", std::to_string(header_text.size())}});
  const std::vector<float> from_binary = Logits(Ok(r));
  ASSERT_EQ(from_binary.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(from_binary[i], expected[i], 1e-6) << "row " << i;

  // Binary output: the JSON prefix describes it, its raw float32 bytes follow.
  const ClientResponse b = Post("/v2/models/bert/infer",
                                {{"inputs", Inputs("INT64")}, {"parameters", {{"binary_data_output", true}}}});
  ASSERT_EQ(b.status, 200) << b.body;
  const std::string length_header(b.header("Inference-Header-Content-Length"));
  ASSERT_FALSE(length_header.empty()) << "binary output without Inference-Header-Content-Length";
  const size_t json_length = std::stoul(length_header);
  ASSERT_LE(json_length, b.body.size());
  const json prefix = ParseJson(std::string_view(b.body).substr(0, json_length));
  ASSERT_TRUE(prefix.is_object()) << b.body.substr(0, json_length);
  ASSERT_EQ(prefix["outputs"].size(), 1u) << prefix;
  EXPECT_FALSE(prefix["outputs"][0].contains("data")) << prefix;
  EXPECT_EQ(prefix["outputs"][0]["shape"], json::array({2, 1}));
  EXPECT_EQ(prefix["outputs"][0]["parameters"]["binary_data_size"], 2 * sizeof(float)) << prefix;
  ASSERT_EQ(b.body.size() - json_length, 2 * sizeof(float));
  for (size_t i = 0; i < 2; ++i) {
    uint32_t bits = 0;
    for (int k = 0; k < 4; ++k) {
      bits |= static_cast<uint32_t>(static_cast<unsigned char>(b.body[json_length + 4 * i + k])) << (8 * k);
    }
    float value;
    std::memcpy(&value, &bits, sizeof value);
    uint32_t json_bits;
    std::memcpy(&json_bits, &expected[i], sizeof json_bits);
    EXPECT_EQ(bits, json_bits) << "row " << i << ": binary " << value << " vs JSON " << expected[i];
  }

  // The per-output binary_data parameter does the same.
  const ClientResponse per_output =
      Post("/v2/models/bert/infer", {{"inputs", Inputs("INT64")},
                                     {"outputs", {{{"name", "logits"}, {"parameters", {{"binary_data", true}}}}}}});
  ASSERT_EQ(per_output.status, 200) << per_output.body;
  EXPECT_EQ(per_output.header("Inference-Header-Content-Length"), length_header);
  EXPECT_EQ(per_output.body.substr(json_length), b.body.substr(json_length));
}

TEST_F(ServeInferTest, InferRequestErrors) {
  const std::string path = "/v2/models/bert/infer";
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(PostText(path, R"({"inputs": [)"), 400));
  // Wrong types.
  json floats = Inputs("INT64");
  floats[0]["datatype"] = "FP32";
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Post(path, {{"inputs", floats}}), 422, "input_ids"));
  json strings = Inputs("INT64");
  strings[0]["data"] = json::array({"a", "b"});
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Post(path, {{"inputs", strings}}), 422));
  // Shape and data disagree.
  json short_data = Inputs("INT64");
  short_data[0]["data"].erase(short_data[0]["data"].begin());
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Post(path, {{"inputs", short_data}}), 422));
  json other_shape = Inputs("INT64");
  other_shape[1]["shape"] = {1, 2 * static_cast<int64_t>(seq_)};
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Post(path, {{"inputs", other_shape}}), 422, "attention_mask"));
  // Unknown input and output names.
  json unknown = Inputs("INT64");
  unknown[2]["name"] = "segment_ids";
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Post(path, {{"inputs", unknown}}), 422, "segment_ids"));
  ExpectJsonError(Post(path, {{"inputs", Inputs("INT64")}, {"outputs", {{{"name", "probabilities"}}}}}), 422,
                  "probabilities");
  // An id outside the vocabulary, and a sequence over max_sequence_length.
  json out_of_vocab = Inputs("INT64");
  out_of_vocab[0]["data"][1] = 1 << 30;
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Post(path, {{"inputs", out_of_vocab}}), 422, "vocabulary"));
  const std::vector<int64_t> too_long(kMaxSequenceLength + 1, 101);
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(Post(path, {{"inputs", {Int64Input("input_ids", too_long)}}}), 422, "max_sequence_length"));
  // A binary header longer than the body.
  const ClientResponse bad_header = client_->Send(
      "POST", path, R"({"inputs":[]})", {{"Inference-Header-Content-Length", "4096"}});
  EXPECT_NO_FATAL_FAILURE(ExpectJsonError(bad_header, 400));
  // A body over --max-body-bytes.
  const ClientResponse big = PostText(path, std::string(kMaxBodyBytes + 1024, ' '));
  EXPECT_EQ(big.status, 413) << big.error << big.body;
}

// ---- /metrics -------------------------------------------------------------------------------------

TEST_F(ServeApiTest, MetricsCountRequestsByModelEndpointAndStatus) {
  auto count_of = [&](const std::string& series) -> double {
    const ClientResponse m = Get("/metrics");
    EXPECT_EQ(m.status, 200);
    EXPECT_THAT(std::string(m.header("Content-Type")), HasSubstr("text/plain"));
    for (const std::string& line : std::vector<std::string>(absl::StrSplit(m.body, '\n'))) {
      if (line.substr(0, series.size()) == series && line.size() > series.size() && line[series.size()] == ' ') {
        return std::stod(std::string(line.substr(series.size() + 1)));
      }
    }
    return 0;
  };
  const std::string ok = R"(tide_requests_total{model="bert",version="1",endpoint="rerank",status="200",protocol="http"})";
  const std::string bad = R"(tide_requests_total{model="bert",version="1",endpoint="rerank",status="422",protocol="http"})";
  const double ok_before = count_of(ok), bad_before = count_of(bad);
  Ok(Post("/rerank", {{"query", kQuery}, {"texts", {kDocs[0]}}}));
  Ok(Post("/rerank", {{"query", kQuery}, {"texts", {kDocs[1]}}}));
  ExpectJsonError(
      Post("/rerank", {{"query", kQuery}, {"texts", {absl::StrJoin(VocabWords(60), " ")}}, {"truncate", false}}), 422);
  EXPECT_EQ(count_of(ok), ok_before + 2);
  EXPECT_EQ(count_of(bad), bad_before + 1);
  const ClientResponse m = Get("/metrics");
  EXPECT_THAT(m.body, HasSubstr("# TYPE tide_requests_total counter"));
  EXPECT_THAT(m.body, HasSubstr(R"(tide_request_duration_seconds_bucket{model="bert",version="1",endpoint="rerank",protocol="http",le=")"));
}

// ---- the third-party DistilBERT export --------------------------------------------------------------

TEST_F(ServeApiTest, ThirdPartyDistilBertServesItsReferenceLogits) {
  if (!have_distilbert_) GTEST_SKIP() << tide::testing::MissingSharedAsset("") << ": no third-party DistilBERT export to serve";
  const json md = Ok(Get("/v2/models/distilbert"));
  for (const json& in : md["inputs"]) EXPECT_NE(in["name"], "token_type_ids") << md;
  EXPECT_EQ(md["outputs"][0]["shape"], json::array({-1, 2})) << md;

  // The panda pair's ids and the reference logits from the asset's SOURCE.txt.
  const std::vector<int64_t> ids = {101, 2054, 2003, 25462, 1029, 102, 1996, 5016, 25462,
                                    2003, 1037, 4562, 2427, 7320, 2000, 2859, 1012, 102};
  const json inputs = {Int64Input("input_ids", ids), Int64Input("attention_mask", std::vector<int64_t>(ids.size(), 1))};
  const json res = Ok(Post("/v2/models/distilbert/infer", {{"inputs", inputs}}));
  ASSERT_EQ(res["outputs"].size(), 1u) << res;
  EXPECT_EQ(res["outputs"][0]["shape"], json::array({1, 2})) << res;
  const std::vector<double> logits = res["outputs"][0]["data"].get<std::vector<double>>();
  ASSERT_EQ(logits.size(), 2u);
  EXPECT_NEAR(logits[0], 0.00032029501744545996, 1e-6);
  EXPECT_NEAR(logits[1], -0.00020017904171254486, 1e-6);

  // Reranking the same pair tokenizes it to the same ids and scores the last label.
  const std::string query = "what is panda?";
  const std::string doc = "The giant panda is a bear species endemic to China.";
  const json tok = Ok(Post("/v1/rerank", {{"model", "distilbert"}, {"query", query}, {"documents", {doc}}}));
  ASSERT_EQ(tok["results"].size(), 1u) << tok;
  EXPECT_EQ(tok["model"], "distilbert");
  EXPECT_EQ(tok["usage"]["total_tokens"], ids.size()) << tok;
  EXPECT_NEAR(tok["results"][0]["relevance_score"].get<double>(), Sigmoid(logits[1]), 1e-6) << tok;
}

}  // namespace
}  // namespace tide::blackbox
