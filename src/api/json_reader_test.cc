#include "api/json_reader.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tide::api {
namespace {

using ::testing::HasSubstr;

std::string Nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(CheckJsonDepthTest, AcceptsUpToTheLimitAndRejectsBeyond) {
  EXPECT_TRUE(CheckJsonDepth(Nested(32), 32).ok());
  absl::Status s = CheckJsonDepth(Nested(33), 32);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("max_json_depth=32"));
}

TEST(CheckJsonDepthTest, ObjectsAndArraysBothCount) {
  EXPECT_TRUE(CheckJsonDepth(R"({"a":{"b":[1]}})", 3).ok());
  EXPECT_FALSE(CheckJsonDepth(R"({"a":{"b":[1]}})", 2).ok());
}

TEST(CheckJsonDepthTest, BracketsInsideStringsDoNotCount) {
  const std::string body = R"({"q":"[[[[[[[[{{{{{{{{"})";
  EXPECT_TRUE(CheckJsonDepth(body, 1).ok());
}

TEST(CheckJsonDepthTest, EscapedQuotesKeepTheStringOpen) {
  // The string is  \"[[[[  — the escaped quote does not close it, so the brackets are text.
  EXPECT_TRUE(CheckJsonDepth(R"({"q":"\"[[[[[["})", 1).ok());
  // An escaped backslash before the quote does close the string: these brackets count.
  EXPECT_FALSE(CheckJsonDepth(R"({"q":"\\", "r":[[[]]]})", 3).ok());
  EXPECT_TRUE(CheckJsonDepth(R"({"q":"\\", "r":[[[]]]})", 4).ok());
}

TEST(CheckJsonDepthTest, SiblingsDoNotAccumulate) {
  EXPECT_TRUE(CheckJsonDepth("[[],[],[],[],[],[]]", 2).ok());
}

TEST(ParseJsonObjectTest, SyntaxErrorIsInvalidArgument) {
  absl::StatusOr<nlohmann::json> r = ParseJsonObject(R"({"a": )", RequestLimits{});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("not valid JSON"));
}

TEST(ParseJsonObjectTest, InvalidUtf8InStringIsInvalidArgument) {
  const std::string body = "{\"query\": \"a\xff\xfe b\"}";
  EXPECT_EQ(ParseJsonObject(body, RequestLimits{}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ParseJsonObjectTest, NonObjectIsFailedPrecondition) {
  absl::StatusOr<nlohmann::json> r = ParseJsonObject("[1,2]", RequestLimits{});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("JSON object"));
}

TEST(ParseJsonObjectTest, DepthIsCheckedBeforeParsing) {
  // Unterminated and hugely deep: the pre-scan must answer before the parser recurses.
  const std::string body = "{\"a\":" + std::string(100000, '[');
  absl::StatusOr<nlohmann::json> r = ParseJsonObject(body, RequestLimits{});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("max_json_depth"));
}

TEST(ObjectReaderTest, TypedFieldsAndPaths) {
  const nlohmann::json j = nlohmann::json::parse(R"({"b": true, "s": "x", "n": 3, "neg": -1,
                                                   "f": 1.5, "nul": null})");
  const ObjectReader reader(j, "inputs[0]");
  bool b = false;
  EXPECT_TRUE(reader.Bool("b", &b).ok());
  EXPECT_TRUE(b);
  bool untouched = true;
  EXPECT_TRUE(reader.Bool("nul", &untouched).ok());
  EXPECT_TRUE(untouched);
  absl::Status wrong = reader.Bool("s", &b);
  EXPECT_EQ(wrong.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(wrong.message(), HasSubstr("'inputs[0].s' must be a boolean; got string"));

  std::optional<size_t> n;
  EXPECT_TRUE(reader.Size("n", &n).ok());
  EXPECT_EQ(n, 3u);
  EXPECT_FALSE(reader.Size("neg", &n).ok());
  EXPECT_FALSE(reader.Size("f", &n).ok());

  std::string s;
  EXPECT_EQ(reader.String("missing", true, 10, &s).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(reader.String("missing", true, 10, &s).message(), HasSubstr("inputs[0].missing"));
  EXPECT_TRUE(reader.String("missing", false, 10, &s).ok());
  EXPECT_TRUE(reader.String("s", true, 1, &s).ok());
  EXPECT_EQ(s, "x");
  EXPECT_THAT(reader.String("s", true, 0, &s).message(), HasSubstr("max_text_chars=0"));
}

TEST(FloatForJsonTest, ShortestFloatFormSurvivesDump) {
  EXPECT_EQ(nlohmann::json(FloatForJson(0.1f)).dump(), "0.1");
  EXPECT_EQ(nlohmann::json(FloatForJson(-2.5f)).dump(), "-2.5");
  const float odd = 0.123456789f;
  const double rendered = nlohmann::json::parse(nlohmann::json(FloatForJson(odd)).dump()).get<double>();
  EXPECT_EQ(static_cast<float>(rendered), odd);
}

TEST(CheckJsonCostTest, CountsStringsAndContainersAgainstMaxDocuments) {
  RequestLimits limits;
  limits.max_documents = 1;  // bound: 4 x 1 + 1024 = 1028
  std::string ok = "[";
  for (int i = 0; i < 1028; ++i) ok += i == 0 ? "\"x\"" : ",\"x\"";
  ok += "]";
  EXPECT_TRUE(CheckJsonCost(ok, limits).ok());
  const std::string too_many = ok.substr(0, ok.size() - 1) + ",\"y\"]";
  absl::Status s = CheckJsonCost(too_many, limits);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("more than 1028 strings"));
  EXPECT_THAT(s.message(), HasSubstr("max_documents=1"));
  // Quotes inside strings (escaped) do not start strings.
  EXPECT_TRUE(CheckJsonCost(R"({"q":"\"\"\"\"\""})", limits).ok());
  // Nested arrays count as containers, by the same bound.
  std::string rows = "[";
  for (int i = 0; i < 1100; ++i) rows += i == 0 ? "[1]" : ",[1]";
  rows += "]";
  s = CheckJsonCost(rows, limits);
  EXPECT_THAT(s.message(), HasSubstr("arrays/objects"));
  limits.max_json_strings = 5000;  // an explicit bound wins
  EXPECT_TRUE(CheckJsonCost(rows, limits).ok());
  EXPECT_EQ(MaxJsonStrings(limits), 5000u);
  limits.max_json_strings = 1000;
  EXPECT_THAT(CheckJsonCost(rows, limits).message(), HasSubstr("the limit is max_json_strings=1000"));
}

TEST(CheckJsonCostTest, ParseJsonObjectAppliesIt) {
  RequestLimits limits;
  limits.max_json_strings = 3;
  EXPECT_TRUE(ParseJsonObject(R"({"a":"b"})", limits).ok());
  EXPECT_EQ(ParseJsonObject(R"({"a":"b","c":"d"})", limits).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace tide::api
