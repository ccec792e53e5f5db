// Black-box check of error kinds: a set of bad requests sent to the real `tide serve` over HTTP gets
// the status, error_type and headers of the kind each mistake is (common/error.h's one table), and
// no error reaches the edge without a kind (tide_errors_without_kind_total stays 0 on /metrics).
// One tiny model (tools/export_model.py's tiny-bert, max_sequence_length 16).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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

constexpr int kMaxSequenceLength = 16;

class ServeErrorKindsTest : public SharedServerSuite<ServeErrorKindsTest> {
 protected:
  static void SetUpTestSuite() { StartSharedServer(AddModels, {"--log-level", "warn"}); }

  static absl::Status AddModels(const fs::path& repository) {
    auto tiny = ExportedTinyBert();
    if (!tiny.ok()) return tiny.status();
    return AddModel(repository, "bert", *tiny / "1" / "model.onnx", *tiny / "tokenizer.json",
                    absl::StrCat("name: \"bert\"\nbackend: \"onnxruntime\"\nmax_batch_size: 8\n",
                                 "parameters { key: \"max_sequence_length\" value { string_value: \"",
                                 kMaxSequenceLength, "\" } }\n"));
  }

  void SetUp() override {
    SharedServerSuite::SetUp();
    if (HasFatalFailure()) return;
    client_ = NewClient();
  }

  std::unique_ptr<HttpClient> client_;
};

struct BadRequest {
  const char* what;
  std::string method, path, body;
  std::vector<std::pair<std::string, std::string>> headers;
  int status;
  const char* error_type;
  const char* retry_after = nullptr;  // the Retry-After header expected, if any
};

TEST_F(ServeErrorKindsTest, BadRequestsGetTheirKindsAnswers) {
  const std::string long_text(400, 'a');
  const std::string words = [] {
    std::string s;
    for (int i = 0; i < 64; ++i) s += "word ";
    return s;
  }();
  const json too_long_ids = {{"inputs", {{{"name", "input_ids"}, {"shape", {1, kMaxSequenceLength + 1}},
                                          {"datatype", "INT64"},
                                          {"data", std::vector<int64_t>(kMaxSequenceLength + 1, 101)}}}}};
  const json float_ids = {{"inputs", {{{"name", "input_ids"}, {"shape", {1, 2}}, {"datatype", "FP32"}, {"data", {1.5, 2}}}}}};
  const json two_ways = {{"inputs", {{{"name", "input_ids"}, {"shape", {1, 2}}, {"datatype", "INT64"}, {"data", {101, 102}}},
                                     {{"name", "text"}, {"shape", {1}}, {"datatype", "BYTES"}, {"data", {"q"}}}}}};
  const std::vector<BadRequest> cases = {
      {"JSON syntax", "POST", "/rerank", R"({"query": "q", "texts": [)", {}, 400, "validation"},
      {"empty texts (TEI's Empty)", "POST", "/rerank", R"({"query":"q","texts":[]})", {}, 400, "empty"},
      {"wrong type", "POST", "/rerank", R"({"query":5,"texts":["a"]})", {}, 422, "validation"},
      {"too long with truncate=false (scoring)", "POST", "/rerank",
       json{{"query", "q"}, {"texts", {words}}, {"truncate", false}}.dump(), {}, 422, "validation"},
      {"unknown model", "GET", "/v2/models/no-such-model", "", {}, 404, "not_found"},
      {"unknown version", "GET", "/v2/models/bert/versions/7", "", {}, 404, "not_found"},
      {"no route", "GET", "/no/such/path", "", {}, 404, "not_found"},
      {"wrong method", "GET", "/rerank", "", {}, 405, "validation"},
      {"tensor of the wrong type (tensor rows)", "POST", "/v2/models/bert/infer", float_ids.dump(), {}, 422, "validation"},
      {"sequence over max_sequence_length (tensor rows)", "POST", "/v2/models/bert/infer", too_long_ids.dump(), {}, 422,
       "validation"},
      {"tokens and text at once (tensor rows)", "POST", "/v2/models/bert/infer", two_ways.dump(), {}, 422, "validation"},
      {"x-timeout-ms not an integer", "POST", "/rerank", R"({"query":"q","texts":["a"]})", {{"x-timeout-ms", "soon"}},
       400, "validation"},
      {"x-timeout-ms out of range (admission)", "POST", "/rerank", R"({"query":"q","texts":["a"]})",
       {{"x-timeout-ms", "0"}}, 422, "validation"},
      {"unsupported content coding (HTTP layer)", "POST", "/rerank", R"({"query":"q","texts":["a"]})",
       {{"Content-Encoding", "br"}}, 501, "unimplemented"},
      {"tokenize: empty batch", "POST", "/tokenize", R"({"inputs":[]})", {}, 400, "empty"},
  };
  for (const BadRequest& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<std::pair<std::string, std::string>> headers = c.headers;
    if (c.method == "POST") headers.emplace_back("Content-Type", "application/json");
    const ClientResponse r = client_->Send(c.method, c.path, c.body, headers);
    EXPECT_EQ(r.status, c.status) << r.error << r.body;
    const json body = ParseJson(r.body);
    ASSERT_TRUE(body.is_object()) << r.body;
    EXPECT_EQ(body.value("error_type", ""), c.error_type) << r.body;
    EXPECT_FALSE(body.value("error", "").empty()) << r.body;
    EXPECT_EQ(r.header("retry-after"), c.retry_after == nullptr ? "" : c.retry_after);
  }
  // No error above (nor any other this server answered) reached the edge without a kind.
  const ClientResponse metrics = client_->Get("/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_THAT(metrics.body, HasSubstr("\ntide_errors_without_kind_total 0\n"));
}

}  // namespace
}  // namespace tide::blackbox
