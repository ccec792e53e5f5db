#include "server/routes/route_util.h"

#include <limits>
#include <map>
#include <optional>

#include "api/status_http.h"
#include "server/http/router.h"
#include "server/access/access_table.h"
#include "absl/synchronization/notification.h"
#include "common/error.h"
#include "serving/scoring.h"
#include "serving/service_core.h"
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

TEST(CallInfoFor, CarriesTheHeadersTheCoreNeeds) {
  http::Request r = RequestWith({{"Authorization", "Bearer k"}, {"x-timeout-ms", "50"}, {"X-Priority", "2"}});
  r.body = "12345";
  auto info = CallInfoFor(r);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->authorization, "Bearer k");
  EXPECT_EQ(info->body_bytes, 5u);
  EXPECT_EQ(info->received_at, r.received_at);
  EXPECT_EQ(info->client_gone, r.client_gone);
  EXPECT_EQ(info->timeout_us, 50000);
  EXPECT_EQ(info->priority, 2);
  auto none = CallInfoFor(RequestWith({}));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->timeout_us.has_value());
  EXPECT_FALSE(none->priority.has_value());
}

// One rule for every edge: a header value that is not an integer is malformed (400); an integer
// out of range (a timeout <= 0, a negative priority) is invalid input (422), as KServe's timeout
// and priority parameters are. Huge values saturate (serving/call_test.cc checks the deadlines).
TEST(CallInfoFor, MalformedHeadersAre400AndOutOfRangeValues422) {
  for (const char* v : {"abc", "10ms", "9223372036854775808", "1.5"}) {
    auto info = CallInfoFor(RequestWith({{"x-timeout-ms", v}}));
    EXPECT_EQ(api::HttpStatusFor(info.status()), 400) << v;
  }
  EXPECT_EQ(api::HttpStatusFor(CallInfoFor(RequestWith({{"x-priority", "high"}})).status()), 400);
  for (const char* v : {"0", "-5", "-9223372036854775808"}) {
    auto info = CallInfoFor(RequestWith({{"x-timeout-ms", v}}));
    ASSERT_TRUE(info.ok()) << v;
    EXPECT_EQ(api::HttpStatusFor(serving::AdmissionFor(*info, {}).status()), 422) << v;
  }
  auto negative = CallInfoFor(RequestWith({{"x-priority", "-1"}}));
  ASSERT_TRUE(negative.ok());
  EXPECT_EQ(api::HttpStatusFor(serving::AdmissionFor(*negative, {}).status()), 422);
  // A huge timeout is accepted and saturates.
  auto huge = CallInfoFor(RequestWith({{"x-timeout-ms", "9223372036854775807"}}));
  ASSERT_TRUE(huge.ok());
  EXPECT_TRUE(serving::AdmissionFor(*huge, std::chrono::milliseconds(30000)).ok());
}

TEST(CallInfoFor, MalformedHeaderValuesAreQuotedBounded) {
  auto a = CallInfoFor(RequestWith({{"x-timeout-ms", std::string(100 * 1024, 'x')}}));
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(a.status().message().size(), 300u);
}

TEST(ErrorResponse, OverloadCarriesRetryAfter) {
  http::Response busy = ErrorResponse(errors::Unavailable("queue full"));
  EXPECT_EQ(busy.status, 503);
  bool retry_after = false;
  for (const auto& [k, v] : busy.headers) retry_after |= (k == "Retry-After");
  EXPECT_TRUE(retry_after);
  EXPECT_NE(busy.body.find("queue full"), std::string::npos);
  http::Response bad = ErrorResponse(errors::InvalidInput("texts must not be empty"));
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

TEST(ResponseSender, ReleasesTheCallsConcurrencyPermitBeforeTheResponseLeaves) {
  auto metrics = serving::ServingMetrics::Create();
  ASSERT_TRUE(metrics.ok());
  auto models = serving::ModelManager::Create(metrics->get());
  serving::ServiceCoreOptions options;
  options.max_concurrent_requests = 1;
  options.tokenization_workers = 1;
  auto core = serving::ServiceCore::Create(models.get(), metrics->get(), options);
  ASSERT_TRUE(core.ok()) << core.status();
  int64_t in_flight_when_sent = -1;
  int sent = 0;
  absl::Notification done;
  serving::CallInfo info;
  info.received_at = std::chrono::steady_clock::now();
  (*core)->Start(info, [&](absl::StatusOr<serving::CallPtr> call) {
    ASSERT_TRUE(call.ok()) << call.status();
    ResponseSender sender(http::Responder::FromCallback([&](http::Response r) {
                            ++sent;
                            // The client may already be sending its next request: its slot must be free.
                            in_flight_when_sent = (*core)->CurrentLoad().in_flight;
                            std::map<std::string, std::string> h(r.headers.begin(), r.headers.end());
                            EXPECT_EQ(h["x-tide-model-version"], "3");
                          }),
                          nullptr, "rerank", std::chrono::steady_clock::now());
    sender.hold(*call);
    sender.set_model("m", 3);
    EXPECT_EQ((*core)->CurrentLoad().in_flight, 1);
    sender.Send(http::Response{});
    sender.Send(http::Response{});  // a second Send is ignored
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(sent, 1);
  EXPECT_EQ(in_flight_when_sent, 0);
}

TEST(ErrorResponse, AQuotasRetryAfterIsRoundedUpToWholeSeconds) {
  const http::Response r = ErrorResponse(WithRetryAfter(errors::Overloaded("over quota"), 1500));
  EXPECT_EQ(r.status, 429);
  std::map<std::string, std::string> h(r.headers.begin(), r.headers.end());
  EXPECT_EQ(h["Retry-After"], "2");
  const http::Response soon = ErrorResponse(WithRetryAfter(errors::Overloaded("over quota"), 1));
  std::map<std::string, std::string> soon_headers(soon.headers.begin(), soon.headers.end());
  EXPECT_EQ(soon_headers["Retry-After"], "1");
}

TEST(ErrorResponse, KindsDecideTheStatusAnd401AsksForTheKey) {
  // The kind, not the absl code, decides: a payload-too-large status is 413 although its code is
  // RESOURCE_EXHAUSTED (which alone means 429).
  EXPECT_EQ(ErrorResponse(errors::PayloadTooLarge("big")).status, 413);
  EXPECT_EQ(ErrorResponse(errors::Overloaded("busy")).status, 429);
  const http::Response unauthorized = ErrorResponse(errors::Unauthenticated("no key"));
  EXPECT_EQ(unauthorized.status, 401);
  std::map<std::string, std::string> h(unauthorized.headers.begin(), unauthorized.headers.end());
  EXPECT_EQ(h["WWW-Authenticate"], "Bearer");
}

TEST(ErrorResponse, DegradedUnavailableIsMarked) {
  absl::Status degraded = errors::Unavailable("model m is degraded");
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
  EXPECT_EQ(admin, (std::vector<std::string>{"/metrics", "/load", "/v2", "/v2/health/live", "/v2/health/ready", "/health",
                                              "/ping"}));
  EXPECT_EQ(RouteTable().size(), 41u);
}

}  // namespace
}  // namespace tide::server
