#include "server/http/error_response.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tide::http {
namespace {

using ::testing::HasSubstr;

std::map<std::string, std::string> Headers(const Response& r) { return {r.headers.begin(), r.headers.end()}; }

// The one HTTP rendering, table-driven: every kind answers its row's status and error_type, with
// the headers its facts call for and no others.
TEST(ErrorResponseTest, EveryKindRendersItsRow) {
  for (const ErrorKindInfo& info : kErrorKinds) {
    SCOPED_TRACE(info.name);
    const Response r = ErrorResponse(MakeError(info.kind, "msg"));
    EXPECT_EQ(r.status, info.http_status);
    EXPECT_EQ(r.content_type, "application/json");
    const nlohmann::json body = nlohmann::json::parse(r.body);
    EXPECT_EQ(body["error"], "msg");
    EXPECT_EQ(body["error_type"], info.error_type);
    std::map<std::string, std::string> expected;
    if (info.kind == ErrorKind::kOverloaded || info.kind == ErrorKind::kUnavailable) expected["Retry-After"] = "1";
    if (info.kind == ErrorKind::kUnauthenticated) expected["WWW-Authenticate"] = "Bearer";
    EXPECT_EQ(Headers(r), expected);
    // JsonError is the same rendering.
    const Response by_kind = JsonError(info.kind, "msg");
    EXPECT_EQ(by_kind.status, r.status);
    EXPECT_EQ(by_kind.body, r.body);
    EXPECT_EQ(Headers(by_kind), expected);
  }
}

// What the HTTP layer answers by itself, with the kind it answers it as.
TEST(ErrorResponseTest, TheHttpLayersOwnAnswers) {
  const std::pair<int, ErrorKind> emitted[] = {
      {400, ErrorKind::kMalformedRequest},  // malformed HTTP, framing, Host
      {404, ErrorKind::kNotFound},          // no route
      {405, ErrorKind::kMethodNotAllowed},  // wrong method for a known path
      {408, ErrorKind::kRequestTimeout},    // slow sender
      {413, ErrorKind::kPayloadTooLarge},   // body over max_body_bytes
      {431, ErrorKind::kHeadersTooLarge},   // headers over max_header_bytes
      {500, ErrorKind::kInternal},          // a dropped Responder, an invalid handler status
      {501, ErrorKind::kUnimplemented},     // unsupported transfer coding
      {503, ErrorKind::kUnavailable},       // connection cap (with Retry-After: 1)
  };
  for (const auto& [status, kind] : emitted) {
    SCOPED_TRACE(status);
    EXPECT_EQ(JsonError(kind, "x").status, status);
  }
  EXPECT_EQ(Headers(JsonError(ErrorKind::kUnavailable, "x"))["Retry-After"], "1");
  EXPECT_EQ(nlohmann::json::parse(JsonError(ErrorKind::kInternal, "x").body)["error_type"], "backend");
  EXPECT_EQ(nlohmann::json::parse(JsonError(ErrorKind::kRequestTimeout, "x").body)["error_type"], "timeout");
  EXPECT_EQ(nlohmann::json::parse(JsonError(ErrorKind::kEmpty, "x").body)["error_type"], "empty");
}

TEST(ErrorResponseTest, EscapesAndBoundsTheMessage) {
  const Response response = JsonError(ErrorKind::kMalformedRequest, "bad \"quote\"\n");
  EXPECT_EQ(response.status, 400);
  EXPECT_EQ(response.body, R"({"error":"bad \"quote\"\n","error_type":"validation"})");
  const Response big = JsonError(ErrorKind::kMalformedRequest, std::string(100 * 1024, 'a'));
  EXPECT_LT(big.body.size(), 1200u);
  EXPECT_THAT(big.body, HasSubstr("...(truncated)"));
  // Invalid UTF-8 quoted from a client is replaced, never thrown on.
  const Response bytes = JsonError(ErrorKind::kInvalidInput, std::string("bad \xff byte"));
  EXPECT_NO_THROW((void)nlohmann::json::parse(bytes.body));
}

TEST(ErrorResponseTest, PayloadsAddTheirHeaders) {
  // A quota's own wait, rounded up to whole seconds.
  EXPECT_EQ(Headers(ErrorResponse(WithRetryAfter(errors::Overloaded("over quota"), 1500)))["Retry-After"], "2");
  EXPECT_EQ(Headers(ErrorResponse(WithRetryAfter(errors::Overloaded("over quota"), 1)))["Retry-After"], "1");
  const Response degraded = ErrorResponse(WithDegraded(errors::Unavailable("breaker open"), "unavailable"));
  EXPECT_EQ(degraded.status, 503);
  EXPECT_EQ(Headers(degraded)["x-tide-degraded"], "unavailable");
  EXPECT_EQ(Headers(degraded)["Retry-After"], "1");
  // The kind decides, not the absl code: payload-too-large carries RESOURCE_EXHAUSTED and is 413.
  EXPECT_EQ(ErrorResponse(errors::PayloadTooLarge("big")).status, 413);
  EXPECT_EQ(Headers(ErrorResponse(errors::PayloadTooLarge("big"))).count("Retry-After"), 0u);
}

// A status that reached the renderer without a kind is a bug: it answers as internal and counts.
TEST(ErrorResponseTest, AStatusWithoutAKindAnswersInternalAndIsCounted) {
  const uint64_t before = ErrorsWithoutKind();
  const Response r = ErrorResponse(absl::ResourceExhaustedError("from a library"));
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(nlohmann::json::parse(r.body)["error_type"], "backend");
  EXPECT_TRUE(r.headers.empty());
  EXPECT_EQ(ErrorsWithoutKind(), before + 1);
}

// The server's own answers are the JSON error of their kind, headers included: only the connection
// cap (kUnavailable) among them tells the client when to come back.
TEST(ServerErrorResponseTest, IsTheKindsJsonError) {
  for (const ErrorKindInfo& info : kErrorKinds) {
    SCOPED_TRACE(info.name);
    const Response response = ServerErrorResponse(info.kind, "why");
    const Response plain = JsonError(info.kind, "why");
    EXPECT_EQ(response.status, plain.status);
    EXPECT_EQ(response.body, plain.body);
    EXPECT_EQ(Headers(response), Headers(plain));
  }
  EXPECT_EQ(Headers(ServerErrorResponse(ErrorKind::kUnavailable, "cap"))["Retry-After"], "1");
}

}  // namespace
}  // namespace tide::http
