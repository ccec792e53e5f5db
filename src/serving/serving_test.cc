// Unit tests of the serving pieces that need no model file: request aggregation, deadlines,
// scoring, and the instance runner over a fake backend.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "batching/batcher.h"
#include "common/error.h"
#include "batching/instance_pool.h"
#include "serving/deadline_timer.h"
#include "serving/inference_request.h"
#include "serving/model_runner.h"
#include "serving/scoring.h"
#include "serving/testing/fake_backend.h"

namespace tide::serving {
namespace {

using ResultOr = absl::StatusOr<InferenceResult>;

TEST(InferenceRequest, CompletesOnceWithEveryRowInPlace) {
  int calls = 0;
  ResultOr got = absl::UnknownError("unset");
  InferenceRequest r(3, 2, [&](ResultOr result) { ++calls; got = std::move(result); });
  const float a[] = {1, 2}, b[] = {3, 4}, c[] = {5, 6};
  r.CompleteRow(2, c, 7, std::chrono::milliseconds(1), std::chrono::milliseconds(5));
  r.CompleteRow(0, a, 5, std::chrono::milliseconds(3), std::chrono::milliseconds(4));
  EXPECT_EQ(calls, 0);
  r.CompleteRow(1, b, 6, std::chrono::milliseconds(2), std::chrono::milliseconds(9));
  ASSERT_EQ(calls, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->logits, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(got->real_tokens, 18u);
  EXPECT_EQ(got->timings.queue, std::chrono::milliseconds(3));      // slowest row
  EXPECT_EQ(got->timings.inference, std::chrono::milliseconds(9));  // slowest batch
}

TEST(InferenceRequest, FirstFailureAnswersAtOnceAndLaterRowsAreIgnored) {
  int calls = 0;
  ResultOr got = absl::UnknownError("unset");
  InferenceRequest r(2, 1, [&](ResultOr result) { ++calls; got = std::move(result); });
  const float x = 1;
  r.Fail(absl::UnavailableError("queue full"));
  EXPECT_TRUE(r.finished());
  r.CompleteRow(0, &x, 1, {}, {});
  r.Fail(absl::InternalError("second"));
  r.CompleteRow(1, &x, 1, {}, {});
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
}

TEST(InferenceRequest, ConcurrentRowsCompleteExactlyOnce) {
  std::atomic<int> calls{0};
  const size_t rows = 64;
  auto r = std::make_shared<InferenceRequest>(rows, 1, [&](ResultOr result) {
    EXPECT_TRUE(result.ok());
    ++calls;
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < rows; i += 4) {
        const float v = static_cast<float>(i);
        r->CompleteRow(i, &v, 1, {}, {});
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls.load(), 1);
}

TEST(RowTask, IsCancelledWhenItsRequestFinishedOrItsClientLeft) {
  auto flag = std::make_shared<CancellationFlag>();
  auto request = std::make_shared<InferenceRequest>(2, 1, [](ResultOr) {});
  RowTask::Admission admission;
  admission.client_gone = flag;
  RowTask task(request, 0, tokenizer::Encoding{}, admission);
  EXPECT_FALSE(task.cancelled());
  flag->Cancel();
  EXPECT_TRUE(task.cancelled());
  RowTask other(request, 1, tokenizer::Encoding{}, RowTask::Admission{});
  EXPECT_FALSE(other.cancelled());
  request->Fail(absl::CancelledError("gone"));
  EXPECT_TRUE(other.cancelled());
}

TEST(DeadlineTimer, FailsARunningRequestAtItsDeadline) {
  DeadlineTimer timer;
  absl::Notification done;
  absl::Status status;
  std::chrono::steady_clock::time_point failed_at;
  auto request = std::make_shared<InferenceRequest>(1, 1, [&](ResultOr result) {
    failed_at = std::chrono::steady_clock::now();
    status = result.status();
    done.Notify();
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(30);
  timer.Schedule(deadline, request);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_GE(failed_at, deadline) << "failed before its deadline";  // an order, not a duration
}

TEST(DeadlineTimer, AnsweredRequestsAreNotFailedLater) {
  DeadlineTimer timer;
  int calls = 0;
  auto request = std::make_shared<InferenceRequest>(1, 1, [&](ResultOr result) {
    EXPECT_TRUE(result.ok());
    ++calls;
  });
  timer.Schedule(std::chrono::steady_clock::now() + std::chrono::milliseconds(1), request);
  const float v = 0.5f;
  request->CompleteRow(0, &v, 1, {}, {});
  // An earlier deadline scheduled later still fires first (the timer re-arms on earlier entries).
  absl::Notification fired;
  auto other = std::make_shared<InferenceRequest>(1, 1, [&](ResultOr) { fired.Notify(); });
  timer.Schedule(std::chrono::steady_clock::now() + std::chrono::hours(1), other);
  absl::Notification early_fired;
  auto early2 = std::make_shared<InferenceRequest>(1, 1, [&](ResultOr r) {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
    early_fired.Notify();
  });
  timer.Schedule(std::chrono::steady_clock::now() + std::chrono::milliseconds(5), early2);
  EXPECT_TRUE(early_fired.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_FALSE(fired.HasBeenNotified());
  EXPECT_EQ(calls, 1);
}

TEST(RerankScore, ActivationsOnTheLastLabel) {
  InferenceResult r;
  r.rows = 2;
  r.num_labels = 2;
  r.logits = {0.0f, 2.0f, 1.0f, -1.0f};
  const float sig = 1.0f / (1.0f + std::exp(-2.0f));
  EXPECT_FLOAT_EQ(RerankScore(r, 0, config::ScoreActivation::kSigmoid, false), sig);
  EXPECT_FLOAT_EQ(RerankScore(r, 0, config::ScoreActivation::kNone, false), 2.0f);
  EXPECT_FLOAT_EQ(RerankScore(r, 0, config::ScoreActivation::kSigmoid, true), 2.0f);  // raw wins
  EXPECT_NEAR(RerankScore(r, 1, config::ScoreActivation::kSoftmax, false), std::exp(-1.0) / (std::exp(1.0) + std::exp(-1.0)),
              1e-6);
}

// Fake backends (serving/testing/fake_backend.h) that answer, per row, [the number of attended
// tokens, the sum of the ids] and take token_type_ids; the control records the shapes run (RunAlone's
// apart).
std::shared_ptr<testing::BackendControl> CountingBackends() {
  auto c = std::make_shared<testing::BackendControl>();
  c->signature.num_labels = 2;
  c->signature.token_type_ids_name = "token_type_ids";
  c->logits = [](const runtime::TokenBatch& b, runtime::Logits* out) {
    for (int64_t r = 0; r < b.batch; ++r) {
      for (int64_t col = 0; col < b.seq_len; ++col) {
        out->values[r * 2] += static_cast<float>(b.attention_mask[r * b.seq_len + col]);
        out->values[r * 2 + 1] += static_cast<float>(b.input_ids[r * b.seq_len + col]);
      }
    }
  };
  return c;
}

std::unique_ptr<runtime::ModelBackend> Backend(std::shared_ptr<testing::BackendControl> c) {
  return std::make_unique<testing::FakeBackend>(std::move(c));
}

tokenizer::Encoding Row(std::vector<int64_t> ids) {
  tokenizer::Encoding e;
  e.ids = ids;
  e.attention_mask.assign(ids.size(), 1);
  e.type_ids.assign(ids.size(), 0);
  return e;
}

TEST(ModelRunner, PadsToTheBatchShapeAndCompletesEveryRow) {
  auto fake = CountingBackends();
  int observed = 0;
  ModelRunner runner(Backend(fake), /*pad_id=*/7, 0,
                     [&](const batching::Batch<RowTask>& b, Clock::duration, int) { observed += b.size(); });
  ResultOr got = absl::UnknownError("unset");
  auto request = std::make_shared<InferenceRequest>(2, 2, [&](ResultOr r) { got = std::move(r); });
  batching::Batch<RowTask> batch;
  batch.tasks.push_back(std::make_unique<RowTask>(request, 0, Row({1, 2, 3}), RowTask::Admission{}));
  batch.tasks.push_back(std::make_unique<RowTask>(request, 1, Row({4}), RowTask::Admission{}));
  batch.queue_durations.assign(2, Clock::duration{});
  batch.padded_sequence_length = 8;
  batch.padded_batch_size = 4;
  ASSERT_TRUE(runner.Run(batch).ok());
  ASSERT_EQ(fake->shapes().size(), 1u);
  EXPECT_EQ(fake->shapes()[0], (std::pair<int64_t, int64_t>{4, 8}));
  ASSERT_TRUE(got.ok()) << got.status();
  // Row 0: 3 attended tokens, ids 1+2+3 plus 5 pads of 7; row 1: 1 token, 4 + 7 pads of 7.
  EXPECT_EQ(got->logits, (std::vector<float>{3, 6 + 35, 1, 4 + 49}));
  EXPECT_EQ(observed, 2);
  for (const auto& t : batch.tasks) EXPECT_EQ(t, nullptr);  // completed tasks are released
}

// A batch the batcher formed alone goes to the backend's RunAlone (its wider session), any other
// to Run; warm-up runs RunAlone on the one-row shapes and the largest.
TEST(ModelRunner, AloneBatchesRunOnTheBackendsWiderPath) {
  auto fake = CountingBackends();
  ModelRunner runner(Backend(fake), 0, 0, nullptr);
  ASSERT_TRUE(runner.Warmup({{1, 16}, {2, 16}, {4, 32}, {1, 32}}).ok());
  EXPECT_EQ(fake->alone_shapes(), (std::vector<std::pair<int64_t, int64_t>>{{1, 16}, {4, 32}, {1, 32}}));
  EXPECT_EQ(fake->shapes().size(), 4u);
  fake->ClearShapes();
  for (const bool alone : {true, false}) {
    auto request = std::make_shared<InferenceRequest>(1, 2, [](ResultOr) {});
    batching::Batch<RowTask> batch;
    batch.tasks.push_back(std::make_unique<RowTask>(request, 0, Row({1, 2}), RowTask::Admission{}));
    batch.queue_durations.assign(1, Clock::duration{});
    batch.padded_sequence_length = 16;
    batch.padded_batch_size = 1;
    batch.alone = alone;
    ASSERT_TRUE(runner.Run(batch).ok());
  }
  EXPECT_EQ(fake->alone_shapes(), (std::vector<std::pair<int64_t, int64_t>>{{1, 16}}));
  EXPECT_EQ(fake->shapes(), (std::vector<std::pair<int64_t, int64_t>>{{1, 16}}));
}

// Token states (TEI's /embed_all) are fetched only for a batch with a row that asks; that row gets
// its real tokens' states (padding dropped), the other rows of its batch none.
TEST(ModelRunner, FetchesTokenStatesOnlyForABatchThatAsks) {
  auto fake = std::make_shared<testing::BackendControl>();
  fake->signature.num_labels = 1;
  std::vector<bool> asked;
  fake->logits = [&asked](const runtime::TokenBatch& b, runtime::Logits* out) {
    asked.push_back(b.token_states);
    if (!b.token_states) return;
    out->hidden = 2;  // each token's state: its id and its position
    out->token_states.assign(static_cast<size_t>(b.batch * b.seq_len * 2), 0.0f);
    for (int64_t i = 0; i < b.batch * b.seq_len; ++i) {
      out->token_states[i * 2] = static_cast<float>(b.input_ids[i]);
      out->token_states[i * 2 + 1] = static_cast<float>(i % b.seq_len);
    }
  };
  ModelRunner runner(Backend(fake), /*pad_id=*/9, 0, nullptr);
  RowTask::Admission wants;
  wants.token_states = true;
  struct OneRow {
    std::shared_ptr<InferenceRequest> request;
    std::vector<int64_t> ids;
    RowTask::Admission admission;
  };
  auto run = [&](std::vector<OneRow> rows) {
    batching::Batch<RowTask> batch;
    for (OneRow& r : rows) batch.tasks.push_back(std::make_unique<RowTask>(r.request, 0, Row(r.ids), r.admission));
    batch.queue_durations.assign(rows.size(), Clock::duration{});
    batch.padded_sequence_length = 8;
    batch.padded_batch_size = 4;
    return runner.Run(batch);
  };
  ResultOr plain = absl::UnknownError("unset"), all = absl::UnknownError("unset"), beside = absl::UnknownError("unset");
  auto plain_request = std::make_shared<InferenceRequest>(1, 1, [&](ResultOr r) { plain = std::move(r); });
  ASSERT_TRUE(run({{plain_request, {3, 4, 5}, RowTask::Admission{}}}).ok());
  EXPECT_EQ(asked, std::vector<bool>{false});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->token_states.empty());

  auto beside_request = std::make_shared<InferenceRequest>(1, 1, [&](ResultOr r) { beside = std::move(r); });
  auto all_request = std::make_shared<InferenceRequest>(1, 1, [&](ResultOr r) { all = std::move(r); });
  // all_request's row: one real token in a batch padded to 8.
  ASSERT_TRUE(run({{beside_request, {3, 4, 5}, RowTask::Admission{}}, {all_request, {6}, wants}}).ok());
  EXPECT_EQ(asked, (std::vector<bool>{false, true}));
  ASSERT_TRUE(beside.ok()) << beside.status();
  EXPECT_TRUE(beside->token_states.empty());
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->hidden, 2);
  ASSERT_EQ(all->token_states.size(), 1u);
  EXPECT_EQ(all->token_states[0], (std::vector<float>{6, 0}));

  // A row that wants states first, then a longer one: each keeps its own real tokens.
  ResultOr first = absl::UnknownError("unset");
  auto two = std::make_shared<InferenceRequest>(2, 1, [&](ResultOr r) { first = std::move(r); });
  batching::Batch<RowTask> batch;
  batch.tasks.push_back(std::make_unique<RowTask>(two, 0, Row({7}), wants));
  batch.tasks.push_back(std::make_unique<RowTask>(two, 1, Row({1, 2, 3}), wants));
  batch.queue_durations.assign(2, Clock::duration{});
  batch.padded_sequence_length = 4;
  ASSERT_TRUE(runner.Run(batch).ok());
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->token_states.size(), 2u);
  EXPECT_EQ(first->token_states[0], (std::vector<float>{7, 0}));
  EXPECT_EQ(first->token_states[1], (std::vector<float>{1, 0, 2, 1, 3, 2}));
  EXPECT_EQ(first->real_tokens, 4u);
}

// A backend that answers no states to a batch that asks (a bug) fails the batch, as a backend error.
TEST(ModelRunner, MissingTokenStatesFailTheBatch) {
  auto fake = CountingBackends();
  ModelRunner runner(Backend(fake), 0, 0, nullptr);
  auto request = std::make_shared<InferenceRequest>(1, 2, [](ResultOr) {});
  RowTask::Admission wants;
  wants.token_states = true;
  batching::Batch<RowTask> batch;
  batch.tasks.push_back(std::make_unique<RowTask>(request, 0, Row({1}), wants));
  batch.queue_durations.assign(1, Clock::duration{});
  batch.padded_sequence_length = 16;
  EXPECT_EQ(runner.Run(batch).code(), absl::StatusCode::kInternal);
  EXPECT_NE(batch.tasks[0], nullptr);
}

TEST(ModelRunner, BackendErrorLeavesTasksForThePoolToFail) {
  auto fake = CountingBackends();
  fake->fail = true;
  ModelRunner runner(Backend(fake), 0, 0, nullptr);
  auto request = std::make_shared<InferenceRequest>(1, 2, [](ResultOr) {});
  batching::Batch<RowTask> batch;
  batch.tasks.push_back(std::make_unique<RowTask>(request, 0, Row({1}), RowTask::Admission{}));
  batch.queue_durations.assign(1, Clock::duration{});
  batch.padded_sequence_length = 16;
  batch.padded_batch_size = 1;
  EXPECT_EQ(runner.Run(batch).code(), absl::StatusCode::kInternal);
  EXPECT_NE(batch.tasks[0], nullptr);
}

// Engine errors never reach clients: the runner answers a generic INTERNAL (500, "backend") naming
// the model, even when the engine said INVALID_ARGUMENT (which would be a 400).
TEST(ModelRunner, BackendErrorBecomesAGenericInternalErrorWithoutTheEngineText) {
  auto fake = CountingBackends();
  fake->fail = true;
  fake->failure = absl::InvalidArgumentError("indices element out of data bounds, idx=2");
  ModelRunner runner(Backend(fake), 0, 0, nullptr, "ranker", 3);
  auto request = std::make_shared<InferenceRequest>(1, 2, [](ResultOr) {});
  batching::Batch<RowTask> batch;
  batch.tasks.push_back(std::make_unique<RowTask>(request, 0, Row({1}), RowTask::Admission{}));
  batch.queue_durations.assign(1, Clock::duration{});
  batch.padded_sequence_length = 16;
  batch.padded_batch_size = 1;
  for (int i = 0; i < ModelRunner::kMaxErrorLogsPerSecond + 2; ++i) {  // past the log rate limit too
    absl::Status s = runner.Run(batch);
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
    EXPECT_EQ(s.message(), "inference failed for model ranker version 3");
    EXPECT_EQ(KindOf(s), ErrorKind::kBackend);
  }
}

}  // namespace
}  // namespace tide::serving

namespace tide::serving {
namespace {

// The whole path: requests' rows batched together, a backend that rejects the batch over one
// request's bad row; only that request fails, the others get their logits.
TEST(ModelRunner, PoolIsolatesTheRequestWhoseRowFailsTheBatch) {
  batching::BatcherOptions o;
  o.max_batch_size = 16;
  FakeClock clock;
  auto batcher = batching::Batcher<RowTask>::Create({.batching = o, .clock = &clock, .on_batch = nullptr});
  ASSERT_TRUE(batcher.ok());
  constexpr int kRequests = 5;
  std::vector<ResultOr> got(kRequests, absl::UnknownError("unset"));
  for (int r = 0; r < kRequests; ++r) {
    auto request = std::make_shared<InferenceRequest>(2, 2, [&got, r](ResultOr res) { got[r] = std::move(res); });
    for (size_t row = 0; row < 2; ++row) {
      // Requests 1 and 3 carry the poisoned id 99 in their second row.
      std::vector<int64_t> ids = {int64_t{10} * r + static_cast<int64_t>(row) + 1};
      if ((r == 1 || r == 3) && row == 1) ids.push_back(99);
      auto task = std::make_unique<RowTask>(request, row, Row(ids), RowTask::Admission{});
      ASSERT_TRUE((*batcher)->Submit(task).ok());
    }
  }
  auto fake = CountingBackends();
  fake->poison_token = 99;
  auto pool = batching::InstancePool<RowTask>::Create(
      {.instance_count = 1}, batcher->get(),
      [fake](int instance) -> absl::StatusOr<std::unique_ptr<batching::BatchRunner<RowTask>>> {
        return std::make_unique<ModelRunner>(Backend(fake), 0, instance, nullptr, "m", 1);
      });
  ASSERT_TRUE(pool.ok()) << pool.status();
  (*pool)->Stop();
  for (int r = 0; r < kRequests; ++r) {
    if (r == 1 || r == 3) {
      EXPECT_EQ(got[r].status().code(), absl::StatusCode::kInternal) << "request " << r;
      EXPECT_EQ(got[r].status().message(), "inference failed for model m version 1");
    } else {
      ASSERT_TRUE(got[r].ok()) << "request " << r << ": " << got[r].status();
      // CountingBackends: [attended tokens, sum of ids (pads are 0)] per row.
      EXPECT_EQ(got[r]->logits, (std::vector<float>{1, 10.0f * r + 1, 1, 10.0f * r + 2})) << "request " << r;
    }
  }
  const batching::InstanceStats stats = (*pool)->Stats()[0];
  EXPECT_EQ(stats.batches, 1u);
  EXPECT_EQ(stats.failed_batches, 1u);
  EXPECT_GT(stats.isolation_runs, 0u);
  EXPECT_EQ((*batcher)->Stats().dropped_by(batching::DropReason::kRunnerError), 4u);
}

}  // namespace
}  // namespace tide::serving
