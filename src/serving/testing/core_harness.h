// tide::serving::testing — a ServiceCore over its own model manager and metrics with fake backends
// (fake_backend.h), an injected clock and one tokenization worker, for the service-core tests
// (service_core_admission_test.cc, service_core_scoring_test.cc): start a call and wait for its
// admission, block the only worker, rerank and wait, open a model's breaker.
//
// Contract: test-only (target tide_serving_testing); header-only; no sleeps (waits are bounded by
// kHang and fail the test when reached).
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "serving/model_manager.h"
#include "serving/service_core.h"
#include "serving/serving_metrics.h"
#include "serving/testing/fake_backend.h"

namespace tide::serving::testing {

// A core over its own manager and metrics; one tokenization worker unless a test asks for more.
struct ServiceCoreHarness {
  explicit ServiceCoreHarness(ServiceCoreOptions options = {}) {
    auto m = ServingMetrics::Create();
    EXPECT_TRUE(m.ok());
    metrics = *std::move(m);
    models = ModelManager::Create(metrics.get());
    if (options.tokenization_workers == 0) options.tokenization_workers = 1;
    if (options.clock == nullptr) options.clock = &clock;
    auto c = ServiceCore::Create(models.get(), metrics.get(), options);
    EXPECT_TRUE(c.ok()) << c.status();
    core = *std::move(c);
  }
  ~ServiceCoreHarness() {
    core.reset();  // workers first, while models and metrics still exist
    models.reset();
  }

  CallInfo Info(size_t body_bytes = 100) const {
    CallInfo info;
    info.body_bytes = body_bytes;
    info.received_at = clock.Now();
    info.client_gone = std::make_shared<CancellationFlag>();
    return info;
  }
  // Starts a call and waits for its refusal or its admitted call (the work then returns at once).
  absl::StatusOr<CallPtr> StartAndWait(const CallInfo& info) {
    absl::StatusOr<CallPtr> out = absl::UnknownError("no answer");
    absl::Notification done;
    core->Start(info, [&](absl::StatusOr<CallPtr> call) {
      out = std::move(call);
      done.Notify();
    });
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(kHang));
    return out;
  }
  // Occupies the only tokenization worker until the returned notification is notified.
  std::shared_ptr<absl::Notification> BlockWorker() {
    auto release = std::make_shared<absl::Notification>();
    absl::Notification running;
    core->Start(Info(), [release, &running](absl::StatusOr<CallPtr> call) {
      EXPECT_TRUE(call.ok()) << call.status();
      running.Notify();
      release->WaitForNotificationWithTimeout(kHang);
    });
    EXPECT_TRUE(running.WaitForNotificationWithTimeout(kHang));
    return release;
  }
  double Shed(const char* reason) const { return metrics->shed->WithLabels({reason})->Value(); }

  FakeClock clock;
  std::unique_ptr<ServingMetrics> metrics;
  std::unique_ptr<ModelManager> models;
  std::unique_ptr<ServiceCore> core;
};

inline absl::StatusOr<RerankScores> RerankNow(ServiceCore& core, const CallPtr& call, std::shared_ptr<ServedModel> model,
                                       std::vector<std::string_view> docs) {
  absl::StatusOr<RerankScores> out = absl::UnknownError("no answer");
  absl::Notification done;
  core.Rerank(call, std::move(model), "a", docs, PairOptions{}, /*raw_scores=*/false,
              [&](absl::StatusOr<RerankScores> s) {
                out = std::move(s);
                done.Notify();
              });
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(kHang));
  return out;
}

inline float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// Opens `model`'s breaker by failing its batches (parameters from the spec).
inline void OpenBreaker(ServedModel& model, BackendControl& c) {
  c.fail = true;
  for (int i = 0; i < 200 && model.AdmitToModel(); ++i) {
    absl::Notification done;
    auto rows = Rows(1);
    model.Submit(rows, {}, [&done](absl::StatusOr<InferenceResult>) { done.Notify(); });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(kHang));
  }
  ASSERT_FALSE(model.AdmitToModel());
}

inline ModelSpec BreakerSpec(std::string name) {
  ModelSpec spec;
  spec.name = std::move(name);
  spec.parameters.breaker_error_rate = 0.5;
  spec.parameters.breaker_min_samples = 1;
  spec.parameters.breaker_open_s = 600;
  return spec;
}

}  // namespace tide::serving::testing
