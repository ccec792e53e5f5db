// The one deadline rule of every edge (AdmissionFor) and an admitted call's checks (Call).
#include "serving/call.h"

#include <limits>
#include <string>

#include "api/status_http.h"
#include "gtest/gtest.h"

namespace tide::serving {
namespace {

const Clock::time_point kReceived = Clock::time_point{} + std::chrono::hours(1);

CallInfo Info(std::optional<int64_t> timeout_us = std::nullopt, std::optional<int64_t> priority = std::nullopt) {
  CallInfo info;
  info.received_at = kReceived;
  info.client_gone = std::make_shared<CancellationFlag>();
  info.timeout_us = timeout_us;
  info.priority = priority;
  return info;
}

TEST(AdmissionFor, NoTimeoutMeansNoDeadline) {
  auto a = AdmissionFor(Info(), std::chrono::milliseconds(0));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->deadline, Clock::time_point::max());
  EXPECT_EQ(a->priority, 0);
  EXPECT_NE(a->client_gone, nullptr);
}

TEST(AdmissionFor, TheCallsTimeoutOnlyShortensTheDefault) {
  auto shorter = AdmissionFor(Info(50000), std::chrono::milliseconds(200));
  ASSERT_TRUE(shorter.ok());
  EXPECT_EQ(shorter->deadline, kReceived + std::chrono::milliseconds(50));
  auto longer = AdmissionFor(Info(500000), std::chrono::milliseconds(200));
  ASSERT_TRUE(longer.ok());
  EXPECT_EQ(longer->deadline, kReceived + std::chrono::milliseconds(200));
  auto own = AdmissionFor(Info(3000), std::chrono::milliseconds(0));
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own->deadline, kReceived + std::chrono::microseconds(3000));
}

// Regression: x-timeout-ms 9223372036854775807 overflowed the microsecond conversion into a
// deadline in the past (an instant 504). A timeout longer than the default gets the default; with
// no default, one beyond what the clock can represent means no deadline, never an early one.
TEST(AdmissionFor, HugeTimeoutsAreClampedNeverOverflowed) {
  const std::chrono::milliseconds default_timeout(30000);
  const int64_t max = std::numeric_limits<int64_t>::max();
  for (const int64_t us : {max, max / 1000 + 1, TimeoutMsToUs(max), TimeoutMsToUs(max / 1000 + 1),
                           TimeoutMsToUs(9223372036854775)}) {
    auto with_default = AdmissionFor(Info(us), default_timeout);
    ASSERT_TRUE(with_default.ok()) << us;
    EXPECT_EQ(with_default->deadline, kReceived + default_timeout) << us;
    auto no_default = AdmissionFor(Info(us), std::chrono::milliseconds(0));
    ASSERT_TRUE(no_default.ok()) << us;
    EXPECT_GT(no_default->deadline, kReceived + std::chrono::hours(24 * 365 * 100)) << us;
  }
  // A huge server default is clamped the same way.
  auto huge_default = AdmissionFor(Info(), std::chrono::milliseconds(max));
  ASSERT_TRUE(huge_default.ok());
  EXPECT_GT(huge_default->deadline, kReceived + std::chrono::hours(24 * 365 * 100));
  // Non-positive is invalid input (422), however it was written.
  for (const int64_t us : {int64_t{0}, int64_t{-1}, std::numeric_limits<int64_t>::min(), TimeoutMsToUs(-max - 1)}) {
    EXPECT_EQ(api::HttpStatusFor(AdmissionFor(Info(us), default_timeout).status()), 422) << us;
  }
}

TEST(AdmissionFor, PriorityIsANonNegativeInt) {
  auto a = AdmissionFor(Info(std::nullopt, 2), {});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->priority, 2);
  EXPECT_EQ(api::HttpStatusFor(AdmissionFor(Info(std::nullopt, -1), {}).status()), 422);
  EXPECT_EQ(api::HttpStatusFor(AdmissionFor(Info(std::nullopt, int64_t{1} << 40), {}).status()), 422);
}

TEST(Call, StillWantedAnswersCancelledThenDeadline) {
  FakeClock clock(kReceived);
  auto admission = AdmissionFor(Info(1000), {});
  ASSERT_TRUE(admission.ok());
  Call call(&clock, *admission, kReceived, {}, true, false);
  EXPECT_TRUE(call.StillWanted("tokenizing").ok());
  clock.Advance(std::chrono::milliseconds(1));
  const absl::Status late = call.StillWanted("tokenizing");
  EXPECT_EQ(api::HttpStatusFor(late), 504);
  EXPECT_NE(late.message().find("while tokenizing"), std::string::npos);
  admission->client_gone->Cancel();
  EXPECT_EQ(api::HttpStatusFor(call.StillWanted("tokenizing")), 499);
}

// KServe's "timeout" / "priority" parameters apply unless the edge already had the call's own
// (headers win), and follow the same rule.
TEST(Call, RefineAppliesBodyValuesUnlessTheEdgeHadThem) {
  FakeClock clock(kReceived);
  auto plain = AdmissionFor(Info(), std::chrono::milliseconds(200));
  ASSERT_TRUE(plain.ok());
  Call call(&clock, *plain, kReceived, std::chrono::milliseconds(200), false, false);
  EXPECT_EQ(api::HttpStatusFor(call.Refine(int64_t{0}, std::nullopt)), 422);
  ASSERT_TRUE(call.Refine(3000, 1).ok());
  EXPECT_EQ(call.admission().deadline, kReceived + std::chrono::microseconds(3000));
  EXPECT_EQ(call.admission().priority, 1);
  ASSERT_TRUE(call.Refine(500000, std::nullopt).ok());  // a second value changes nothing
  EXPECT_EQ(call.admission().deadline, kReceived + std::chrono::microseconds(3000));

  auto with_header = AdmissionFor(Info(50000, 2), std::chrono::milliseconds(200));
  ASSERT_TRUE(with_header.ok());
  Call headed(&clock, *with_header, kReceived, std::chrono::milliseconds(200), true, true);
  ASSERT_TRUE(headed.Refine(3000, 1).ok());
  EXPECT_EQ(headed.admission().deadline, kReceived + std::chrono::milliseconds(50));
  EXPECT_EQ(headed.admission().priority, 2);
}

}  // namespace
}  // namespace tide::serving
