// In-process tests of the service core's admission with fake backends (serving/testing/
// core_harness.h): the documented order (draining, credential, concurrency, unknown model, memory),
// tenants' priorities and quotas, the tokenization queue, deadlines and departed clients while a
// call waits for a worker (injected clock), and how every refusal maps to HTTP and gRPC. No model
// file, no ONNX Runtime, no HTTP, no sleeps.
#include "serving/service_core.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "api/status_http.h"
#include "common/error.h"
#include "guard/api_keys.h"
#include "gtest/gtest.h"
#include "serving/testing/core_harness.h"

namespace tide::serving {
namespace {

using testing::BackendControl;
using testing::kHang;
using testing::ModelSpec;
using testing::Rows;
using testing::Served;
using Harness = testing::ServiceCoreHarness;
using testing::RerankNow;

TEST(ServiceCore, AdmitsInTheDocumentedOrder) {
  ServiceCoreOptions o;
  o.api_key = "k";
  o.max_concurrent_requests = 1;
  o.max_inflight_bytes = 10 << 20;
  o.request_memory_factor = 1;
  o.request_memory_fixed_bytes = 0;
  Harness h(o);
  ASSERT_TRUE(h.models->Add(Served({}, std::make_shared<BackendControl>())).ok());

  // Draining comes first, even before the credential.
  h.core->SetDraining(true);
  EXPECT_EQ(api::HttpStatusFor(h.StartAndWait(h.Info()).status()), 503);
  EXPECT_FALSE(h.core->Ready());
  h.core->SetDraining(false);
  EXPECT_TRUE(h.core->Ready());
  EXPECT_EQ(h.Shed("draining"), 1);

  // The credential.
  CallInfo info = h.Info();
  EXPECT_EQ(api::HttpStatusFor(h.StartAndWait(info).status()), 401);
  info.authorization = "Bearer wrong";
  EXPECT_EQ(api::HttpStatusFor(h.StartAndWait(info).status()), 401);
  info.authorization = "Bearer k";

  // Concurrency: while one call is held, the next is refused; the slot frees with the call.
  absl::StatusOr<CallPtr> held = h.StartAndWait(info);
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(h.core->CurrentLoad().in_flight, 1);
  EXPECT_EQ(api::HttpStatusFor(h.StartAndWait(info).status()), 429);
  EXPECT_EQ(h.Shed("max_concurrent_requests"), 1);
  held->reset();
  EXPECT_EQ(h.core->CurrentLoad().in_flight, 0);

  // A model the path names must be served.
  CallInfo named = info;
  named.model = "nope";
  EXPECT_EQ(api::HttpStatusFor(h.StartAndWait(named).status()), 404);
  named.model = "m";
  named.model_version = "1";
  EXPECT_TRUE(h.StartAndWait(named).ok());

  // Memory: over the whole budget 413; over what is left 429.
  CallInfo huge = info;
  huge.body_bytes = 11 << 20;
  EXPECT_EQ(api::HttpStatusFor(h.StartAndWait(huge).status()), 413);
  h.core = nullptr;  // a core without the concurrency limit for the budget's second case
  o.max_concurrent_requests = 0;
  auto core = ServiceCore::Create(h.models.get(), h.metrics.get(), o);
  ASSERT_TRUE(core.ok());
  h.core = *std::move(core);
  CallInfo six = info;
  six.body_bytes = 6 << 20;
  absl::StatusOr<CallPtr> big = h.StartAndWait(six);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(api::HttpStatusFor(h.StartAndWait(six).status()), 429);
  EXPECT_EQ(h.Shed("max_inflight_bytes"), 2);
  big->reset();  // the lease goes back with the call
  EXPECT_TRUE(h.StartAndWait(six).ok());

  // A malformed timeout is the core's to refuse, for every edge.
  CallInfo zero = info;
  zero.timeout_us = 0;
  EXPECT_EQ(api::HttpStatusFor(h.StartAndWait(zero).status()), 422);
}

// A tenant asks for at most its max_priority, on the header and in the body (Refine); an admin
// key is no inference key.
TEST(ServiceCore, ATenantsPriorityIsClampedToItsMaxPriorityAndAdminKeysDoNotInfer) {
  FakeClock keys_clock;
  auto keys = guard::ApiKeys::Parse("capped-key name=capped max_priority=3\nplain-key name=plain\n"
                                    "ops-key name=ops role=admin\n", "keys.txt", &keys_clock);
  ASSERT_TRUE(keys.ok()) << keys.status();
  ServiceCoreOptions o;
  o.api_keys = *keys;
  Harness h(o);
  auto admitted = [&](const char* authorization, std::optional<int64_t> priority) {
    CallInfo info = h.Info();
    info.authorization = authorization;
    info.priority = priority;
    return h.StartAndWait(info);
  };
  auto capped = admitted("Bearer capped-key", 1);
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_EQ((*capped)->admission().priority, 3);
  EXPECT_EQ((*admitted("Bearer capped-key", 5))->admission().priority, 5);
  EXPECT_EQ((*admitted("Bearer plain-key", 1))->admission().priority, 0);
  auto refined = admitted("Bearer capped-key", std::nullopt);
  ASSERT_TRUE(refined.ok());
  ASSERT_TRUE((*refined)->Refine(std::nullopt, 2).ok());
  EXPECT_EQ((*refined)->admission().priority, 3);
  auto admin = admitted("Bearer ops-key", std::nullopt);
  ASSERT_FALSE(admin.ok());
  EXPECT_EQ(KindOf(admin.status()), ErrorKind::kForbidden);
}

TEST(ServiceCore, AFullWorkerQueueRefusesAtOnce) {
  ServiceCoreOptions o;
  o.tokenization_queue = 1;
  Harness h(o);
  auto release = h.BlockWorker();
  absl::Notification queued_ran;
  h.core->Start(h.Info(), [&](absl::StatusOr<CallPtr> call) {
    EXPECT_TRUE(call.ok());
    queued_ran.Notify();
  });
  absl::StatusOr<CallPtr> refused = absl::UnknownError("no answer");
  h.core->Start(h.Info(), [&](absl::StatusOr<CallPtr> call) { refused = std::move(call); });
  EXPECT_EQ(api::HttpStatusFor(refused.status()), 429);  // answered on this thread
  EXPECT_EQ(h.Shed("tokenization_queue"), 1);
  release->Notify();
  EXPECT_TRUE(queued_ran.WaitForNotificationWithTimeout(kHang));
}

TEST(ServiceCore, ACallIsDroppedWhenItsDeadlinePassesOrItsClientLeavesWhileItWaits) {
  Harness h;
  auto release = h.BlockWorker();
  CallInfo timed = h.Info();
  timed.timeout_us = 1000;
  CallInfo left = h.Info();
  absl::StatusOr<CallPtr> late = absl::UnknownError("no answer"), gone = absl::UnknownError("no answer");
  absl::Notification late_done, gone_done;
  h.core->Start(timed, [&](absl::StatusOr<CallPtr> c) {
    late = std::move(c);
    late_done.Notify();
  });
  h.core->Start(left, [&](absl::StatusOr<CallPtr> c) {
    gone = std::move(c);
    gone_done.Notify();
  });
  h.clock.Advance(std::chrono::milliseconds(2));
  left.client_gone->Cancel();
  release->Notify();
  ASSERT_TRUE(late_done.WaitForNotificationWithTimeout(kHang));
  ASSERT_TRUE(gone_done.WaitForNotificationWithTimeout(kHang));
  EXPECT_EQ(api::HttpStatusFor(late.status()), 504);
  EXPECT_NE(late.status().message().find("waiting for a tokenization worker"), std::string::npos);
  EXPECT_EQ(api::HttpStatusFor(gone.status()), 499);
  EXPECT_EQ(h.core->CurrentLoad().in_flight, 0);
}

// Several API keys: each tenant's requests_per_second, max_concurrent and pairs_per_second quotas
// hold for it alone; over quota is 429 with the time until its bucket allows the call.
TEST(ServiceCore, PerKeyQuotasLimitOnlyTheirOwnTenant) {
  FakeClock clock;
  auto keys = guard::ApiKeys::Parse(
      "flood-key name=flood requests_per_second=2 max_concurrent=1 pairs_per_second=4\n"
      "calm-key name=calm\n",
      "keys", &clock);
  ASSERT_TRUE(keys.ok()) << keys.status();
  ServiceCoreOptions o;
  o.api_keys = *keys;
  o.clock = &clock;
  Harness h(o);
  ASSERT_TRUE(h.models->Add(Served({}, std::make_shared<BackendControl>())).ok());
  auto as = [&](const char* key) {
    CallInfo info = h.Info();
    info.authorization = key;
    return info;
  };
  // max_concurrent=1: a second call of the same key waits for the first.
  absl::StatusOr<CallPtr> first = h.StartAndWait(as("Bearer flood-key"));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)->tenant()->name(), "flood");
  absl::StatusOr<CallPtr> second = h.StartAndWait(as("Bearer flood-key"));
  EXPECT_EQ(api::HttpStatusFor(second.status()), 429);
  EXPECT_NE(second.status().message().find("max_concurrent"), std::string::npos);
  // The other tenant is not affected.
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(h.StartAndWait(as("Bearer calm-key")).ok()) << i;

  // pairs_per_second=4 (burst 4): 3 documents pass, then 3 more must wait 0.5 s.
  auto model = *h.core->FindModel();
  EXPECT_TRUE(RerankNow(*h.core, *first, model, {"b", "c", "d"}).ok());
  auto over = RerankNow(*h.core, *first, model, {"b", "c", "d"});
  EXPECT_EQ(api::HttpStatusFor(over.status()), 429);
  EXPECT_EQ(RetryAfterMs(over.status()), 500);  // 2 tokens missing at 4/s
  EXPECT_EQ(h.metrics->key_pairs->WithLabels({"flood"})->Value(), 3);
  // The edge releases the call's permits as it answers (the model's callback may hold the call a
  // little longer).
  (*first)->ReleasePermit();
  first->reset();

  // requests_per_second=2 (burst 2): the first call took one token, this one takes the other.
  EXPECT_TRUE(h.StartAndWait(as("Bearer flood-key")).ok());
  absl::StatusOr<CallPtr> third = h.StartAndWait(as("Bearer flood-key"));
  EXPECT_EQ(api::HttpStatusFor(third.status()), 429);
  EXPECT_EQ(RetryAfterMs(third.status()), 500);
  EXPECT_EQ(h.metrics->key_requests->WithLabels({"flood", "over_requests"})->Value(), 1);
  EXPECT_EQ(h.metrics->key_requests->WithLabels({"flood", "over_concurrency"})->Value(), 1);
  EXPECT_EQ(h.metrics->key_requests->WithLabels({"calm", "admitted"})->Value(), 5);
  clock.Advance(std::chrono::milliseconds(500));
  EXPECT_TRUE(h.StartAndWait(as("Bearer flood-key")).ok());

  // Unknown keys are 401; a reload swaps the table at once.
  EXPECT_EQ(api::HttpStatusFor(h.StartAndWait(as("Bearer other")).status()), 401);
  auto reloaded = guard::ApiKeys::Parse("other name=other\n", "keys", &clock);
  ASSERT_TRUE(reloaded.ok());
  ASSERT_TRUE(h.core->SetKeys("", "", *reloaded).ok());
  EXPECT_TRUE(h.StartAndWait(as("Bearer other")).ok());
  EXPECT_EQ(api::HttpStatusFor(h.StartAndWait(as("Bearer calm-key")).status()), 401);
  EXPECT_EQ(api::HttpStatusFor(h.core->Authorize(guard::Access::kTenant, "Bearer calm-key").status()), 401);
}

TEST(ServiceCore, WithoutKeysNoCredentialIsAsked) {
  Harness h;
  auto who = h.core->Authorize(guard::Access::kTenant, "");
  ASSERT_TRUE(who.ok());
  EXPECT_EQ(*who, nullptr);
  auto call = h.StartAndWait(h.Info());
  ASSERT_TRUE(call.ok());
  EXPECT_EQ((*call)->tenant(), nullptr);
  EXPECT_TRUE(h.core->ChargePairs(**call, 1000000).ok());
}

// Every refusal the core makes, mapped by the one table to HTTP and gRPC.
TEST(ServiceCore, RefusalsMapToOneHttpAndGrpcAnswer) {
  ServiceCoreOptions o;
  o.api_key = "k";
  o.max_inflight_bytes = 100;
  o.request_memory_factor = 1;
  o.request_memory_fixed_bytes = 0;
  Harness h(o);
  CallInfo info = h.Info(10);
  info.authorization = "Bearer k";
  struct Case {
    const char* what;
    absl::Status status;
    int http;
    int grpc;
  };
  CallInfo unknown = info;
  unknown.model = "m";
  CallInfo huge = info;
  huge.body_bytes = 1000;
  CallInfo unauthenticated = info;
  unauthenticated.authorization = "";
  std::vector<Case> cases = {
      {"unauthenticated", h.StartAndWait(unauthenticated).status(), 401, 16},
      {"unknown model", h.StartAndWait(unknown).status(), 404, 5},
      {"too large", h.StartAndWait(huge).status(), 413, 8},
  };
  h.core->SetDraining(true);
  cases.push_back({"draining", h.StartAndWait(info).status(), 503, 14});
  for (const Case& c : cases) {
    EXPECT_EQ(api::HttpStatusFor(c.status), c.http) << c.what << ": " << c.status;
    EXPECT_EQ(api::GrpcStatusFor(c.status), c.grpc) << c.what << ": " << c.status;
  }
}

}  // namespace
}  // namespace tide::serving
