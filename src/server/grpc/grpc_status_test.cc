#include "server/grpc/grpc_status.h"

#include "common/error.h"
#include "gtest/gtest.h"

namespace tide::grpc_edge {
namespace {

// Every kind of the one table answers its row's gRPC code, with the message kept.
TEST(ToGrpcStatus, EveryKindAnswersItsTableRow) {
  for (const ErrorKindInfo& row : kErrorKinds) {
    const grpc::Status s = ToGrpcStatus(MakeError(row.kind, "why"));
    EXPECT_EQ(static_cast<int>(s.error_code()), row.grpc_code) << row.name;
    EXPECT_EQ(s.error_message(), "why") << row.name;
  }
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  // A status without a kind: INTERNAL, whatever its absl code, and counted.
  const uint64_t before = ErrorsWithoutKind();
  EXPECT_EQ(ToGrpcStatus(absl::FailedPreconditionError("x")).error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(ToGrpcStatus(absl::ResourceExhaustedError("x")).error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(ErrorsWithoutKind(), before + 2);
}

}  // namespace
}  // namespace tide::grpc_edge
