// Black-box test of long documents scored whole (`long_documents`) on TEI's
// /rerank and Cohere's /v1/rerank against the real binary: a short document scores exactly as with
// truncation; a long one is scored over windows (the best window is at least the mean, usage counts
// every window's tokens); a bad mode and a document over max_chunks_per_document are 422 naming
// the field or parameter. KServe text tensors (text + text_pair) take `parameters.long_documents`
// and answer each input's raw logits folded over its windows: the same values as /rerank with
// raw_scores. The windows' boundaries and folding are unit-tested in
// src/serving/long_documents_test.cc and src/serving/tensor_rows_test.cc.
#include <cmath>
#include <string>
#include <vector>

#include "blackbox_support.h"
#include "gtest/gtest.h"
#include "http_client.h"

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using tide::testing::ClientResponse;

std::string Words(size_t n) {
  const char* words[] = {"the", "river", "flows", "past", "a", "quiet", "town", "near", "hills"};
  std::string out;
  for (size_t i = 0; i < n; ++i) out += std::string(i ? " " : "") + words[i % 9];
  return out;
}

class ServeLongDocumentsTest : public SharedServerSuite<ServeLongDocumentsTest> {
 protected:
  static void SetUpTestSuite() {
    StartSharedServer(
        [](const fs::path& repository) {
          return AddTinyBert(repository, "m",
                             TinyBertConfig("parameters { key: \"max_chunks_per_document\" value { string_value: \"8\" } }\n"));
        },
        {"--log-level", "warn"});
  }
  static double Score(const ClientResponse& r, size_t index) {
    for (const json& item : ParseJson(r.body)) {
      if (item["index"] == index) return item["score"].get<double>();
    }
    return -1;
  }
};

TEST_F(ServeLongDocumentsTest, ShortDocumentsAreUntouchedLongOnesAreScoredOverWindows) {
  auto client = NewClient();
  const std::string long_doc = Words(150);  // well past 64 tokens
  auto body = [&](const char* mode) {
    return json{{"query", "a town by the river"}, {"texts", {"quiet hills", long_doc}}, {"long_documents", mode}}.dump();
  };
  const ClientResponse cut = client->Post("/rerank", body("truncate"));
  const ClientResponse best = client->Post("/rerank", body("chunk_max"));
  const ClientResponse mean = client->Post("/rerank", body("chunk_mean"));
  ASSERT_EQ(cut.status, 200) << cut.body;
  ASSERT_EQ(best.status, 200) << best.body;
  ASSERT_EQ(mean.status, 200) << mean.body;
  EXPECT_EQ(Score(best, 0), Score(cut, 0));  // the short document: the same row, the same score
  EXPECT_EQ(Score(mean, 0), Score(cut, 0));
  EXPECT_GE(Score(best, 1), Score(mean, 1));
  EXPECT_NE(Score(best, 1), Score(cut, 1));

  // Cohere: usage counts every window's tokens.
  auto cohere = [&](const char* mode) {
    return client->Post("/v1/rerank", json{{"query", "a town by the river"}, {"documents", {long_doc}},
                                           {"long_documents", mode}}.dump());
  };
  const ClientResponse cohere_cut = cohere("truncate");
  const ClientResponse cohere_best = cohere("chunk_max");
  ASSERT_EQ(cohere_best.status, 200) << cohere_best.body;
  EXPECT_GT(ParseJson(cohere_best.body)["usage"]["total_tokens"].get<int>(),
            ParseJson(cohere_cut.body)["usage"]["total_tokens"].get<int>() * 2);
}

TEST_F(ServeLongDocumentsTest, BadModesAndTooManyWindowsAre422) {
  auto client = NewClient();
  const ClientResponse bad = client->Post(
      "/rerank", json{{"query", "q"}, {"texts", {"a"}}, {"long_documents", "chunk_median"}}.dump());
  EXPECT_EQ(bad.status, 422) << bad.body;
  EXPECT_NE(bad.body.find("long_documents"), std::string::npos) << bad.body;
  const ClientResponse huge = client->Post(
      "/rerank", json{{"query", "q"}, {"texts", {"a", Words(2000)}}, {"long_documents", "chunk_max"}}.dump());
  EXPECT_EQ(huge.status, 422) << huge.body;
  EXPECT_NE(huge.body.find("max_chunks_per_document is 8"), std::string::npos) << huge.body;
  EXPECT_NE(huge.body.find("texts[1]"), std::string::npos) << huge.body;
}

// KServe v2 text tensors: every (text, text_pair) row a (query, document) pair; the windows' raw
// logits fold per input exactly as /rerank's raw scores do, short documents are untouched, and what
// cannot be windowed (token tensors, text alone) is refused only when the request asks for it.
TEST_F(ServeLongDocumentsTest, KServeTextTensorsScoreLongDocumentsLikeRerank) {
  auto client = NewClient();
  const std::string query = "a town by the river";
  const std::vector<std::string> docs = {"quiet hills", Words(150)};
  auto infer = [&](const json& parameters, const std::vector<std::string>& texts) {
    json body = {{"inputs", json::array({{{"name", "text"}, {"shape", {texts.size()}}, {"datatype", "BYTES"},
                                          {"data", std::vector<std::string>(texts.size(), query)}},
                                         {{"name", "text_pair"}, {"shape", {texts.size()}}, {"datatype", "BYTES"},
                                          {"data", texts}}})}};
    if (!parameters.is_null()) body["parameters"] = parameters;
    return client->Post("/v2/models/m/infer", body.dump());
  };
  auto logits = [](const ClientResponse& r) {
    const json out = ParseJson(r.body)["outputs"][0];
    EXPECT_EQ(out["shape"], json::array({2, 1})) << r.body;  // one row per input, windows folded
    return out["data"].get<std::vector<double>>();
  };
  auto rerank = [&](const char* mode) {
    const ClientResponse r = client->Post("/rerank", json{{"query", query}, {"texts", docs}, {"raw_scores", true},
                                                          {"long_documents", mode}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return std::vector<double>{Score(r, 0), Score(r, 1)};
  };
  const ClientResponse plain = infer(nullptr, docs);
  ASSERT_EQ(plain.status, 200) << plain.body;
  const std::vector<double> cut = logits(plain);
  for (const char* mode : {"truncate", "chunk_max", "chunk_mean"}) {
    SCOPED_TRACE(mode);
    const ClientResponse r = infer(json{{"long_documents", mode}}, docs);
    ASSERT_EQ(r.status, 200) << r.body;
    const std::vector<double> got = logits(r);
    const std::vector<double> want = rerank(mode);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_NEAR(got[0], want[0], 1e-4);
    EXPECT_NEAR(got[1], want[1], 1e-4);
    EXPECT_NEAR(got[0], cut[0], 1e-6);  // the short document: the same row as without
    if (std::string(mode) != "truncate") EXPECT_GT(std::abs(got[1] - cut[1]), 1e-6);  // the long one: windows
  }

  // Refused, naming what is wrong.
  const ClientResponse bad = infer(json{{"long_documents", "chunk_median"}}, docs);
  EXPECT_EQ(bad.status, 422) << bad.body;
  EXPECT_NE(bad.body.find("long_documents"), std::string::npos) << bad.body;
  const ClientResponse huge = infer(json{{"long_documents", "chunk_max"}}, {"a", Words(2000)});
  EXPECT_EQ(huge.status, 422) << huge.body;
  EXPECT_NE(huge.body.find("text_pair[1]"), std::string::npos) << huge.body;
  EXPECT_NE(huge.body.find("max_chunks_per_document is 8"), std::string::npos) << huge.body;
  const ClientResponse alone = client->Post(
      "/v2/models/m/infer",
      json{{"inputs", json::array({{{"name", "text"}, {"shape", {1}}, {"datatype", "BYTES"}, {"data", {query}}}})},
           {"parameters", {{"long_documents", "chunk_max"}}}}.dump());
  EXPECT_EQ(alone.status, 422) << alone.body;
  EXPECT_NE(alone.body.find("text_pair"), std::string::npos) << alone.body;
}

}  // namespace
}  // namespace tide::blackbox
