#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/http/handler.h"

namespace tide::http {
namespace {

const nlohmann::json kDropped = {{"error", "internal: request dropped"}, {"error_type", "backend"}};

TEST(ResponderTest, DeliversOnceToItsCallback) {
  std::vector<Response> got;
  Responder respond = Responder::FromCallback([&](Response response) { got.push_back(std::move(response)); });
  EXPECT_TRUE(respond);
  Response response;
  response.status = 201;
  response.body = "first";
  std::move(respond)(response);
  EXPECT_FALSE(respond);
  std::move(respond)(response);  // an empty Responder does nothing
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, 201);
  EXPECT_EQ(got[0].body, "first");
}

TEST(ResponderTest, DestroyedUncalledAnswers500) {
  std::vector<Response> got;
  { Responder respond = Responder::FromCallback([&](Response response) { got.push_back(std::move(response)); }); }
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, 500);
  EXPECT_EQ(nlohmann::json::parse(got[0].body), kDropped);
}

TEST(ResponderTest, AssignedOverUncalledAnswers500AndTheMovedOneDeliversOnce) {
  std::vector<std::string> got;
  Responder first = Responder::FromCallback([&](Response response) { got.push_back("first:" + response.body); });
  Responder second = Responder::FromCallback([&](Response response) { got.push_back("second:" + response.body); });
  first = std::move(second);  // `first`'s own request is dropped
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], "first:" + kDropped.dump());
  Response ok;
  ok.body = "ok";
  std::move(first)(ok);
  EXPECT_EQ(got, (std::vector<std::string>{"first:" + kDropped.dump(), "second:ok"}));
  Responder moved_from = std::move(first);  // empty: destroying it answers nothing
  EXPECT_FALSE(moved_from);
  EXPECT_EQ(got.size(), 2u);
}

}  // namespace
}  // namespace tide::http
