#include "server/http/error_response.h"

#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tide::http {
namespace {

using ::testing::HasSubstr;

TEST(JsonErrorTest, EscapesMessage) {
  const Response response = JsonError(400, "bad \"quote\"\n");
  EXPECT_EQ(response.status, 400);
  EXPECT_EQ(response.body, R"({"error":"bad \"quote\"\n","error_type":"validation"})");
}

// Every status the HTTP layer answers by itself, with the kind it answers it as: the status and the
// error_type are that kind's row of the one table, whether the response is made from the kind or
// from the bare status.
TEST(JsonErrorTest, EveryStatusTheHttpLayerEmitsHasTheErrorTypeOfItsKind) {
  const std::pair<int, ErrorKind> emitted[] = {
      {400, ErrorKind::kMalformedRequest},  // malformed HTTP, framing, Host
      {404, ErrorKind::kNotFound},          // no route
      {405, ErrorKind::kMethodNotAllowed},  // wrong method for a known path
      {408, ErrorKind::kRequestTimeout},    // slow sender
      {413, ErrorKind::kPayloadTooLarge},   // body over max_body_bytes
      {431, ErrorKind::kHeadersTooLarge},   // headers over max_header_bytes
      {500, ErrorKind::kInternal},          // a dropped Responder, an invalid handler status
      {501, ErrorKind::kUnimplemented},     // unsupported transfer coding
      {503, ErrorKind::kUnavailable},       // connection cap
  };
  for (const auto& [status, kind] : emitted) {
    SCOPED_TRACE(status);
    EXPECT_EQ(Info(kind).http_status, status);
    EXPECT_EQ(ErrorTypeForStatus(status), Info(kind).error_type);
    const Response by_kind = JsonError(kind, "x");
    EXPECT_EQ(by_kind.status, status);
    EXPECT_EQ(nlohmann::json::parse(by_kind.body)["error_type"], Info(kind).error_type);
    EXPECT_EQ(by_kind.body, JsonError(status, "x").body);
  }
  // And every kind's status maps back to an error_type the kinds sharing that status agree on,
  // except kEmpty: TEI answers an empty batch 400 with its own error_type "empty", which only the
  // routes make (with the kind); a bare 400 from the HTTP layer stays "validation".
  for (const ErrorKindInfo& info : kErrorKinds) {
    if (info.kind == ErrorKind::kEmpty) continue;
    EXPECT_EQ(ErrorTypeForStatus(info.http_status), info.error_type) << info.name;
  }
  EXPECT_EQ(ErrorTypeForStatus(400), "validation");
  // Statuses no kind uses: 4xx validation, 5xx backend.
  EXPECT_EQ(ErrorTypeForStatus(418), "validation");
  EXPECT_EQ(ErrorTypeForStatus(502), "backend");
}

TEST(JsonErrorTest, CarriesTheErrorTypeOfItsStatusAndABoundedMessage) {
  EXPECT_EQ(nlohmann::json::parse(JsonError(404, "x").body)["error_type"], "not_found");
  EXPECT_EQ(nlohmann::json::parse(JsonError(408, "x").body)["error_type"], "timeout");
  EXPECT_EQ(nlohmann::json::parse(JsonError(501, "x").body)["error_type"], "unimplemented");
  EXPECT_EQ(nlohmann::json::parse(JsonError(500, "x").body)["error_type"], "backend");
  const Response big = JsonError(400, std::string(100 * 1024, 'a'));
  EXPECT_LT(big.body.size(), 1200u);
  EXPECT_THAT(big.body, HasSubstr("...(truncated)"));
}

TEST(JsonErrorTest, InvalidUtf8IsReplacedNotRejected) {
  const Response response = JsonError(400, std::string("bad \xff byte"));
  EXPECT_EQ(nlohmann::json::parse(response.body)["error_type"], "validation");
}

// The server's own answers: the JSON error of their kind; only the connection cap (kUnavailable)
// tells the client when to come back.
TEST(ServerErrorResponseTest, IsTheKindsJsonErrorWithRetryAfterOnlyWhenUnavailable) {
  for (const ErrorKindInfo& info : kErrorKinds) {
    SCOPED_TRACE(info.name);
    const Response response = ServerErrorResponse(info.kind, "why");
    const Response plain = JsonError(info.kind, "why");
    EXPECT_EQ(response.status, plain.status);
    EXPECT_EQ(response.body, plain.body);
    EXPECT_EQ(response.content_type, "application/json");
    if (info.kind == ErrorKind::kUnavailable) {
      EXPECT_EQ(response.headers, (std::vector<std::pair<std::string, std::string>>{{"Retry-After", "1"}}));
    } else {
      EXPECT_TRUE(response.headers.empty());
    }
  }
  EXPECT_EQ(ServerErrorResponse(ErrorKind::kRequestTimeout, "request header not received within 200 ms").body,
            R"({"error":"request header not received within 200 ms","error_type":"timeout"})");
}

}  // namespace
}  // namespace tide::http
