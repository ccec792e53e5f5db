#include "common/error.h"

#include <atomic>
#include <optional>
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

// A status made without a kind (absl::*Error, a library no boundary converted) has none: no kind is
// guessed from its absl code. Asked for its kind, it is counted and answers as internal.
std::atomic<int> hook_calls{0};
void CountHook(const absl::Status&) { hook_calls.fetch_add(1); }

TEST(ErrorKindTest, AStatusWithoutAKindIsCountedAndAnswersInternal) {
  for (absl::StatusCode code : {absl::StatusCode::kInvalidArgument, absl::StatusCode::kFailedPrecondition,
                                absl::StatusCode::kNotFound, absl::StatusCode::kResourceExhausted,
                                absl::StatusCode::kUnavailable, absl::StatusCode::kAlreadyExists,
                                absl::StatusCode::kUnauthenticated}) {
    SCOPED_TRACE(absl::StatusCodeToString(code));
    const absl::Status raw(code, "m");
    EXPECT_EQ(FindKind(raw), std::nullopt);
    const uint64_t before = ErrorsWithoutKind();
    EXPECT_EQ(KindOf(raw), ErrorKind::kInternal);
    EXPECT_EQ(ErrorsWithoutKind(), before + 1);
    // The facts of such a status are internal's: no retry hint, no challenge.
    const ErrorFacts facts = FactsOf(raw);
    EXPECT_EQ(facts.info->kind, ErrorKind::kInternal);
    EXPECT_EQ(facts.retry_after_ms, std::nullopt);
    EXPECT_EQ(facts.challenge, "");
    EXPECT_EQ(ErrorsWithoutKind(), before + 2);
  }
  // OK has no kind either; nor does a payload that names no kind (another version, garbage).
  EXPECT_EQ(FindKind(absl::OkStatus()), std::nullopt);
  absl::Status foreign = absl::NotFoundError("m");
  foreign.SetPayload(kErrorKindPayloadUrl, absl::Cord("no_such_kind"));
  EXPECT_EQ(FindKind(foreign), std::nullopt);
  const uint64_t before = ErrorsWithoutKind();
  EXPECT_EQ(KindOf(foreign), ErrorKind::kInternal);
  EXPECT_EQ(KindOf(absl::OkStatus()), ErrorKind::kInternal);
  EXPECT_EQ(ErrorsWithoutKind(), before + 2);
  // A kinded status is not counted.
  EXPECT_EQ(KindOf(errors::NotFound("m")), ErrorKind::kNotFound);
  EXPECT_EQ(ErrorsWithoutKind(), before + 2);
}

TEST(ErrorKindTest, TheHookSeesEachStatusWithoutAKind) {
  SetErrorWithoutKindHook(&CountHook);
  const int before = hook_calls.load();
  (void)KindOf(absl::InternalError("raw"));
  (void)KindOf(errors::Backend("kinded"));
  EXPECT_EQ(hook_calls.load(), before + 1);
  SetErrorWithoutKindHook(nullptr);
  (void)KindOf(absl::InternalError("raw"));
  EXPECT_EQ(hook_calls.load(), before + 1);
}

TEST(ErrorKindTest, EnsureKindKeepsAKindAndGivesOneOtherwise) {
  EXPECT_EQ(FindKind(EnsureKind(absl::InvalidArgumentError("lib"), ErrorKind::kInvalidInput)), ErrorKind::kInvalidInput);
  EXPECT_EQ(FindKind(EnsureKind(errors::NotFound("tide"), ErrorKind::kInvalidInput)), ErrorKind::kNotFound);
  EXPECT_TRUE(EnsureKind(absl::OkStatus(), ErrorKind::kInternal).ok());
  EXPECT_TRUE(WithKind(absl::OkStatus(), ErrorKind::kInternal).ok());
  const absl::StatusOr<int> value = EnsureKind(absl::StatusOr<int>(absl::UnavailableError("lib")), ErrorKind::kBackend);
  EXPECT_EQ(FindKind(value.status()), ErrorKind::kBackend);
  EXPECT_EQ(*EnsureKind(absl::StatusOr<int>(3), ErrorKind::kBackend), 3);
  // Other payloads and the message survive.
  const absl::Status kinded = EnsureKind(WithRetryAfter(absl::ResourceExhaustedError("busy"), 2500), ErrorKind::kOverloaded);
  EXPECT_EQ(RetryAfterMs(kinded), 2500);
  EXPECT_EQ(kinded.message(), "busy");
}

// Retry hints, auth challenges and the degraded flag are facts of the kind table or of a payload.
TEST(ErrorKindTest, FactsComeFromTheKindRowAndThePayloads) {
  for (const ErrorKindInfo& info : kErrorKinds) {
    SCOPED_TRACE(info.name);
    const ErrorFacts facts = FactsOf(MakeError(info.kind, "msg"));
    EXPECT_EQ(facts.info, &info);
    EXPECT_EQ(facts.message, "msg");
    const bool retry = info.kind == ErrorKind::kOverloaded || info.kind == ErrorKind::kUnavailable;
    EXPECT_EQ(facts.retry_after_ms, retry ? std::optional<int64_t>(1000) : std::nullopt);
    EXPECT_EQ(facts.challenge, info.kind == ErrorKind::kUnauthenticated ? "Bearer" : "");
    EXPECT_EQ(facts.degraded, "");
  }
  const ErrorFacts quota = FactsOf(WithRetryAfter(errors::Overloaded("over quota"), 1500));
  EXPECT_EQ(quota.retry_after_ms, 1500);
  // A payload's hint goes with any kind (a kind without a default hint included).
  EXPECT_EQ(FactsOf(WithRetryAfter(errors::Forbidden("later"), 10)).retry_after_ms, 10);
  const ErrorFacts degraded = FactsOf(WithDegraded(errors::Unavailable("breaker open"), "unavailable"));
  EXPECT_EQ(degraded.degraded, "unavailable");
  EXPECT_EQ(degraded.retry_after_ms, 1000);
  EXPECT_EQ(DegradedOf(errors::Unavailable("x")), "");
  EXPECT_EQ(KeyNameOf(WithKeyName(errors::Overloaded("x"), "team-a")), "team-a");
  EXPECT_EQ(RetryAfterSeconds(1), 1);
  EXPECT_EQ(RetryAfterSeconds(0), 1);
  EXPECT_EQ(RetryAfterSeconds(1000), 1);
  EXPECT_EQ(RetryAfterSeconds(1001), 2);
  EXPECT_EQ(RetryAfterSeconds(1500), 2);
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
