// Black-box tests of serving FP32 and INT8 variants of one model side by side,
// against the real `tide quantize` and `tide serve` binaries. The INT8 model is
// `tide quantize --int8` of tools/export_model.py's tiny-bert (2 layers, hidden 64, seeded random
// weights). One repository, one server:
//   tiny           the FP32 export
//   tiny-int8      its INT8 rewrite (the layout `tools/export_model.py --int8` writes)
//   tiny-versions  version 1 = FP32, version 2 = INT8, `version_policy { all { } }`: KServe
//                  addresses each version by path; Cohere's "model" names the entry and gets the
//                  newest version (Triton's rule for an unversioned request).
// Tolerance: |INT8 logit - FP32 logit| <= 10% of the largest |FP32 logit| on the same inputs, the
// bound src/quantize/quantize_test.cc applies to exported models (QuantizeRealModelTest; 5% for its
// hand-built 2-layer graph). 8-bit weights and activations through two encoder layers move a logit
// by a small fraction of its size; a mis-scaled or mis-wired rewrite moves it by its whole size.
// Every comparison also asserts that the INT8 answers differ from the FP32 ones by more than FP32's
// own batch-to-batch noise (1e-5), so the test fails if both names quietly serve the same model.
// INT8 answers are not compared with each other exactly: dynamic quantization gives a whole batch
// one activation scale, so a row's INT8 score depends on the rows batched with it.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "blackbox_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http_client.h"

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;
using tide::testing::ClientResponse;
using tide::testing::HttpClient;

constexpr double kInt8RelativeTolerance = 0.10;  // of the largest |FP32 logit|, see the file comment
constexpr int kMaxSequenceLength = 64;
constexpr int64_t kClsId = 101, kSepId = 102;  // the tiny-bert WordPiece vocabulary's [CLS] and [SEP]

std::string Config(bool all_versions) {
  return absl::StrCat("backend: \"onnxruntime\"\nmax_batch_size: 16\n",
                      "parameters { key: \"max_sequence_length\" value { string_value: \"", kMaxSequenceLength,
                      "\" } }\n", all_versions ? "version_policy { all { } }\n" : "");
}

class ServePrecisionTest : public SharedServerSuite<ServePrecisionTest> {
 protected:
  static void SetUpTestSuite() { StartSharedServer(Prepare, {"--log-level", "warn"}); }

  // Exports tiny-bert (cached), quantizes it with the real binary, and lays out the repository.
  static absl::Status Prepare(const fs::path& repo) {
    auto tiny = ExportedTinyBert();
    if (!tiny.ok()) return tiny.status();
    fp32_model_ = *tiny / "1" / "model.onnx";
    tokenizer_ = *tiny / "tokenizer.json";
    int8_model_ = scratch_dir() / "int8.onnx";
    auto run = RunCommand({TideBinary().string(), "quantize", "--int8", fp32_model_.string(), int8_model_.string()});
    if (!run.ok()) return run.status();
    if (run->exit_code != 0 || run->output.find("nodes converted") == std::string::npos) {
      return absl::InternalError(absl::StrCat("tide quantize --int8 exited ", run->exit_code, ": ", run->output));
    }
    quantize_output_ = run->output;
    if (absl::Status st = AddModel(repo, "tiny", fp32_model_, tokenizer_, Config(false)); !st.ok()) return st;
    if (absl::Status st = AddModel(repo, "tiny-int8", int8_model_, tokenizer_, Config(false)); !st.ok()) return st;
    if (absl::Status st = AddModel(repo, "tiny-versions", fp32_model_, tokenizer_, Config(true)); !st.ok()) {
      return st;
    }
    std::error_code ec;
    fs::create_directories(repo / "tiny-versions" / "2", ec);
    if (!ec) fs::create_symlink(int8_model_, repo / "tiny-versions" / "2" / "model.onnx", ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot add version 2: ", ec.message()));
    return absl::OkStatus();
  }

  void SetUp() override {
    SharedServerSuite::SetUp();
    if (HasFatalFailure()) return;
    client_ = NewClient();
  }

  static json Ok(const ClientResponse& r) {
    EXPECT_EQ(r.status, 200) << r.error << r.body;
    json j = ParseJson(r.body);
    EXPECT_FALSE(j.is_discarded()) << r.body;
    return j;
  }

  // Whole lowercase words of the tiny-bert vocabulary (each a single token).
  static std::vector<std::string> VocabWords() {
    std::vector<std::string> words;
    std::ifstream in(tokenizer_);
    const json t = json::parse(in, nullptr, false);
    if (t.is_discarded()) return words;
    for (const auto& [piece, id] : t["model"]["vocab"].items()) {
      if (piece.size() >= 3 && std::all_of(piece.begin(), piece.end(), [](char c) { return c >= 'a' && c <= 'z'; })) {
        words.push_back(piece);
      }
    }
    std::sort(words.begin(), words.end());
    return words;
  }

  static std::string RandomText(const std::vector<std::string>& words, int n, std::mt19937* rng) {
    std::uniform_int_distribution<size_t> pick(0, words.size() - 1);
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) out.push_back(words[pick(*rng)]);
    return absl::StrJoin(out, " ");
  }

  // A seeded batch of random (query, document) pairs as KServe INT64 tensors: [CLS] q [SEP] d
  // [SEP], rows of different lengths padded with id 0 and mask 0.
  static json RandomTensorInputs(int rows, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int64_t> token(1000, 2047);  // inside the 2048-token vocabulary
    std::uniform_int_distribution<int> qlen(3, 10), dlen(4, 40);
    std::vector<std::vector<int64_t>> ids(rows), types(rows);
    size_t seq = 0;
    for (int r = 0; r < rows; ++r) {
      ids[r].push_back(kClsId);
      for (int i = qlen(rng); i > 0; --i) ids[r].push_back(token(rng));
      ids[r].push_back(kSepId);
      types[r].assign(ids[r].size(), 0);
      for (int i = dlen(rng); i > 0; --i) ids[r].push_back(token(rng));
      ids[r].push_back(kSepId);
      types[r].resize(ids[r].size(), 1);
      seq = std::max(seq, ids[r].size());
    }
    std::vector<int64_t> flat_ids, flat_types, flat_mask;
    for (int r = 0; r < rows; ++r) {
      for (size_t c = 0; c < seq; ++c) {
        const bool real = c < ids[r].size();
        flat_ids.push_back(real ? ids[r][c] : 0);
        flat_types.push_back(real ? types[r][c] : 0);
        flat_mask.push_back(real ? 1 : 0);
      }
    }
    const json shape = {rows, static_cast<int64_t>(seq)};
    return json::array({{{"name", "input_ids"}, {"shape", shape}, {"datatype", "INT64"}, {"data", flat_ids}},
                        {{"name", "attention_mask"}, {"shape", shape}, {"datatype", "INT64"}, {"data", flat_mask}},
                        {{"name", "token_type_ids"}, {"shape", shape}, {"datatype", "INT64"}, {"data", flat_types}}});
  }

  // POST /v2/models/<path>/infer; the logits, and the version the server says it used.
  std::vector<float> Infer(const std::string& path, const json& inputs, std::string* version = nullptr) {
    const json out = Ok(client_->Post(absl::StrCat("/v2/models/", path, "/infer"), json{{"inputs", inputs}}.dump()));
    if (version != nullptr) *version = out.value("model_version", "");
    if (!out.contains("outputs") || out["outputs"].empty()) {
      ADD_FAILURE() << "no outputs: " << out;
      return {};
    }
    EXPECT_EQ(out["outputs"][0]["name"], "logits") << out;
    return out["outputs"][0]["data"].get<std::vector<float>>();
  }

  // Cohere rerank on entry `model`: relevance_score by document index.
  std::map<int64_t, double> Rerank(const std::string& model, const std::string& query,
                                   const std::vector<std::string>& docs) {
    const json res = Ok(client_->Post("/v1/rerank", json{{"model", model}, {"query", query}, {"documents", docs}}.dump()));
    EXPECT_EQ(res.value("model", ""), model) << res;
    std::map<int64_t, double> scores;
    if (!res.contains("results")) return scores;
    for (const json& r : res["results"]) scores[r["index"].get<int64_t>()] = r["relevance_score"].get<double>();
    EXPECT_EQ(scores.size(), docs.size()) << res;
    return scores;
  }

  // INT8 within the stated tolerance of FP32, and not identical to it.
  static void ExpectInt8WithinTolerance(const std::vector<float>& fp32, const std::vector<float>& int8) {
    ASSERT_EQ(fp32.size(), int8.size());
    ASSERT_FALSE(fp32.empty());
    double max_ref = 0, max_diff = 0;
    for (size_t i = 0; i < fp32.size(); ++i) {
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(fp32[i])));
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(fp32[i]) - int8[i]));
    }
    EXPECT_GT(max_ref, 0.0);
    EXPECT_LE(max_diff, kInt8RelativeTolerance * max_ref)
        << "max |int8 - fp32| " << max_diff << " over " << fp32.size() << " logits; largest |fp32| " << max_ref;
    // FP32 answers agree to 1e-5 however rows are batched and padded (tide_serve_api_test): a
    // smaller difference means the INT8 name is serving the FP32 model.
    EXPECT_GT(max_diff, 1e-5) << "INT8 and FP32 logits agree to FP32 precision: is the INT8 entry serving FP32?";
  }

  static void ExpectSame(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << what << ", row " << i;
  }

  static inline fs::path fp32_model_, int8_model_, tokenizer_;
  static inline std::string quantize_output_;
  std::unique_ptr<HttpClient> client_;
};

TEST_F(ServePrecisionTest, QuantizeReportsTheRewriteAndTheFileShrinks) {
  // tiny-bert has 2 layers x (Q, K, V, attention output, FFN in, FFN out) weight MatMuls; the
  // classifier head stays FP32.
  EXPECT_THAT(quantize_output_, HasSubstr("int8 (per-tensor, com.microsoft.DynamicQuantizeMatMul)"));
  EXPECT_THAT(quantize_output_, HasSubstr("12 nodes converted"));
  EXPECT_THAT(quantize_output_, HasSubstr("excluded by name pattern"));
  EXPECT_LT(fs::file_size(int8_model_), fs::file_size(fp32_model_));
}

TEST_F(ServePrecisionTest, BothVariantsAreReadyAsEntriesAndAsVersions) {
  EXPECT_EQ(Ok(client_->Get("/v2/health/ready")), json({{"ready", true}}));
  for (const char* path : {"/v2/models/tiny/ready", "/v2/models/tiny-int8/ready", "/v2/models/tiny-versions/ready",
                           "/v2/models/tiny-versions/versions/1/ready", "/v2/models/tiny-versions/versions/2/ready"}) {
    EXPECT_EQ(Ok(client_->Get(path))["ready"], true) << path;
  }
  const json md = Ok(client_->Get("/v2/models/tiny-versions"));
  EXPECT_EQ(md["versions"], json::array({"1", "2"})) << md;
  EXPECT_EQ(Ok(client_->Get("/v2/models/tiny-int8"))["versions"], json::array({"1"}));
  // Same signature for both precisions: INT8 changes weights, not the model's interface.
  const json fp32_md = Ok(client_->Get("/v2/models/tiny"));
  const json int8_md = Ok(client_->Get("/v2/models/tiny-int8"));
  EXPECT_EQ(fp32_md["inputs"], int8_md["inputs"]);
  EXPECT_EQ(fp32_md["outputs"], int8_md["outputs"]);
  const ClientResponse absent = client_->Get("/v2/models/tiny-versions/versions/3/ready");
  EXPECT_EQ(absent.status, 404) << absent.body;
  EXPECT_TRUE(ParseJson(absent.body).contains("error")) << absent.body;
}

TEST_F(ServePrecisionTest, KServeServesEachVariantAndInt8StaysWithinToleranceOnRandomInputs) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const json inputs = RandomTensorInputs(12, seed);
    std::string v1, v2, plain;
    const std::vector<float> fp32 = Infer("tiny", inputs);
    const std::vector<float> int8 = Infer("tiny-int8", inputs);
    const std::vector<float> version1 = Infer("tiny-versions/versions/1", inputs, &v1);
    const std::vector<float> version2 = Infer("tiny-versions/versions/2", inputs, &v2);
    const std::vector<float> newest = Infer("tiny-versions", inputs, &plain);
    ASSERT_EQ(fp32.size(), 12u);
    EXPECT_EQ(v1, "1");
    EXPECT_EQ(v2, "2");
    EXPECT_EQ(plain, "2") << "an unversioned request goes to the newest version";
    // FP32 scores do not depend on how the server batches rows, so version 1 must equal `tiny`.
    // INT8 scores do: the activations of a whole batch share one dynamic scale, so a row's INT8
    // score moves (here by up to ~1e-3) with the rows it was batched with. The INT8 answers are
    // therefore each checked against FP32, not against each other.
    EXPECT_NO_FATAL_FAILURE(ExpectSame(fp32, version1, "version 1 is the FP32 model"));
    EXPECT_NO_FATAL_FAILURE(ExpectInt8WithinTolerance(fp32, int8));
    EXPECT_NO_FATAL_FAILURE(ExpectInt8WithinTolerance(fp32, version2));
    EXPECT_NO_FATAL_FAILURE(ExpectInt8WithinTolerance(fp32, newest));
  }
}

TEST_F(ServePrecisionTest, CohereModelSelectsTheVariantAndInt8StaysWithinTolerance) {
  const std::vector<std::string> words = VocabWords();
  ASSERT_GE(words.size(), 50u);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> doc_words(3, 30);
  for (int q = 0; q < 3; ++q) {
    const std::string query = RandomText(words, 6, &rng);
    std::vector<std::string> docs;
    for (int d = 0; d < 10; ++d) docs.push_back(RandomText(words, doc_words(rng), &rng));
    SCOPED_TRACE(query);
    const std::map<int64_t, double> fp32 = Rerank("tiny", query, docs);
    const std::map<int64_t, double> int8 = Rerank("tiny-int8", query, docs);
    const std::map<int64_t, double> versions = Rerank("tiny-versions", query, docs);
    ASSERT_EQ(fp32.size(), docs.size());
    ASSERT_EQ(int8.size(), docs.size());
    ASSERT_EQ(versions.size(), docs.size());
    // relevance_score is sigmoid(logit): compare the logits it came from.
    std::vector<float> fp32_logits, int8_logits, versions_logits;
    for (size_t i = 0; i < docs.size(); ++i) {
      for (auto [scores, logits] : {std::pair{&fp32, &fp32_logits}, std::pair{&int8, &int8_logits},
                                    std::pair{&versions, &versions_logits}}) {
        const double p = scores->at(static_cast<int64_t>(i));
        ASSERT_GT(p, 0.0);
        ASSERT_LT(p, 1.0);
        logits->push_back(static_cast<float>(std::log(p / (1.0 - p))));
      }
    }
    EXPECT_NO_FATAL_FAILURE(ExpectInt8WithinTolerance(fp32_logits, int8_logits));
    // "model": "tiny-versions" gets the newest version, the INT8 one.
    EXPECT_NO_FATAL_FAILURE(ExpectInt8WithinTolerance(fp32_logits, versions_logits));
  }
}

TEST_F(ServePrecisionTest, QuantizingAnInt8ModelAgainIsRefusedWithAClearMessage) {
  const fs::path out = scratch_dir() / "twice.onnx";
  auto run = RunCommand({TideBinary().string(), "quantize", "--int8", int8_model_.string(), out.string()});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 2) << run->output;
  EXPECT_THAT(run->output, HasSubstr(int8_model_.string()));
  EXPECT_THAT(run->output, HasSubstr("already quantized"));
  EXPECT_THAT(run->output, HasSubstr("DynamicQuantizeMatMul"));
  EXPECT_THAT(run->output, HasSubstr("quantize the FP32 model instead"));
  EXPECT_FALSE(fs::exists(out)) << "a refused model must not leave an output file";
  // FP16 conversion of an INT8 model is refused too.
  run = RunCommand({TideBinary().string(), "quantize", "--fp16", int8_model_.string(), out.string()});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 2) << run->output;
  EXPECT_THAT(run->output, HasSubstr("already quantized"));
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(ServePrecisionTest, MalformedModelsGetClearErrorsFromQuantize) {
  std::ifstream in(fp32_model_, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 1000u);
  struct Case {
    const char* file;
    std::string contents;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"truncated.onnx", bytes.substr(0, bytes.size() / 2), "not a valid ONNX model"},
      {"text.onnx", "this is not an onnx model\n", "not a valid ONNX model"},
      {"empty.onnx", "", "no graph"},  // an empty protobuf parses as a ModelProto without a graph
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    const fs::path path = scratch_dir() / c.file;
    std::ofstream(path, std::ios::binary) << c.contents;
    const fs::path out = scratch_dir() / "out.onnx";
    auto run = RunCommand({TideBinary().string(), "quantize", "--int8", path.string(), out.string()});
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->exit_code, 2) << run->output;
    EXPECT_THAT(run->output, HasSubstr(path.string()));
    EXPECT_THAT(run->output, HasSubstr(c.message));
    EXPECT_FALSE(fs::exists(out));
  }
}

TEST_F(ServePrecisionTest, ServeRefusesARepositoryWithAMalformedInt8ModelNamingIt) {
  std::ifstream in(int8_model_, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const fs::path broken = scratch_dir() / "broken-int8.onnx";
  std::ofstream(broken, std::ios::binary) << bytes.substr(0, bytes.size() / 3);
  TempDir repo;
  ASSERT_TRUE(AddModel(repo.path(), "tiny", fp32_model_, tokenizer_, Config(false)).ok());
  ASSERT_TRUE(AddModel(repo.path(), "tiny-int8", broken, tokenizer_, Config(false)).ok());
  // `timeout` bounds the run should the server start after all (then it is killed: exit 124).
  auto run = RunCommand({"/usr/bin/timeout", "120", TideBinary().string(), "serve", "--model-repository", repo.path().string(),
                         "--port", "0", "--log-level", "warn"});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 1) << run->output;
  EXPECT_THAT(run->output, HasSubstr((repo.path() / "tiny-int8" / "1" / "model.onnx").string()));
  EXPECT_THAT(run->output, HasSubstr("not a valid ONNX model"));
  EXPECT_THAT(run->output, ::testing::Not(HasSubstr("listening on")));
}

}  // namespace
}  // namespace tide::blackbox
