#include "api/tokenize.h"

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tide::api {
namespace {

using ::testing::HasSubstr;

TEST(ParseTokenizeRequestTest, SingleStringIsBatchOfOne) {
  absl::StatusOr<TokenizeRequest> r = ParseTokenizeRequest(R"({"inputs":"hello"})");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->inputs.size(), 1u);
  EXPECT_EQ(r->inputs[0].text, "hello");
  EXPECT_FALSE(r->inputs[0].text_pair.has_value());
  EXPECT_TRUE(r->add_special_tokens);
}

TEST(ParseTokenizeRequestTest, BatchOfSinglesAndPairs) {
  absl::StatusOr<TokenizeRequest> r = ParseTokenizeRequest(
      R"({"inputs":["a",["q","d"]],"add_special_tokens":false})");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->inputs.size(), 2u);
  EXPECT_EQ(r->inputs[0].text, "a");
  EXPECT_FALSE(r->inputs[0].text_pair.has_value());
  EXPECT_EQ(r->inputs[1].text, "q");
  EXPECT_EQ(r->inputs[1].text_pair, "d");
  EXPECT_FALSE(r->add_special_tokens);
}

TEST(ParseTokenizeRequestTest, Errors) {
  struct Case {
    const char* body;
    absl::StatusCode code;
    const char* part;
  };
  const Case cases[] = {
      {R"({"inputs":)", absl::StatusCode::kInvalidArgument, "JSON"},
      {R"({})", absl::StatusCode::kFailedPrecondition, "'inputs'"},
      {R"({"inputs":[]})", absl::StatusCode::kInvalidArgument, "'inputs' must not be empty"},
      {R"({"inputs":5})", absl::StatusCode::kFailedPrecondition, "'inputs' must be a string or an array"},
      {R"({"inputs":["a",5]})", absl::StatusCode::kFailedPrecondition, "'inputs[1]' must be a string or a pair"},
      {R"({"inputs":[["a"]]})", absl::StatusCode::kFailedPrecondition, "'inputs[0]' must be a string or a pair"},
      {R"({"inputs":[["a",1]]})", absl::StatusCode::kFailedPrecondition, "'inputs[0][1]' must be a string"},
      {R"({"inputs":"a","add_special_tokens":"no"})", absl::StatusCode::kFailedPrecondition, "'add_special_tokens' must be a boolean"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    absl::StatusOr<TokenizeRequest> r = ParseTokenizeRequest(c.body);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), c.code);
    EXPECT_THAT(r.status().message(), HasSubstr(c.part));
  }
}

TEST(ParseTokenizeRequestTest, Limits) {
  RequestLimits limits;
  limits.max_documents = 2;
  limits.max_text_chars = 3;
  EXPECT_THAT(ParseTokenizeRequest(R"({"inputs":["a","b","c"]})", limits).status().message(),
              HasSubstr("inputs has 3 entries; the limit is max_documents=2"));
  EXPECT_THAT(ParseTokenizeRequest(R"({"inputs":"abcd"})", limits).status().message(),
              HasSubstr("max_text_chars=3"));
  EXPECT_THAT(ParseTokenizeRequest(R"({"inputs":[["a","abcd"]]})", limits).status().message(),
              HasSubstr("inputs[0][1]"));
}

TEST(RenderTokenizeResponseTest, ShapeWithAndWithoutOffsets) {
  const std::vector<std::vector<TokenInfo>> tokens = {
      {{101, "[CLS]", true, std::nullopt, std::nullopt}, {7592, "hello", false, 0, 5}},
      {},
  };
  const std::string body = RenderTokenizeResponse(tokens);
  EXPECT_EQ(body,
            R"([[{"id":101,"special":true,"text":"[CLS]"},)"
            R"({"id":7592,"special":false,"start":0,"stop":5,"text":"hello"}],[]])");
}

TEST(RenderTokenizeResponseTest, InvalidUtf8PieceIsReplacedNotFatal) {
  const std::vector<std::vector<TokenInfo>> tokens = {{{5, "\xe2\x96", false, std::nullopt, std::nullopt}}};
  const nlohmann::json j = nlohmann::json::parse(RenderTokenizeResponse(tokens));
  EXPECT_EQ(j[0][0]["id"], 5);
  EXPECT_EQ(j[0][0]["text"], "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace tide::api
