#include "api/rerank.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "api/cohere_rerank.h"
#include "api/status_http.h"
#include "api/tei_predict.h"
#include "api/tokenize.h"

namespace tide::api {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseRerankRequestTest, DefaultsFollowTei) {
  absl::StatusOr<RerankRequest> r = ParseRerankRequest(R"({"query":"q","texts":["a","b"]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->query, "q");
  EXPECT_THAT(r->texts, ElementsAre("a", "b"));
  EXPECT_FALSE(r->raw_scores);
  EXPECT_FALSE(r->return_text);
  EXPECT_TRUE(r->truncate);
  EXPECT_FALSE(r->truncation_direction.has_value());  // the model's default
}

TEST(ParseRerankRequestTest, AllFieldsAndUnknownFieldsIgnored) {
  absl::StatusOr<RerankRequest> r = ParseRerankRequest(
      R"({"query":"what","texts":["x"],"raw_scores":true,"return_text":true,"truncate":false,
          "truncation_direction":"Left","future_field":{"a":[1]}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->raw_scores);
  EXPECT_TRUE(r->return_text);
  EXPECT_FALSE(r->truncate);
  EXPECT_EQ(r->truncation_direction, tokenizer::TruncationDirection::kLeft);
}

TEST(ParseRerankRequestTest, NullMeansDefault) {
  absl::StatusOr<RerankRequest> r =
      ParseRerankRequest(R"({"query":"q","texts":["a"],"truncate":null})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->truncate);
}

struct ErrorCase {
  const char* body;
  absl::StatusCode code;
  const char* message_part;
};

TEST(ParseRerankRequestTest, Errors) {
  const ErrorCase cases[] = {
      {R"({"query":"q","texts":["a"])", absl::StatusCode::kInvalidArgument, "not valid JSON"},
      {R"({"texts":["a"]})", absl::StatusCode::kFailedPrecondition, "'query'"},
      {R"({"query":"","texts":["a"]})", absl::StatusCode::kFailedPrecondition, "'query' must not be empty"},
      {R"({"query":5,"texts":["a"]})", absl::StatusCode::kFailedPrecondition, "'query' must be a string; got integer"},
      {R"({"query":"q"})", absl::StatusCode::kFailedPrecondition, "'texts'"},
      {R"({"query":"q","texts":[]})", absl::StatusCode::kInvalidArgument, "'texts' must not be empty"},
      {R"({"query":"q","texts":"a"})", absl::StatusCode::kFailedPrecondition, "'texts' must be an array"},
      {R"({"query":"q","texts":["a",7]})", absl::StatusCode::kFailedPrecondition, "'texts[1]' must be a string"},
      {R"({"query":"q","texts":["a"],"raw_scores":"yes"})", absl::StatusCode::kFailedPrecondition, "'raw_scores' must be a boolean"},
      {R"({"query":"q","texts":["a"],"truncate":1})", absl::StatusCode::kFailedPrecondition, "'truncate' must be a boolean"},
      {R"({"query":"q","texts":["a"],"truncation_direction":"Up"})", absl::StatusCode::kFailedPrecondition, "truncation_direction"},
      {R"({"query":"q","texts":["a"],"truncation_direction":1})", absl::StatusCode::kFailedPrecondition, "truncation_direction"},
      {R"(["q"])", absl::StatusCode::kFailedPrecondition, "JSON object"},
  };
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.body);
    absl::StatusOr<RerankRequest> r = ParseRerankRequest(c.body);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), c.code);
    EXPECT_THAT(r.status().message(), HasSubstr(c.message_part));
  }
}

TEST(ParseRerankRequestTest, LimitsNameThemselves) {
  RequestLimits limits;
  limits.max_documents = 2;
  limits.max_text_chars = 5;
  absl::StatusOr<RerankRequest> r =
      ParseRerankRequest(R"({"query":"q","texts":["a","b","c"]})", limits);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("texts has 3 entries; the limit is max_documents=2"));

  r = ParseRerankRequest(R"({"query":"q","texts":["a","abcdef"]})", limits);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("'texts[1]' has 6 bytes; the limit is max_text_chars=5"));

  r = ParseRerankRequest(R"({"query":"abcdef","texts":["a"]})", limits);
  EXPECT_THAT(r.status().message(), HasSubstr("'query' has 6 bytes"));

  limits = RequestLimits{};
  limits.max_json_depth = 2;
  r = ParseRerankRequest(R"({"query":"q","texts":["a"],"x":[[1]]})", limits);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("max_json_depth=2"));
  // The same brackets inside a string are fine.
  EXPECT_TRUE(ParseRerankRequest(R"({"query":"[[[[","texts":["]]]]"]})", limits).ok());
}

TEST(ParseRerankRequestTest, ErrorsMapToTeiHttpStatuses) {
  EXPECT_EQ(HttpStatusFor(ParseRerankRequest("{").status()), 400);
  EXPECT_EQ(HttpStatusFor(ParseRerankRequest(R"({"query":"q","texts":[]})").status()), 400);  // TEI's Empty
  EXPECT_EQ(ErrorTypeFor(ParseRerankRequest(R"({"query":"q","texts":[]})").status()), "empty");
  EXPECT_EQ(HttpStatusFor(ParseRerankRequest(R"({"query":"","texts":["a"]})").status()), 422);
}

TEST(RenderRerankResponseTest, SortedDescendingWithOptionalText) {
  RerankRequest request;
  request.texts = {"zero", "one", "two"};
  const std::vector<float> scores = {0.25f, 0.75f, 0.5f};
  absl::StatusOr<std::string> body = RenderRerankResponse(request, scores);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, R"([{"index":1,"score":0.75},{"index":2,"score":0.5},{"index":0,"score":0.25}])");

  request.return_text = true;
  body = RenderRerankResponse(request, scores);
  ASSERT_TRUE(body.ok());
  const nlohmann::json j = nlohmann::json::parse(*body);
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["text"], "one");
  EXPECT_EQ(j[1]["text"], "two");
  EXPECT_EQ(j[2]["text"], "zero");
}

TEST(RenderRerankResponseTest, DegradedMarksEveryResult) {
  RerankRequest request;
  request.texts = {"zero", "one"};
  const std::vector<float> scores = {0.25f, 0.75f};
  absl::StatusOr<std::string> body = RenderRerankResponse(request, scores, /*degraded=*/true);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, R"([{"degraded":true,"index":1,"score":0.75},{"degraded":true,"index":0,"score":0.25}])");
}

TEST(RenderRerankResponseTest, TiesKeepRequestOrderAndNegativeScoresSort) {
  RerankRequest request;
  request.texts = {"a", "b", "c", "d"};
  const std::vector<float> scores = {-3.0f, 1.0f, -3.0f, 1.0f};
  absl::StatusOr<std::string> body = RenderRerankResponse(request, scores);
  ASSERT_TRUE(body.ok());
  const nlohmann::json j = nlohmann::json::parse(*body);
  std::vector<int> order;
  for (const auto& item : j) order.push_back(item["index"].get<int>());
  EXPECT_THAT(order, ElementsAre(1, 3, 0, 2));
}

TEST(RenderRerankResponseTest, ScoresRoundTripAsFloat) {
  RerankRequest request;
  request.texts = {"a"};
  const std::vector<float> scores = {0.987654321f};
  absl::StatusOr<std::string> body = RenderRerankResponse(request, scores);
  ASSERT_TRUE(body.ok());
  const double back = nlohmann::json::parse(*body)[0]["score"].get<double>();
  EXPECT_EQ(static_cast<float>(back), scores[0]);
}

TEST(RenderRerankResponseTest, MismatchAndNonFiniteAreInternal) {
  RerankRequest request;
  request.texts = {"a", "b"};
  const std::vector<float> one = {1.0f};
  EXPECT_EQ(RenderRerankResponse(request, one).status().code(), absl::StatusCode::kInternal);
  const std::vector<float> nan = {1.0f, std::numeric_limits<float>::quiet_NaN()};
  absl::StatusOr<std::string> r = RenderRerankResponse(request, nan);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(r.status().message(), HasSubstr("document 1"));
}

// `instruction` (decoder-only rerankers' prompt): optional on rerank, Cohere, predict and tokenize;
// a string within max_text_chars, absent or null unset, another type 422 naming it.
TEST(ParseRerankRequestTest, InstructionOnEveryTextBody) {
  auto plain = ParseRerankRequest(R"({"query": "q", "texts": ["a"]})");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->instruction.has_value());
  auto null = ParseRerankRequest(R"({"query": "q", "texts": ["a"], "instruction": null})");
  ASSERT_TRUE(null.ok());
  EXPECT_FALSE(null->instruction.has_value());
  auto given = ParseRerankRequest(R"({"query": "q", "texts": ["a"], "instruction": "judge"})");
  ASSERT_TRUE(given.ok());
  EXPECT_EQ(given->instruction, "judge");
  auto wrong = ParseRerankRequest(R"({"query": "q", "texts": ["a"], "instruction": 3})");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(HttpStatusFor(wrong.status()), 422);
  EXPECT_THAT(wrong.status().message(), HasSubstr("instruction"));
  RequestLimits limits;
  limits.max_text_chars = 4;
  auto long_one = ParseRerankRequest(R"({"query": "q", "texts": ["a"], "instruction": "judge"})", limits);
  ASSERT_FALSE(long_one.ok());
  EXPECT_THAT(long_one.status().message(), HasSubstr("instruction"));

  auto cohere = ParseCohereRerankRequest(R"({"query": "q", "documents": ["a"], "instruction": "judge"})");
  ASSERT_TRUE(cohere.ok()) << cohere.status();
  EXPECT_EQ(cohere->instruction, "judge");
  auto predict = ParsePredictRequest(R"({"inputs": [["q", "d"]], "instruction": "judge"})");
  ASSERT_TRUE(predict.ok()) << predict.status();
  EXPECT_EQ(predict->instruction, "judge");
  auto tokenize = ParseTokenizeRequest(R"({"inputs": [["q", "d"]], "instruction": "judge"})");
  ASSERT_TRUE(tokenize.ok()) << tokenize.status();
  EXPECT_EQ(tokenize->instruction, "judge");
}

}  // namespace
}  // namespace tide::api
