#include "api/status_http.h"

#include <gtest/gtest.h>

#include <iterator>

#include "common/error.h"

namespace tide::api {
namespace {

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
      {ErrorKind::kModelUnsupported, 424, "backend", 9},      // FAILED_PRECONDITION (TEI's 424)
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
  }
}

// There is no kind implied by an absl code: a status without a kind answers as internal (and is
// counted, KindOf), whatever its code.
TEST(StatusHttpTest, AStatusWithoutAKindAnswersInternal) {
  for (const absl::Status& raw : {absl::InvalidArgumentError("x"), absl::FailedPreconditionError("x"),
                                  absl::ResourceExhaustedError("x"), absl::NotFoundError("x")}) {
    SCOPED_TRACE(raw.ToString());
    const uint64_t before = ErrorsWithoutKind();
    EXPECT_EQ(HttpStatusFor(raw), 500);
    EXPECT_EQ(ErrorTypeFor(raw), "backend");
    EXPECT_EQ(GrpcStatusFor(raw), 13);
    EXPECT_EQ(ErrorsWithoutKind(), before + 3);
  }
}

TEST(StatusHttpTest, PayloadTooLargeIs413ThoughItsCodeIsResourceExhausted) {
  EXPECT_EQ(HttpStatusFor(errors::Overloaded("x")), 429);
  EXPECT_EQ(HttpStatusFor(errors::PayloadTooLarge("x")), 413);
  EXPECT_EQ(errors::PayloadTooLarge("x").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrorTypeFor(errors::PayloadTooLarge("x")), "validation");
  EXPECT_EQ(HttpStatusFor(WithKind(absl::OutOfRangeError("x"), ErrorKind::kPayloadTooLarge)), 413);
}

}  // namespace
}  // namespace tide::api
