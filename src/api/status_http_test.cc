#include "api/status_http.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

namespace tide::api {
namespace {

TEST(StatusHttpTest, Table) {
  struct Row {
    absl::StatusCode code;
    int http;
    const char* type;
  };
  const Row rows[] = {
      {absl::StatusCode::kInvalidArgument, 400, "validation"},
      {absl::StatusCode::kFailedPrecondition, 422, "validation"},
      {absl::StatusCode::kOutOfRange, 422, "validation"},
      {absl::StatusCode::kNotFound, 404, "not_found"},
      {absl::StatusCode::kResourceExhausted, 429, "overloaded"},
      {absl::StatusCode::kUnavailable, 503, "unhealthy"},
      {absl::StatusCode::kDeadlineExceeded, 504, "timeout"},
      {absl::StatusCode::kUnauthenticated, 401, "unauthorized"},
      {absl::StatusCode::kPermissionDenied, 403, "forbidden"},
      {absl::StatusCode::kUnimplemented, 501, "unimplemented"},
      {absl::StatusCode::kCancelled, 499, "cancelled"},
      {absl::StatusCode::kInternal, 500, "backend"},
      {absl::StatusCode::kUnknown, 500, "backend"},
      {absl::StatusCode::kDataLoss, 500, "backend"},
      {absl::StatusCode::kAborted, 500, "backend"},
      {absl::StatusCode::kAlreadyExists, 500, "backend"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(absl::StatusCodeToString(row.code));
    EXPECT_EQ(HttpStatusFor(row.code), row.http);
    EXPECT_EQ(ErrorTypeFor(row.code), row.type);
  }
}

TEST(StatusHttpTest, GrpcIsIdentity) {
  EXPECT_EQ(GrpcStatusFor(absl::StatusCode::kOk), 0);
  EXPECT_EQ(GrpcStatusFor(absl::StatusCode::kInvalidArgument), 3);
  EXPECT_EQ(GrpcStatusFor(absl::StatusCode::kNotFound), 5);
  EXPECT_EQ(GrpcStatusFor(absl::StatusCode::kFailedPrecondition), 9);
  EXPECT_EQ(GrpcStatusFor(absl::StatusCode::kUnavailable), 14);
  EXPECT_EQ(GrpcStatusFor(absl::StatusCode::kUnauthenticated), 16);
}

TEST(StatusHttpTest, ErrorBodyEscapesAndTypes) {
  const std::string body = ErrorBody(absl::ResourceExhaustedError("queue \"full\"\n"));
  const nlohmann::json j = nlohmann::json::parse(body);
  EXPECT_EQ(j["error"], "queue \"full\"\n");
  EXPECT_EQ(j["error_type"], "overloaded");
  EXPECT_EQ(j.size(), 2u);
}

TEST(StatusHttpTest, ErrorBodyWithInvalidUtf8DoesNotThrow) {
  const std::string body = ErrorBody(absl::FailedPreconditionError("bad \xff byte"));
  EXPECT_TRUE(nlohmann::json::accept(body));
}

}  // namespace
}  // namespace tide::api
