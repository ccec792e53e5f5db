#include "server/http/router.h"

#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tide::http {
namespace {

using ::testing::HasSubstr;

Request MakeRequest(std::string method, std::string path) {
  Request request;
  request.method = std::move(method);
  request.path = std::move(path);
  request.target = request.path;
  return request;
}

// Runs the router on one request and returns what its Responder received.
Response Route(Router& router, std::string method, std::string path) {
  std::optional<Response> got;
  router.Handle(MakeRequest(std::move(method), std::move(path)),
                Responder::FromCallback([&got](Response response) { got = std::move(response); }));
  EXPECT_TRUE(got.has_value()) << "the router did not answer";
  return got.value_or(Response{});
}

RouteHandler Echo(std::string tag) {
  return [tag](Request request, PathParams params, Responder respond) {
    nlohmann::json body = {{"route", tag}};
    for (const auto& [name, value] : params.all()) body[name] = value;
    Response response;
    response.body = body.dump();
    std::move(respond)(std::move(response));
  };
}

std::string Header(const Response& response, std::string_view name) {
  for (const auto& [key, value] : response.headers) {
    if (key == name) return value;
  }
  return "";
}

TEST(RouterTest, MatchesLiteralAndParameterSegments) {
  Router router;
  ASSERT_TRUE(router.Add("POST", "/v2/models/{model}/versions/{version}/infer", Echo("infer")).ok());
  ASSERT_TRUE(router.Add("GET", "/v2/health/ready", Echo("ready")).ok());
  Response infer = Route(router, "POST", "/v2/models/mini%2Dlm/versions/3/infer");
  EXPECT_EQ(infer.status, 200);
  EXPECT_EQ(nlohmann::json::parse(infer.body),
            nlohmann::json({{"route", "infer"}, {"model", "mini-lm"}, {"version", "3"}}));
  EXPECT_EQ(nlohmann::json::parse(Route(router, "GET", "/v2/health/ready").body)["route"], "ready");
}

TEST(RouterTest, UnknownPathIs404) {
  Router router;
  ASSERT_TRUE(router.Add("GET", "/v2/health/ready", Echo("ready")).ok());
  Response response = Route(router, "GET", "/v2/health/live");
  EXPECT_EQ(response.status, 404);
  EXPECT_EQ(nlohmann::json::parse(response.body),
            nlohmann::json({{"error", "no route for GET /v2/health/live"}, {"error_type", "not_found"}}));
  EXPECT_EQ(Route(router, "GET", "/v2/health/ready/extra").status, 404);
  EXPECT_EQ(Route(router, "GET", "/v2/health").status, 404);
}

TEST(RouterTest, WrongMethodIs405WithAllow) {
  Router router;
  ASSERT_TRUE(router.Add("POST", "/rerank", Echo("rerank")).ok());
  ASSERT_TRUE(router.Add("OPTIONS", "/rerank", Echo("options")).ok());
  ASSERT_TRUE(router.Add("GET", "/metrics", Echo("metrics")).ok());
  Response response = Route(router, "GET", "/rerank");
  EXPECT_EQ(response.status, 405);
  EXPECT_EQ(Header(response, "Allow"), "POST, OPTIONS");
  EXPECT_THAT(response.body, HasSubstr("not allowed"));
}

TEST(RouterTest, HeadIsServedByTheGetRouteAndAllowedWhereGetIs) {
  Router router;
  ASSERT_TRUE(router.Add("GET", "/v2/models/{model}", Echo("model")).ok());
  ASSERT_TRUE(router.Add("GET", "/v2/models/stats", Echo("stats")).ok());
  ASSERT_TRUE(router.Add("POST", "/v2/models/{model}", Echo("post")).ok());
  ASSERT_TRUE(router.Add("POST", "/rerank", Echo("rerank")).ok());
  // The route GET would take (the one with more literals), with the same body and status; the
  // server drops the body of a HEAD response.
  const Response head = Route(router, "HEAD", "/v2/models/stats");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(nlohmann::json::parse(head.body)["route"], "stats");
  EXPECT_EQ(nlohmann::json::parse(Route(router, "HEAD", "/v2/models/bge").body)["model"], "bge");
  // No GET: still 405, and Allow does not offer HEAD.
  const Response post_only = Route(router, "HEAD", "/rerank");
  EXPECT_EQ(post_only.status, 405);
  EXPECT_EQ(Header(post_only, "Allow"), "POST");
  // Allow lists HEAD next to GET.
  const Response wrong = Route(router, "DELETE", "/v2/models/bge");
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(Header(wrong, "Allow"), "GET, HEAD, POST");
}

TEST(RouterTest, AHeadRouteWinsOverTheGetRoute) {
  Router router;
  ASSERT_TRUE(router.Add("GET", "/x", Echo("get")).ok());
  ASSERT_TRUE(router.Add("HEAD", "/x", Echo("head")).ok());
  EXPECT_EQ(nlohmann::json::parse(Route(router, "HEAD", "/x").body)["route"], "head");
}

TEST(RouterTest, ErrorsCarryErrorTypeAndQuoteABoundedPrefix) {
  Router router;
  ASSERT_TRUE(router.Add("POST", "/v2/models/{model}/infer", Echo("infer")).ok());
  const std::string long_name(100 * 1024, 'm');
  const Response not_found = Route(router, "GET", "/" + long_name);
  EXPECT_EQ(not_found.status, 404);
  const nlohmann::json body404 = nlohmann::json::parse(not_found.body);
  EXPECT_EQ(body404["error_type"], "not_found");
  EXPECT_LT(not_found.body.size(), 400u);
  EXPECT_THAT(body404["error"].get<std::string>(), HasSubstr("...(truncated)"));
  const Response wrong = Route(router, "GET", "/v2/models/" + long_name + "/infer");
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(nlohmann::json::parse(wrong.body)["error_type"], "validation");
  EXPECT_LT(wrong.body.size(), 400u);
}

TEST(RouterTest, MoreLiteralSegmentsWin) {
  Router router;
  ASSERT_TRUE(router.Add("GET", "/v2/models/{model}", Echo("model")).ok());
  ASSERT_TRUE(router.Add("GET", "/v2/models/stats", Echo("stats")).ok());
  EXPECT_EQ(nlohmann::json::parse(Route(router, "GET", "/v2/models/stats").body)["route"], "stats");
  EXPECT_EQ(nlohmann::json::parse(Route(router, "GET", "/v2/models/bge").body)["route"], "model");
}

TEST(RouterTest, ParameterNeverMatchesEmptySegment) {
  Router router;
  ASSERT_TRUE(router.Add("GET", "/v2/models/{model}/ready", Echo("ready")).ok());
  EXPECT_EQ(Route(router, "GET", "/v2/models//ready").status, 404);
}

TEST(RouterTest, RejectsBadPatternsAndDuplicates) {
  Router router;
  EXPECT_EQ(router.Add("GET", "no-slash", Echo("x")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(router.Add("GET", "/a/{}", Echo("x")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(router.Add("GET", "/a/{b", Echo("x")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(router.Add("GET", "/a/x{b}", Echo("x")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(router.Add("GET", "/a/{b}/{b}", Echo("x")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(router.Add("G ET", "/a", Echo("x")).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(router.Add("GET", "/a/{b}", Echo("x")).ok());
  EXPECT_EQ(router.Add("GET", "/a/{c}", Echo("y")).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(router.Add("POST", "/a/{c}", Echo("y")).ok());
}

TEST(PercentDecodeTest, DecodesValidEscapesOnly) {
  EXPECT_EQ(PercentDecode("a%2Fb%20c"), "a/b c");
  EXPECT_EQ(PercentDecode("100%"), "100%");
  EXPECT_EQ(PercentDecode("%zz%4"), "%zz%4");
  EXPECT_EQ(PercentDecode("a+b"), "a+b");
}

TEST(ResponderTest, DestroyedUncalledAnswers500) {
  std::optional<Response> got;
  { Responder responder = Responder::FromCallback([&got](Response response) { got = std::move(response); }); }
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->status, 500);
  EXPECT_EQ(nlohmann::json::parse(got->body)["error"], "internal: request dropped");
}

TEST(ResponderTest, CalledOnceThenEmpty) {
  int calls = 0;
  Responder responder = Responder::FromCallback([&calls](Response) { ++calls; });
  Responder moved = std::move(responder);
  EXPECT_FALSE(responder);  // NOLINT(bugprone-use-after-move): moved-from is documented empty
  ASSERT_TRUE(moved);
  std::move(moved)(Response{});
  EXPECT_FALSE(moved);
  std::move(moved)(Response{});
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace tide::http
