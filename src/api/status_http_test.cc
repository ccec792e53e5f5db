#include "api/status_http.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <iterator>

#include "common/error.h"

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

// Every kind through both mappings, against a table written here independently of kErrorKinds.
TEST(StatusHttpTest, EveryKindThroughHttpAndGrpc) {
  struct Row {
    ErrorKind kind;
    int http;
    const char* type;
    int grpc;
  };
  const Row rows[] = {
      {ErrorKind::kMalformedRequest, 400, "validation", 3},   // INVALID_ARGUMENT
      {ErrorKind::kInvalidInput, 422, "validation", 3},       // INVALID_ARGUMENT
      {ErrorKind::kEmpty, 400, "empty", 3},                   // INVALID_ARGUMENT (TEI's Empty)
      {ErrorKind::kUnauthenticated, 401, "unauthorized", 16},  // UNAUTHENTICATED
      {ErrorKind::kForbidden, 403, "forbidden", 7},           // PERMISSION_DENIED
      {ErrorKind::kNotFound, 404, "not_found", 5},            // NOT_FOUND
      {ErrorKind::kMethodNotAllowed, 405, "validation", 12},  // UNIMPLEMENTED
      {ErrorKind::kRequestTimeout, 408, "timeout", 4},        // DEADLINE_EXCEEDED
      {ErrorKind::kPayloadTooLarge, 413, "validation", 8},    // RESOURCE_EXHAUSTED
      {ErrorKind::kHeadersTooLarge, 431, "validation", 8},    // RESOURCE_EXHAUSTED
      {ErrorKind::kUnsupportedMediaType, 415, "validation", 3},  // INVALID_ARGUMENT
      {ErrorKind::kOverloaded, 429, "overloaded", 8},         // RESOURCE_EXHAUSTED
      {ErrorKind::kUnavailable, 503, "unhealthy", 14},        // UNAVAILABLE
      {ErrorKind::kDeadlineExceeded, 504, "timeout", 4},      // DEADLINE_EXCEEDED
      {ErrorKind::kCancelled, 499, "cancelled", 1},           // CANCELLED
      {ErrorKind::kUnimplemented, 501, "unimplemented", 12},  // UNIMPLEMENTED
      {ErrorKind::kBackend, 500, "backend", 13},              // INTERNAL
      {ErrorKind::kInternal, 500, "backend", 13},             // INTERNAL
  };
  ASSERT_EQ(std::size(rows), kErrorKinds.size()) << "a kind was added: add its row here";
  for (const Row& row : rows) {
    SCOPED_TRACE(Info(row.kind).name);
    EXPECT_EQ(HttpStatusFor(row.kind), row.http);
    EXPECT_EQ(ErrorTypeFor(row.kind), row.type);
    EXPECT_EQ(GrpcStatusFor(row.kind), row.grpc);
    // The Status overloads see the kind, even where its absl code alone would answer otherwise.
    const absl::Status status = MakeError(row.kind, "x");
    EXPECT_EQ(HttpStatusFor(status), row.http);
    EXPECT_EQ(ErrorTypeFor(status), row.type);
    EXPECT_EQ(GrpcStatusFor(status), row.grpc);
    EXPECT_EQ(nlohmann::json::parse(ErrorBody(status))["error_type"], row.type);
  }
}

TEST(StatusHttpTest, GrpcCodesOfPayloadLessStatuses) {
  EXPECT_EQ(GrpcStatusFor(absl::StatusCode::kInvalidArgument), 3);
  EXPECT_EQ(GrpcStatusFor(absl::StatusCode::kFailedPrecondition), 3);  // validation, like 400
  EXPECT_EQ(GrpcStatusFor(absl::StatusCode::kNotFound), 5);
  EXPECT_EQ(GrpcStatusFor(absl::StatusCode::kResourceExhausted), 8);
  EXPECT_EQ(GrpcStatusFor(absl::StatusCode::kUnavailable), 14);
  EXPECT_EQ(GrpcStatusFor(absl::StatusCode::kUnauthenticated), 16);
  EXPECT_EQ(GrpcStatusFor(absl::StatusCode::kDataLoss), 13);
}

TEST(StatusHttpTest, PayloadTooLargeIs413NotTheCodes429) {
  // ResourceExhausted alone means "overloaded, retry" (429); the kind says "too large" (413).
  EXPECT_EQ(HttpStatusFor(absl::ResourceExhaustedError("x")), 429);
  EXPECT_EQ(HttpStatusFor(errors::PayloadTooLarge("x")), 413);
  EXPECT_EQ(ErrorTypeFor(errors::PayloadTooLarge("x")), "validation");
  EXPECT_EQ(HttpStatusFor(WithKind(absl::OutOfRangeError("x"), ErrorKind::kPayloadTooLarge)), 413);
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
