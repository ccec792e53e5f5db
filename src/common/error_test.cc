#include "common/error.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/status_macros.h"

namespace tide {
namespace {

TEST(ErrorKindTest, EveryKindHasOneRowWithAUniqueName) {
  std::set<std::string> names;
  for (size_t i = 0; i < kErrorKinds.size(); ++i) {
    const ErrorKind kind = static_cast<ErrorKind>(i);
    EXPECT_EQ(Info(kind).kind, kind) << i;  // rows in enum order, none missing
    EXPECT_TRUE(names.insert(std::string(Info(kind).name)).second) << Info(kind).name;
    EXPECT_NE(Info(kind).code, absl::StatusCode::kOk) << Info(kind).name;
  }
}

TEST(ErrorKindTest, KindOfRoundTripsThroughMakeErrorAndWithKind) {
  for (const ErrorKindInfo& info : kErrorKinds) {
    SCOPED_TRACE(info.name);
    const absl::Status made = MakeError(info.kind, "message");
    EXPECT_EQ(KindOf(made), info.kind);
    EXPECT_EQ(made.code(), info.code);
    EXPECT_EQ(made.message(), "message");
    // WithKind over a status of any other code: the kind wins, code and message are kept.
    const absl::Status tagged = WithKind(absl::DataLossError("kept"), info.kind);
    EXPECT_EQ(KindOf(tagged), info.kind);
    EXPECT_EQ(tagged.code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(tagged.message(), "kept");
    // Re-tagging replaces the kind.
    EXPECT_EQ(KindOf(WithKind(made, ErrorKind::kInternal)), ErrorKind::kInternal);
  }
}

TEST(ErrorKindTest, ConstructorsMakeTheirKind) {
  EXPECT_EQ(KindOf(errors::MalformedRequest("m")), ErrorKind::kMalformedRequest);
  EXPECT_EQ(KindOf(errors::InvalidInput("m")), ErrorKind::kInvalidInput);
  EXPECT_EQ(KindOf(errors::Empty("m")), ErrorKind::kEmpty);
  EXPECT_EQ(KindOf(errors::Unauthenticated("m")), ErrorKind::kUnauthenticated);
  EXPECT_EQ(KindOf(errors::Forbidden("m")), ErrorKind::kForbidden);
  EXPECT_EQ(KindOf(errors::NotFound("m")), ErrorKind::kNotFound);
  EXPECT_EQ(KindOf(errors::MethodNotAllowed("m")), ErrorKind::kMethodNotAllowed);
  EXPECT_EQ(KindOf(errors::RequestTimeout("m")), ErrorKind::kRequestTimeout);
  EXPECT_EQ(KindOf(errors::PayloadTooLarge("m")), ErrorKind::kPayloadTooLarge);
  EXPECT_EQ(KindOf(errors::HeadersTooLarge("m")), ErrorKind::kHeadersTooLarge);
  EXPECT_EQ(KindOf(errors::Overloaded("m")), ErrorKind::kOverloaded);
  EXPECT_EQ(KindOf(errors::Unavailable("m")), ErrorKind::kUnavailable);
  EXPECT_EQ(KindOf(errors::DeadlineExceeded("m")), ErrorKind::kDeadlineExceeded);
  EXPECT_EQ(KindOf(errors::Cancelled("m")), ErrorKind::kCancelled);
  EXPECT_EQ(KindOf(errors::Unimplemented("m")), ErrorKind::kUnimplemented);
  EXPECT_EQ(KindOf(errors::Backend("m")), ErrorKind::kBackend);
  EXPECT_EQ(KindOf(errors::Internal("m")), ErrorKind::kInternal);
}

// A status made without a kind (absl::*Error, a library) gets the kind its code documents.
TEST(ErrorKindTest, PayloadLessStatusGetsTheDocumentedKind) {
  const std::pair<absl::StatusCode, ErrorKind> expected[] = {
      {absl::StatusCode::kOk, ErrorKind::kInternal},
      {absl::StatusCode::kCancelled, ErrorKind::kCancelled},
      {absl::StatusCode::kUnknown, ErrorKind::kInternal},
      {absl::StatusCode::kInvalidArgument, ErrorKind::kMalformedRequest},
      {absl::StatusCode::kDeadlineExceeded, ErrorKind::kDeadlineExceeded},
      {absl::StatusCode::kNotFound, ErrorKind::kNotFound},
      {absl::StatusCode::kAlreadyExists, ErrorKind::kInternal},
      {absl::StatusCode::kPermissionDenied, ErrorKind::kForbidden},
      {absl::StatusCode::kResourceExhausted, ErrorKind::kOverloaded},
      {absl::StatusCode::kFailedPrecondition, ErrorKind::kInvalidInput},
      {absl::StatusCode::kAborted, ErrorKind::kInternal},
      {absl::StatusCode::kOutOfRange, ErrorKind::kInvalidInput},
      {absl::StatusCode::kUnimplemented, ErrorKind::kUnimplemented},
      {absl::StatusCode::kInternal, ErrorKind::kInternal},
      {absl::StatusCode::kUnavailable, ErrorKind::kUnavailable},
      {absl::StatusCode::kDataLoss, ErrorKind::kInternal},
      {absl::StatusCode::kUnauthenticated, ErrorKind::kUnauthenticated},
  };
  for (const auto& [code, kind] : expected) {
    SCOPED_TRACE(absl::StatusCodeToString(code));
    EXPECT_EQ(KindForCode(code), kind);
    EXPECT_EQ(KindOf(absl::Status(code, code == absl::StatusCode::kOk ? "" : "m")), kind);
  }
  // A payload that names no kind (another version, garbage) falls back to the code.
  absl::Status foreign = absl::NotFoundError("m");
  foreign.SetPayload(kErrorKindPayloadUrl, absl::Cord("no_such_kind"));
  EXPECT_EQ(KindOf(foreign), ErrorKind::kNotFound);
}

absl::Status FailIf(bool fail) { return fail ? errors::Overloaded("busy") : absl::OkStatus(); }
absl::StatusOr<int> Value(bool fail) {
  if (fail) return errors::NotFound("none");
  return 7;
}
absl::Status UseReturnIfError(bool fail, int* calls) {
  TIDE_RETURN_IF_ERROR(FailIf(fail));
  ++*calls;
  return absl::OkStatus();
}
absl::StatusOr<int> UseAssignOrReturn(bool fail) {
  TIDE_ASSIGN_OR_RETURN(const int v, Value(fail));
  TIDE_ASSIGN_OR_RETURN(int w, Value(fail));  // two on one function: distinct temporaries
  return v + w;
}

TEST(StatusMacrosTest, ReturnTheErrorWithItsKindOrContinue) {
  int calls = 0;
  EXPECT_TRUE(UseReturnIfError(false, &calls).ok());
  EXPECT_EQ(calls, 1);
  const absl::Status failed = UseReturnIfError(true, &calls);
  EXPECT_EQ(KindOf(failed), ErrorKind::kOverloaded);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(*UseAssignOrReturn(false), 14);
  EXPECT_EQ(KindOf(UseAssignOrReturn(true).status()), ErrorKind::kNotFound);
}

}  // namespace
}  // namespace tide
