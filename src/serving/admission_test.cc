// Tests of admission alone (no scoring pipeline, no coordinator): the named model, memory and
// concurrency refusals with their shed reasons, the sticky headers a rollout asks for kept on the
// call, the one place pairs are charged, the first attempt of a light body, and draining. One
// tokenization worker, an injected clock, no sleeps.
#include "serving/admission.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/error.h"
#include "gtest/gtest.h"
#include "serving/testing/fake_backend.h"

namespace tide::serving {
namespace {

using testing::BackendControl;
using testing::kHang;
using testing::Served;

// Only StickyHeaders matters to admission.
class StickyHook : public RolloutHook {
 public:
  absl::StatusOr<std::shared_ptr<ServedModel>> Pick(const Call&, std::string_view, std::string_view) const override {
    return absl::UnimplementedError("not used");
  }
  std::vector<std::string> StickyHeaders() const override { return {"x-user"}; }
  bool Tracks(const ServedModel&) const override { return false; }
  std::shared_ptr<AnswerWatch> Watch(const Call&, const ServedModel&, const MirrorRequest&) override { return nullptr; }
};

struct Harness {
  explicit Harness(AdmissionOptions options = {}, const RolloutHook* hook = nullptr) {
    auto m = ServingMetrics::Create();
    EXPECT_TRUE(m.ok());
    metrics = *std::move(m);
    models = ModelManager::Create(metrics.get());
    EXPECT_TRUE(models->Add(Served({.name = "m"}, std::make_shared<BackendControl>())).ok());
    options.tokenization_workers = 1;
    auto a = Admission::Create(models.get(), metrics.get(), options, &clock, hook);
    EXPECT_TRUE(a.ok()) << a.status();
    admission = *std::move(a);
  }
  ~Harness() {
    admission.reset();
    models.reset();
  }
  CallInfo Info(size_t body_bytes = 100) const {
    CallInfo info;
    info.body_bytes = body_bytes;
    info.received_at = clock.Now();
    return info;
  }
  absl::StatusOr<CallPtr> StartAndWait(const CallInfo& info, Admission::Attempt attempt = nullptr) {
    absl::StatusOr<CallPtr> out = absl::UnknownError("no answer");
    absl::Notification done;
    admission->Start(
        info,
        [&](absl::StatusOr<CallPtr> call) {
          out = std::move(call);
          done.Notify();
        },
        std::move(attempt));
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(kHang));
    return out;
  }
  double Shed(const char* reason) const { return metrics->shed->WithLabels({reason})->Value(); }

  FakeClock clock;
  std::unique_ptr<ServingMetrics> metrics;
  std::unique_ptr<ModelManager> models;
  std::unique_ptr<Admission> admission;
};

TEST(Admission, RefusesAnUnknownModelTooLargeBodiesAndCallsBeyondTheLimit) {
  AdmissionOptions o;
  o.max_concurrent_requests = 1;
  o.max_inflight_bytes = 10'000;
  o.request_memory_factor = 1;
  o.request_memory_fixed_bytes = 0;
  Harness h(o);
  CallInfo unknown = h.Info();
  unknown.model = "nope";
  EXPECT_EQ(KindOf(h.admission->Admit(unknown).status()), ErrorKind::kNotFound);
  EXPECT_EQ(KindOf(h.admission->Admit(h.Info(20'000)).status()), ErrorKind::kPayloadTooLarge);
  EXPECT_EQ(h.Shed("max_inflight_bytes"), 1);
  auto first = h.admission->Admit(h.Info());
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(h.admission->in_flight(), 1);
  EXPECT_EQ(KindOf(h.admission->Admit(h.Info()).status()), ErrorKind::kOverloaded);
  EXPECT_EQ(h.Shed("max_concurrent_requests"), 1);
  first->reset();  // the permit goes back with the call
  EXPECT_EQ(h.admission->in_flight(), 0);
  EXPECT_TRUE(h.admission->Admit(h.Info()).ok());
}

TEST(Admission, KeepsTheValuesOfTheHeadersARolloutIsStickyBy) {
  StickyHook hook;
  Harness h({}, &hook);
  CallInfo info = h.Info();
  info.header = [](std::string_view name) -> std::string_view { return name == "x-user" ? "u7" : "other"; };
  auto call = h.admission->Admit(info);
  ASSERT_TRUE(call.ok());
  EXPECT_EQ((*call)->StickyValue("x-user"), "u7");
  EXPECT_EQ((*call)->StickyValue("x-other"), "");  // not a sticky header: not kept
  Harness without;
  auto plain = without.admission->Admit(info);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)->StickyValue("x-user"), "");
}

TEST(Admission, ChargesPairsToTheKeyAndCountsThemOnTheCall) {
  FakeClock key_clock;
  auto keys = guard::ApiKeys::Parse("k1 name=calm pairs_per_second=10\n", "keys", &key_clock);
  ASSERT_TRUE(keys.ok()) << keys.status();
  AdmissionOptions o;
  o.api_keys = *std::move(keys);
  Harness h(o);
  CallInfo info = h.Info();
  info.authorization = "Bearer k1";
  auto call = h.admission->Admit(info);
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_TRUE(h.admission->ChargePairs(**call, 4).ok());
  EXPECT_EQ((*call)->pairs(), 4);
  absl::Status over = h.admission->ChargePairs(**call, 100);
  EXPECT_EQ(KindOf(over), ErrorKind::kOverloaded) << over;
  EXPECT_TRUE(RetryAfterMs(over).has_value());
  EXPECT_EQ((*call)->pairs(), 4);  // a refused charge is not counted
  EXPECT_EQ(h.Shed("key_quota"), 1);
  EXPECT_EQ(h.metrics->key_requests->WithLabels({"calm", "over_pairs"})->Value(), 1);
}

TEST(Admission, ALightBodysAttemptMayAnswerItBeforeTheQueue) {
  AdmissionOptions o;
  o.light_body_bytes = 1000;
  Harness h(o);
  bool ran = false;
  int attempts = 0;
  h.admission->Start(h.Info(10), [&](absl::StatusOr<CallPtr>) { ran = true; },
                     [&](const CallPtr& call) {
                       ++attempts;
                       return call != nullptr;  // answered
                     });
  EXPECT_EQ(attempts, 1);
  EXPECT_FALSE(ran);  // dropped unrun
  // A heavy body is never attempted; a light one the attempt declines goes to a worker.
  EXPECT_TRUE(h.StartAndWait(h.Info(5000), [&](const CallPtr&) { return ++attempts, true; }).ok());
  EXPECT_EQ(attempts, 1);
  EXPECT_TRUE(h.StartAndWait(h.Info(10), [&](const CallPtr&) { return ++attempts, false; }).ok());
  EXPECT_EQ(attempts, 2);
}

TEST(Admission, DrainingRefusesNewCalls) {
  Harness h;
  h.admission->SetDraining(true);
  EXPECT_EQ(KindOf(h.StartAndWait(h.Info()).status()), ErrorKind::kUnavailable);
  EXPECT_EQ(h.Shed("draining"), 1);
  h.admission->SetDraining(false);
  EXPECT_TRUE(h.StartAndWait(h.Info()).ok());
}

}  // namespace
}  // namespace tide::serving
