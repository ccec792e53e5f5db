#include "server/routes/route_util.h"

#include "gtest/gtest.h"

namespace tide::server {
namespace {

http::Request RequestWith(std::vector<std::pair<std::string, std::string>> headers) {
  http::Request r;
  r.headers = std::move(headers);
  r.received_at = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  r.client_gone = std::make_shared<CancellationFlag>();
  return r;
}

TEST(MakeAdmission, NoTimeoutMeansNoDeadline) {
  auto a = MakeAdmission(RequestWith({}), std::chrono::milliseconds(0));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->deadline, serving::Clock::time_point::max());
  EXPECT_EQ(a->priority, 0);
  EXPECT_NE(a->client_gone, nullptr);
}

TEST(MakeAdmission, RequestTimeoutOnlyShortensTheDefault) {
  const auto r = RequestWith({{"x-timeout-ms", "50"}});
  auto shorter = MakeAdmission(r, std::chrono::milliseconds(200));
  ASSERT_TRUE(shorter.ok());
  EXPECT_EQ(shorter->deadline, r.received_at + std::chrono::milliseconds(50));
  auto longer = MakeAdmission(RequestWith({{"x-timeout-ms", "500"}}), std::chrono::milliseconds(200));
  ASSERT_TRUE(longer.ok());
  EXPECT_EQ(longer->deadline, r.received_at + std::chrono::milliseconds(200));
  auto kserve = MakeAdmission(RequestWith({}), std::chrono::milliseconds(0), /*timeout_us=*/3000);
  ASSERT_TRUE(kserve.ok());
  EXPECT_EQ(kserve->deadline, r.received_at + std::chrono::microseconds(3000));
}

TEST(MakeAdmission, PriorityFromHeaderOrParameter) {
  auto header = MakeAdmission(RequestWith({{"X-Priority", "2"}}), {});
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->priority, 2);
  auto param = MakeAdmission(RequestWith({}), {}, std::nullopt, 1);
  ASSERT_TRUE(param.ok());
  EXPECT_EQ(param->priority, 1);
}

TEST(MakeAdmission, MalformedHeadersAreBadRequests) {
  for (const char* v : {"abc", "-5", "0", "10ms", ""}) {
    if (std::string_view(v).empty()) continue;
    auto a = MakeAdmission(RequestWith({{"x-timeout-ms", v}}), {});
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << v;
  }
  EXPECT_EQ(MakeAdmission(RequestWith({{"x-priority", "high"}}), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ErrorResponse, OverloadCarriesRetryAfter) {
  http::Response busy = ErrorResponse(absl::UnavailableError("queue full"));
  EXPECT_EQ(busy.status, 503);
  bool retry_after = false;
  for (const auto& [k, v] : busy.headers) retry_after |= (k == "Retry-After");
  EXPECT_TRUE(retry_after);
  EXPECT_NE(busy.body.find("queue full"), std::string::npos);
  http::Response bad = ErrorResponse(absl::FailedPreconditionError("texts must not be empty"));
  EXPECT_EQ(bad.status, 422);
  EXPECT_TRUE(bad.headers.empty());
}

TEST(AddTimingHeaders, TeiHeadersAndServerTiming) {
  serving::StageTimings t;
  t.tokenize = std::chrono::microseconds(1500);
  t.queue = std::chrono::milliseconds(3);
  t.inference = std::chrono::milliseconds(40);
  t.total = std::chrono::milliseconds(45);
  http::Response r;
  AddTimingHeaders(t, &r);
  std::map<std::string, std::string> h(r.headers.begin(), r.headers.end());
  EXPECT_EQ(h["x-tokenization-time"], "1");
  EXPECT_EQ(h["x-queue-time"], "3");
  EXPECT_EQ(h["x-inference-time"], "40");
  EXPECT_EQ(h["x-total-time"], "45");
  EXPECT_NE(h["Server-Timing"].find("tokenize;dur=1.500"), std::string::npos);
}

TEST(ResponseSender, ReleasesItsConcurrencyPermitBeforeTheResponseLeaves) {
  guard::ConcurrencyLimiter limiter(1);
  bool slot_free_when_sent = false;
  int sent = 0;
  ResponseSender sender(
      http::Responder::FromCallback([&](http::Response) {
        ++sent;
        // The client may already be sending its next request: its permit must be available.
        slot_free_when_sent = limiter.TryAcquire().has_value();
      }),
      nullptr, "rerank", std::chrono::steady_clock::now());
  auto permit = limiter.TryAcquire();
  ASSERT_TRUE(permit.has_value());
  sender.hold(*std::move(permit));
  EXPECT_FALSE(limiter.TryAcquire().has_value());
  sender.Send(http::Response{});
  sender.Send(http::Response{});  // a second Send is ignored
  EXPECT_EQ(sent, 1);
  EXPECT_TRUE(slot_free_when_sent);
}

}  // namespace
}  // namespace tide::server
