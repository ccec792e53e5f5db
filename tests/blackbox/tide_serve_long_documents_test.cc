// Black-box test of long documents scored whole (`long_documents`, issue 17 item 1) on TEI's
// /rerank and Cohere's /v1/rerank against the real binary: a short document scores exactly as with
// truncation; a long one is scored over windows (the best window is at least the mean, usage counts
// every window's tokens); a bad mode and a document over max_chunks_per_document are 422 naming
// the field or parameter. The windows' boundaries and folding are unit-tested in
// src/serving/long_documents_test.cc.
#include <string>

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

}  // namespace
}  // namespace tide::blackbox
