// In-process tests of the model side of the serving layer with a fake backend: the loader's
// product (LoadedModel) scheduled by ServedModel, and ModelManager's version selection and
// atomic replacement with requests in flight; queue admission (shedding), the circuit breaker,
// and the model's truncation_direction default. No model file, no ONNX Runtime, no sleeps.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "serving/model_loader.h"
#include "serving/model_manager.h"
#include "serving/scoring.h"
#include "serving/served_model.h"
#include "serving/testing/fake_backend.h"

namespace tide::serving {
namespace {

using json = nlohmann::json;
using ResultOr = absl::StatusOr<InferenceResult>;

using testing::BackendControl;
using testing::kHang;
using testing::ModelSpec;
using testing::Rows;
using testing::Served;

// Submits `rows` rows; the answer lands in *out and `done` is notified.
void SubmitRows(ServedModel& model, size_t rows, ResultOr* out, absl::Notification* done) {
  auto r = Rows(rows);
  model.Submit(r, {}, [out, done](ResultOr result) {
    *out = std::move(result);
    done->Notify();
  });
}

ResultOr Answer(ServedModel& model, size_t rows = 1) {
  ResultOr out = absl::UnknownError("no answer");
  absl::Notification done;
  SubmitRows(model, rows, &out, &done);
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(kHang));
  return out;
}

TEST(ServedModel, SchedulesALoadedModelOnInjectedBackends) {
  auto c = std::make_shared<BackendControl>();
  c->value = 0.25f;
  auto model = Served({}, c);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->name(), "m");
  EXPECT_EQ(model->version(), 1);
  EXPECT_TRUE(model->ready());
  ResultOr r = Answer(*model, 3);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows, 3);
  EXPECT_FLOAT_EQ(r->at(2, 0), 0.25f);
  EXPECT_EQ(model->Statistics().success.count, 1u);
  model->Shutdown();
  EXPECT_FALSE(model->ready());
  EXPECT_EQ(Answer(*model).status().code(), absl::StatusCode::kUnavailable);
}

TEST(ServedModel, RefusesARequestThatWouldOverfillTheQueue) {
  auto c = std::make_shared<BackendControl>();
  ModelSpec spec;
  spec.max_queue_size = 2;
  auto model = Served(spec, c);
  ASSERT_NE(model, nullptr);
  c->armed = true;
  ResultOr first, second;
  absl::Notification first_done, second_done;
  SubmitRows(*model, 1, &first, &first_done);  // runs, held at the gate
  ASSERT_TRUE(c->entered.WaitForNotificationWithTimeout(kHang));
  SubmitRows(*model, 1, &second, &second_done);  // queued: 1 of 2
  // Two more rows would make 3 > max_queue_size: refused at once, as a whole, on this thread.
  ResultOr shed = absl::UnknownError("no answer");
  absl::Notification shed_done;
  SubmitRows(*model, 2, &shed, &shed_done);
  ASSERT_TRUE(shed_done.HasBeenNotified());
  EXPECT_EQ(shed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(shed.status().message().find("max_queue_size 2"), std::string::npos) << shed.status();
  c->gate.Notify();
  ASSERT_TRUE(first_done.WaitForNotificationWithTimeout(kHang));
  ASSERT_TRUE(second_done.WaitForNotificationWithTimeout(kHang));
  EXPECT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(model->Statistics().fail.count, 1u);
}

TEST(ServedModel, BreakerOpensOnFailuresAndThenRefusesAdmission) {
  auto c = std::make_shared<BackendControl>();
  ModelSpec spec;
  spec.parameters.breaker_error_rate = 0.5;
  spec.parameters.breaker_min_samples = 1;
  spec.parameters.breaker_open_s = 600;
  auto model = Served(spec, c);
  ASSERT_NE(model, nullptr);
  ASSERT_NE(model->breaker(), nullptr);
  c->fail = true;
  for (int i = 0; i < 200 && model->AdmitToModel(); ++i) {
    ResultOr r = Answer(*model);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  }
  EXPECT_EQ(model->breaker()->state(), guard::BreakerState::kOpen);
  EXPECT_FALSE(model->AdmitToModel());
}

TEST(ServedModel, ModelTruncationDirectionIsTheDefaultOfRequestsThatSetNone) {
  auto c = std::make_shared<BackendControl>();
  ModelSpec spec;
  spec.max_sequence_length = 6;  // [CLS] a [SEP] + 2 document tokens + [SEP]
  spec.parameters.truncation_direction = tokenizer::TruncationDirection::kLeft;
  auto model = Served(spec, c);
  ASSERT_NE(model, nullptr);
  const std::vector<std::string_view> docs = {"b c d e"};
  auto tokenize = [&](PairOptions o) {
    std::vector<tokenizer::Encoding> rows;
    EXPECT_TRUE(TokenizePairs(*model, "a", docs, o, &rows).ok());
    return rows.empty() ? std::vector<int64_t>{} : rows[0].ids;
  };
  PairOptions unset, left, right;
  left.direction = tokenizer::TruncationDirection::kLeft;
  right.direction = tokenizer::TruncationDirection::kRight;
  EXPECT_EQ(tokenize(right), (std::vector<int64_t>{2, 4, 3, 5, 6, 3}));  // keeps "b c"
  EXPECT_EQ(tokenize(left), (std::vector<int64_t>{2, 4, 3, 7, 8, 3}));   // keeps "d e"
  EXPECT_EQ(tokenize(unset), tokenize(left));
}

TEST(ModelManager, SelectsVersionsByNameAndVersionAndTheDefaultByName) {
  auto c = std::make_shared<BackendControl>();
  auto manager = ModelManager::Create();
  ASSERT_TRUE(manager->Add(Served({.name = "m", .version = 1}, c)).ok());
  ASSERT_TRUE(manager->Add(Served({.name = "m", .version = 2}, c)).ok());
  ASSERT_TRUE(manager->Add(Served({.name = "b", .version = 7}, c)).ok());
  EXPECT_EQ(manager->Add(Served({.name = "m", .version = 2}, c)).code(), absl::StatusCode::kAlreadyExists);

  EXPECT_EQ((*manager->Find("m"))->version(), 2);  // newest
  EXPECT_EQ((*manager->Find("m", "1"))->version(), 1);
  EXPECT_EQ(manager->Find("m", "3").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(manager->Find("m", "x1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(manager->Find("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*manager->Default())->name(), "b");  // first by name
  EXPECT_EQ(manager->Versions("m"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(manager->All().size(), 3u);
  EXPECT_TRUE(manager->AllReady());

  ASSERT_TRUE(manager->Remove("m", 2).ok());
  EXPECT_EQ((*manager->Find("m"))->version(), 1);
  EXPECT_EQ(manager->Remove("m", 2).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(manager->Remove("b", 7).ok());
  EXPECT_EQ((*manager->Default())->name(), "m");
  EXPECT_EQ(manager->Find("b").status().code(), absl::StatusCode::kNotFound);
}

TEST(ModelManager, ReplaceIsAtomicAndRequestsInFlightFinishOnTheOldVersion) {
  auto old_backends = std::make_shared<BackendControl>();
  old_backends->value = 1.0f;
  auto new_backends = std::make_shared<BackendControl>();
  new_backends->value = 2.0f;
  auto manager = ModelManager::Create();
  ASSERT_TRUE(manager->Add(Served({}, old_backends)).ok());
  EXPECT_EQ(manager->Replace(Served({.name = "other"}, std::make_shared<BackendControl>())).code(), absl::StatusCode::kNotFound);

  // A request found the old version and is running on it (held at the gate)...
  std::shared_ptr<ServedModel> held = *manager->Find("m");
  old_backends->armed = true;
  ResultOr in_flight = absl::UnknownError("no answer");
  absl::Notification in_flight_done;
  SubmitRows(*held, 2, &in_flight, &in_flight_done);
  ASSERT_TRUE(old_backends->entered.WaitForNotificationWithTimeout(kHang));

  // ...when the version is replaced: new requests go to the new one at once.
  ASSERT_TRUE(manager->Replace(Served({}, new_backends)).ok());
  std::shared_ptr<ServedModel> now = *manager->Find("m", "1");
  EXPECT_NE(now.get(), held.get());
  ResultOr fresh = Answer(*now);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_FLOAT_EQ(fresh->at(0, 0), 2.0f);
  EXPECT_EQ(manager->All().size(), 1u);

  // The old version still serves its holder, and its request finishes there.
  EXPECT_TRUE(held->ready());
  EXPECT_FALSE(old_backends->all_destroyed.HasBeenNotified());
  old_backends->gate.Notify();
  ASSERT_TRUE(in_flight_done.WaitForNotificationWithTimeout(kHang));
  ASSERT_TRUE(in_flight.ok()) << in_flight.status();
  EXPECT_FLOAT_EQ(in_flight->at(1, 0), 1.0f);

  // The last holder's release retires it: shut down and its backends closed.
  held.reset();
  EXPECT_TRUE(old_backends->all_destroyed.WaitForNotificationWithTimeout(kHang));
  EXPECT_FALSE(new_backends->all_destroyed.HasBeenNotified());
  now.reset();
  manager.reset();  // the manager's end closes what it serves
  EXPECT_TRUE(new_backends->all_destroyed.HasBeenNotified());
}

TEST(ModelManager, RetiringFromAnInstanceThreadDoesNotDeadlock) {
  // The request's callback holds the last reference of a removed version: the release happens
  // on the version's own instance thread, which its destructor joins.
  auto c = std::make_shared<BackendControl>();
  auto manager = ModelManager::Create();
  ASSERT_TRUE(manager->Add(Served({}, c)).ok());
  std::shared_ptr<ServedModel> held = *manager->Find("m");
  c->armed = true;
  absl::Notification done;
  auto rows = Rows(1);
  ServedModel* raw = held.get();
  raw->Submit(rows, {}, [keep = std::move(held), &done](ResultOr r) mutable {
    EXPECT_TRUE(r.ok());
    done.Notify();
  });
  ASSERT_TRUE(c->entered.WaitForNotificationWithTimeout(kHang));
  ASSERT_TRUE(manager->Remove("m", 1).ok());
  EXPECT_EQ(manager->Find("m").status().code(), absl::StatusCode::kNotFound);
  c->gate.Notify();
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kHang));
  EXPECT_TRUE(c->all_destroyed.WaitForNotificationWithTimeout(kHang));
}

}  // namespace
}  // namespace tide::serving
