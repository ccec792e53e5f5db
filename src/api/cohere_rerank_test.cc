#include "api/cohere_rerank.h"

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tide::api {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseCohereRerankRequestTest, StringsAndTextObjectsMix) {
  absl::StatusOr<CohereRerankRequest> r = ParseCohereRerankRequest(
      R"({"model":"bge","query":"q","documents":["a",{"text":"b","title":"ignored"}],
          "top_n":1,"return_documents":true,"max_tokens_per_doc":128})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model, "bge");
  EXPECT_EQ(r->query, "q");
  EXPECT_THAT(r->documents, ElementsAre("a", "b"));
  EXPECT_EQ(r->top_n, 1u);
  EXPECT_TRUE(r->return_documents);
  EXPECT_EQ(r->max_tokens_per_doc, 128u);
}

TEST(ParseCohereRerankRequestTest, Defaults) {
  absl::StatusOr<CohereRerankRequest> r =
      ParseCohereRerankRequest(R"({"query":"q","documents":["a"]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->model.has_value());
  EXPECT_FALSE(r->top_n.has_value());
  EXPECT_FALSE(r->return_documents);
  EXPECT_FALSE(r->max_tokens_per_doc.has_value());
}

TEST(ParseCohereRerankRequestTest, Errors) {
  struct Case {
    const char* body;
    absl::StatusCode code;
    const char* part;
  };
  const Case cases[] = {
      {R"({"query":"q","documents":["a"],})", absl::StatusCode::kInvalidArgument, "JSON"},
      {R"({"documents":["a"]})", absl::StatusCode::kFailedPrecondition, "'query'"},
      {R"({"query":"","documents":["a"]})", absl::StatusCode::kFailedPrecondition, "'query' must not be empty"},
      {R"({"query":"q"})", absl::StatusCode::kFailedPrecondition, "'documents'"},
      {R"({"query":"q","documents":[]})", absl::StatusCode::kInvalidArgument, "'documents' must not be empty"},
      {R"({"query":"q","documents":[1]})", absl::StatusCode::kFailedPrecondition, "'documents[0]' must be a string or an object"},
      {R"({"query":"q","documents":["a"],"rank_fields":"text"})", absl::StatusCode::kFailedPrecondition, "'rank_fields'"},
      {R"({"query":"q","documents":[{"title":"x"}]})", absl::StatusCode::kFailedPrecondition, "'documents[0].text'"},
      {R"({"query":"q","documents":[{"text":3}]})", absl::StatusCode::kFailedPrecondition, "'documents[0].text' must be a string"},
      {R"({"query":"q","documents":["a"],"top_n":0})", absl::StatusCode::kFailedPrecondition, "'top_n' must be at least 1"},
      {R"({"query":"q","documents":["a"],"top_n":-2})", absl::StatusCode::kFailedPrecondition, "'top_n' must be a non-negative integer"},
      {R"({"query":"q","documents":["a"],"top_n":1.5})", absl::StatusCode::kFailedPrecondition, "'top_n'"},
      {R"({"query":"q","documents":["a"],"return_documents":"true"})", absl::StatusCode::kFailedPrecondition, "'return_documents' must be a boolean"},
      {R"({"query":"q","documents":["a"],"model":7})", absl::StatusCode::kFailedPrecondition, "'model' must be a string"},
      {R"({"query":"q","documents":["a"],"max_tokens_per_doc":0})", absl::StatusCode::kFailedPrecondition, "'max_tokens_per_doc'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    absl::StatusOr<CohereRerankRequest> r = ParseCohereRerankRequest(c.body);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), c.code);
    EXPECT_THAT(r.status().message(), HasSubstr(c.part));
  }
}

TEST(ParseCohereRerankRequestTest, Limits) {
  RequestLimits limits;
  limits.max_documents = 1;
  absl::StatusOr<CohereRerankRequest> r =
      ParseCohereRerankRequest(R"({"query":"q","documents":["a","b"]})", limits);
  EXPECT_THAT(r.status().message(), HasSubstr("documents has 2 entries; the limit is max_documents=1"));
  limits = RequestLimits{};
  limits.max_text_chars = 2;
  r = ParseCohereRerankRequest(R"({"query":"q","documents":[{"text":"abc"}]})", limits);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("documents[0].text"));
  EXPECT_THAT(r.status().message(), HasSubstr("max_text_chars=2"));
}

TEST(RenderCohereRerankResponseTest, SortedCutToTopNWithDocuments) {
  CohereRerankRequest request;
  request.documents = {"d0", "d1", "d2", "d3"};
  request.top_n = 2;
  request.return_documents = true;
  const std::vector<float> scores = {0.1f, 0.9f, 0.5f, 0.7f};
  absl::StatusOr<std::string> body =
      RenderCohereRerankResponse(request, scores, {"req-1", "bge-reranker-base", 42});
  ASSERT_TRUE(body.ok()) << body.status();
  const nlohmann::json j = nlohmann::json::parse(*body);
  EXPECT_EQ(j["id"], "req-1");
  EXPECT_EQ(j["model"], "bge-reranker-base");
  EXPECT_EQ(j["usage"]["total_tokens"], 42);
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["index"], 1);
  EXPECT_EQ(j["results"][0]["relevance_score"].get<double>(), 0.9);
  EXPECT_EQ(j["results"][0]["document"]["text"], "d1");
  EXPECT_EQ(j["results"][1]["index"], 3);
  EXPECT_EQ(j["results"][1]["document"]["text"], "d3");
}

TEST(RenderCohereRerankResponseTest, TopNBeyondCountAndNoDocuments) {
  CohereRerankRequest request;
  request.documents = {"a", "b"};
  request.top_n = 10;
  const std::vector<float> scores = {2.0f, 3.0f};
  absl::StatusOr<std::string> body = RenderCohereRerankResponse(request, scores, {"i", "m", 7});
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(*body,
            R"({"id":"i",)" R"("meta":{"api_version":{"version":"1"},"billed_units":{"search_units":1}},)" R"("model":"m","results":[{"index":1,"relevance_score":3.0},)"
            R"({"index":0,"relevance_score":2.0}],"usage":{"total_tokens":7}})");
}

TEST(RenderCohereRerankResponseTest, DegradedIsMarkedOnceAtTheTop) {
  CohereRerankRequest request;
  request.documents = {"a"};
  const std::vector<float> scores = {2.0f};
  absl::StatusOr<std::string> body = RenderCohereRerankResponse(request, scores, {"i", "m", 0, /*degraded=*/true});
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(*body, R"({"degraded":true,"id":"i",)" R"("meta":{"api_version":{"version":"1"},"billed_units":{"search_units":1}},)" R"("model":"m","results":[{"index":0,"relevance_score":2.0}],)"
                   R"("usage":{"total_tokens":0}})");
}

TEST(ParseCohereRerankRequestTest, RankFieldsScoreTheChosenFieldsInOrder) {
  auto r = ParseCohereRerankRequest(
      R"({"query":"q","rank_fields":["title","year","text"],
          "documents":[{"title":"Pandas","text":"bears","year":2020},"plain",{"title":"only"}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->documents, ElementsAre("title: Pandas\nyear: 2020\ntext: bears", "plain", "title: only"));
  EXPECT_THAT(ParseCohereRerankRequest(R"({"query":"q","rank_fields":["x"],"documents":[{"text":"a"}]})").status().message(),
              HasSubstr("'documents[0]' has none of the rank_fields"));
  EXPECT_EQ(ParseCohereRerankRequest(R"({"query":"q","rank_fields":[1],"documents":["a"]})").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ParseCohereRerankRequestTest, JinaModelsReturnDocumentsByDefault) {
  EXPECT_TRUE(ParseCohereRerankRequest(R"({"model":"jina-reranker-v2","query":"q","documents":["a"]})")->return_documents);
  EXPECT_FALSE(ParseCohereRerankRequest(R"({"model":"jina-reranker-v2","query":"q","documents":["a"],
                                            "return_documents":false})")->return_documents);
  EXPECT_FALSE(ParseCohereRerankRequest(R"({"model":"rerank-v3.5","query":"q","documents":["a"]})")->return_documents);
}

TEST(RenderCohereRerankResponseTest, ObjectDocumentsComeBackWithEveryFieldAndV2Meta) {
  auto request = ParseCohereRerankRequest(
      R"({"query":"q","documents":[{"text":"a","title":"T","url":"http://x"},"b"],"return_documents":true})", {},
      CohereApiVersion::kV2);
  ASSERT_TRUE(request.ok());
  const std::vector<float> scores = {2.0f, 1.0f};
  const nlohmann::json j = nlohmann::json::parse(*RenderCohereRerankResponse(*request, scores, {"i", "m", 3}));
  EXPECT_EQ(j["results"][0]["document"], nlohmann::json::parse(R"({"text":"a","title":"T","url":"http://x"})"));
  EXPECT_EQ(j["results"][1]["document"], nlohmann::json::parse(R"({"text":"b"})"));
  EXPECT_EQ(j["meta"]["api_version"]["version"], "2");
  EXPECT_EQ(j["meta"]["billed_units"]["search_units"], 1);
}

TEST(RenderCohereRerankResponseTest, CountMismatchIsInternal) {
  CohereRerankRequest request;
  request.documents = {"a"};
  const std::vector<float> scores = {1.0f, 2.0f};
  EXPECT_EQ(RenderCohereRerankResponse(request, scores, {}).status().code(),
            absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace tide::api
