#include "server/routes/route_util.h"

#include <limits>
#include <map>
#include <optional>

#include "api/status_http.h"
#include "server/http/router.h"
#include "server/routes/route_table.h"
#include "serving/scoring.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

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

// Regression: x-timeout-ms 9223372036854775807 overflowed the microsecond conversion into a
// deadline in the past (an instant 504). A timeout longer than the default gets the default; with
// no default, one beyond what the clock can represent means no deadline, never an early one.
TEST(MakeAdmission, HugeTimeoutsAreClampedNeverOverflowed) {
  const auto r = RequestWith({});
  const std::string max = std::to_string(std::numeric_limits<int64_t>::max());
  const std::chrono::milliseconds default_timeout(30000);
  for (const std::string ms : {max, std::to_string(std::numeric_limits<int64_t>::max() / 1000 + 1), std::string("9223372036854775")}) {
    auto header = MakeAdmission(RequestWith({{"x-timeout-ms", ms}}), default_timeout);
    ASSERT_TRUE(header.ok()) << ms;
    EXPECT_EQ(header->deadline, r.received_at + default_timeout) << ms;
    auto no_default = MakeAdmission(RequestWith({{"x-timeout-ms", ms}}), std::chrono::milliseconds(0));
    ASSERT_TRUE(no_default.ok()) << ms;
    EXPECT_GT(no_default->deadline, r.received_at + std::chrono::hours(24 * 365 * 100)) << ms;
  }
  for (const int64_t us : {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max() / 1000 + 1}) {
    auto kserve = MakeAdmission(r, default_timeout, us);
    ASSERT_TRUE(kserve.ok()) << us;
    EXPECT_EQ(kserve->deadline, r.received_at + default_timeout) << us;
    auto no_default = MakeAdmission(r, std::chrono::milliseconds(0), us);
    ASSERT_TRUE(no_default.ok()) << us;
    EXPECT_GT(no_default->deadline, r.received_at + std::chrono::hours(24 * 365 * 100)) << us;
  }
  // A huge server default is clamped the same way.
  auto huge_default = MakeAdmission(r, std::chrono::milliseconds(std::numeric_limits<int64_t>::max()));
  ASSERT_TRUE(huge_default.ok());
  EXPECT_GT(huge_default->deadline, r.received_at + std::chrono::hours(24 * 365 * 100));
  // Non-positive stays an error: 400 for the header, 422 for KServe's parameter.
  EXPECT_EQ(MakeAdmission(r, default_timeout, int64_t{-1}).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(MakeAdmission(r, default_timeout, std::numeric_limits<int64_t>::min()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(MakeAdmission(RequestWith({{"x-timeout-ms", "-9223372036854775808"}}), default_timeout).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeAdmission(RequestWith({{"x-timeout-ms", "9223372036854775808"}}), default_timeout).status().code(),
            absl::StatusCode::kInvalidArgument);  // not an int64 at all
}

TEST(MakeAdmission, MalformedHeaderValuesAreQuotedBounded) {
  auto a = MakeAdmission(RequestWith({{"x-timeout-ms", std::string(100 * 1024, 'x')}}), {});
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(a.status().message().size(), 300u);
}

// Every status the HTTP layer answers by itself (server/http: malformed or refused requests, the
// router, timeouts, limits, the connection cap, a dropped Responder) carries the error_type that
// api's one table gives the corresponding code.
TEST(ErrorTypes, HttpLayerStatusesMatchTheApiTable) {
  const std::vector<std::pair<int, absl::StatusCode>> emitted = {
      {400, absl::StatusCode::kInvalidArgument},     // malformed HTTP, framing, Host
      {404, absl::StatusCode::kNotFound},            // no route
      {405, absl::StatusCode::kInvalidArgument},     // wrong method
      {408, absl::StatusCode::kDeadlineExceeded},    // slow sender
      {413, absl::StatusCode::kFailedPrecondition},  // body over the limit
      {431, absl::StatusCode::kFailedPrecondition},  // headers over the limit
      {500, absl::StatusCode::kInternal},            // handler dropped its Responder
      {501, absl::StatusCode::kUnimplemented},       // unsupported transfer coding
      {503, absl::StatusCode::kUnavailable},         // connection cap
  };
  for (const auto& [status, code] : emitted) {
    EXPECT_EQ(http::ErrorTypeForStatus(status), api::ErrorTypeFor(code)) << status;
    EXPECT_EQ(nlohmann::json::parse(http::JsonError(status, "x").body)["error_type"], api::ErrorTypeFor(code)) << status;
  }
  // And every status api's table produces maps back to its own error_type.
  for (int c = 1; c <= 16; ++c) {
    const auto code = static_cast<absl::StatusCode>(c);
    EXPECT_EQ(http::ErrorTypeForStatus(api::HttpStatusFor(code)), api::ErrorTypeFor(code)) << c;
  }
}

TEST(CheckApiKey, SendsA401WithoutTheKeyAndNothingWithIt) {
  std::optional<http::Response> got;
  auto sender = [&got] {
    return ResponseSender(http::Responder::FromCallback([&got](http::Response r) { got = std::move(r); }), nullptr,
                          "model_stats", std::chrono::steady_clock::now());
  };
  {
    ResponseSender s = sender();
    EXPECT_TRUE(CheckApiKey(RequestWith({}), "", &s));  // no key configured
    EXPECT_TRUE(CheckApiKey(RequestWith({{"Authorization", "Bearer k"}}), "k", &s));
    s.Send(http::Response{});
  }
  EXPECT_EQ(got->status, 200);
  got.reset();
  ResponseSender s = sender();
  EXPECT_FALSE(CheckApiKey(RequestWith({{"Authorization", "Bearer wrong"}}), "k", &s));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->status, 401);
  EXPECT_EQ(nlohmann::json::parse(got->body)["error_type"], "unauthorized");
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

TEST(ErrorResponse, DegradedUnavailableIsMarked) {
  absl::Status degraded = absl::UnavailableError("model m is degraded");
  EXPECT_FALSE(serving::IsDegradedUnavailable(degraded));
  const http::Response plain = ErrorResponse(degraded);
  EXPECT_EQ(plain.status, 503);
  for (const auto& [name, value] : plain.headers) EXPECT_NE(name, "x-tide-degraded");
  const absl::Status marked = serving::DegradedUnavailableError("m");
  EXPECT_TRUE(serving::IsDegradedUnavailable(marked));
  const http::Response r = ErrorResponse(marked);
  EXPECT_EQ(r.status, 503);
  std::map<std::string, std::string> headers(r.headers.begin(), r.headers.end());
  EXPECT_EQ(headers["x-tide-degraded"], "unavailable");
  EXPECT_EQ(headers["Retry-After"], "1");
}

// The one route table: every (method, pattern) registers once on a Router, and the admin listener
// serves exactly the probes, the load report, server metadata and metrics.
TEST(RouteTable, RegistersAndAdminRoutesAreTheProbes) {
  http::Router router;
  std::vector<std::string> admin;
  for (const RouteEntry& e : RouteTable()) {
    EXPECT_TRUE(router.Add(e.method, e.pattern, [](http::Request, http::PathParams, http::Responder) {}).ok())
        << e.method << " " << e.pattern;
    if (e.admin) admin.push_back(e.pattern);
  }
  EXPECT_EQ(admin, (std::vector<std::string>{"/metrics", "/load", "/v2", "/v2/health/live", "/v2/health/ready", "/health"}));
  EXPECT_EQ(RouteTable().size(), 21u);
}

}  // namespace
}  // namespace tide::server
