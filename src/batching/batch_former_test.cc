#include "batching/batch_former.h"

#include "common/error.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "batching/test_task.h"

namespace tide::batching {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;
using std::chrono::microseconds;
using testing::FakeTask;
using testing::Ids;
using testing::Journal;
using Former = BatchFormer<FakeTask>;

const Clock::time_point kT0 = Clock::time_point{} + std::chrono::hours(1);

class BatchFormerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Former> Make(const BatcherOptions& options) {
    auto former = Former::Create(options);
    EXPECT_TRUE(former.ok()) << former.status();
    return former.ok() ? *std::move(former) : nullptr;
  }
  std::unique_ptr<FakeTask> Task(int id, size_t len) { return std::make_unique<FakeTask>(&journal_, id, len); }
  void Add(Former& f, std::unique_ptr<FakeTask> task, Clock::time_point now) {
    ASSERT_TRUE(f.Enqueue(task, now).ok());
    ASSERT_EQ(task, nullptr);
  }
  void Add(Former& f, int id, size_t len, Clock::time_point now) { Add(f, Task(id, len), now); }
  // Form and complete the drops, as Batcher does.
  Former::Result Form(Former& f, Clock::time_point now, bool flush = false) {
    Former::Result r = f.Form(now, flush);
    dropped_ += r.dropped.size();
    Former::CompleteDropped(r.dropped);
    return r;
  }

  Journal journal_;
  size_t dropped_ = 0;
};

TEST_F(BatchFormerTest, NothingIsReleasedBeforeTheDelayAndTheBatchLeavesExactlyAtTheWakeUp) {
  BatcherOptions o;
  o.max_batch_size = 8;
  o.max_queue_delay = microseconds(1000);
  auto f = Make(o);
  Add(*f, 1, 10, kT0);
  Add(*f, 2, 10, kT0 + microseconds(100));
  Add(*f, 3, 10, kT0 + microseconds(200));

  Former::Result r = Form(*f, kT0 + microseconds(300));
  EXPECT_FALSE(r.batch.has_value());
  EXPECT_EQ(r.wake_at, kT0 + microseconds(1000));
  r = Form(*f, kT0 + microseconds(1000) - std::chrono::nanoseconds(1));
  EXPECT_FALSE(r.batch.has_value());

  r = Form(*f, kT0 + microseconds(1000));
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), ElementsAre(1, 2, 3));
  EXPECT_THAT(r.batch->queue_durations, ElementsAre(microseconds(1000), microseconds(900), microseconds(800)));
  EXPECT_EQ(r.batch->formation_time, kT0 + microseconds(1000));
  EXPECT_TRUE(f->empty());
  EXPECT_EQ(Form(*f, kT0 + microseconds(2000)).wake_at, Clock::time_point::max());
}

TEST_F(BatchFormerTest, ZeroDelayReleasesAtOnce) {
  BatcherOptions o;
  o.max_batch_size = 8;
  auto f = Make(o);
  Add(*f, 1, 10, kT0);
  Former::Result r = Form(*f, kT0);
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), ElementsAre(1));
  EXPECT_EQ(r.batch->queue_durations[0], Clock::duration::zero());
}

TEST_F(BatchFormerTest, MaxBatchSizeReleasesBeforeTheDelay) {
  BatcherOptions o;
  o.max_batch_size = 4;
  o.max_queue_delay = microseconds(1'000'000);
  auto f = Make(o);
  for (int i = 1; i <= 5; ++i) Add(*f, i, 10, kT0);
  Former::Result r = Form(*f, kT0);
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), ElementsAre(1, 2, 3, 4));
  r = Form(*f, kT0);
  EXPECT_FALSE(r.batch.has_value());
  EXPECT_EQ(r.wake_at, kT0 + microseconds(1'000'000));
}

TEST_F(BatchFormerTest, PreferredBatchSizes) {
  BatcherOptions o;
  o.max_batch_size = 8;
  o.preferred_batch_sizes = {2, 4};
  o.max_queue_delay = microseconds(1000);
  auto f = Make(o);
  for (int i = 1; i <= 3; ++i) Add(*f, i, 10, kT0);
  EXPECT_FALSE(Form(*f, kT0).batch.has_value()) << "3 is below the largest preferred size";
  Add(*f, 4, 10, kT0 + microseconds(10));
  Add(*f, 5, 10, kT0 + microseconds(10));
  Former::Result r = Form(*f, kT0 + microseconds(10));
  ASSERT_TRUE(r.batch.has_value()) << "the largest preferred size is released at once";
  EXPECT_THAT(Ids(*r.batch), ElementsAre(1, 2, 3, 4));

  // On delay expiry, the largest preferred size <= what is queued: 3 queued -> 2, then 1.
  Add(*f, 6, 10, kT0 + microseconds(20));
  Add(*f, 7, 10, kT0 + microseconds(20));
  r = Form(*f, kT0 + microseconds(500));
  EXPECT_FALSE(r.batch.has_value());
  EXPECT_EQ(r.wake_at, kT0 + microseconds(1010));
  r = Form(*f, kT0 + microseconds(1010));
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), ElementsAre(5, 6));
  r = Form(*f, kT0 + microseconds(1010));
  EXPECT_FALSE(r.batch.has_value()) << "task 7 has waited only 990us";
  r = Form(*f, kT0 + microseconds(1020));
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), ElementsAre(7));
}

TEST_F(BatchFormerTest, TokenBudgetUsesBucketedPaddedCostAndReleasesWhenReached) {
  BatcherOptions o;
  o.max_batch_size = 32;
  o.max_batch_tokens = 256;
  o.max_queue_delay = microseconds(1'000'000);
  auto f = Make(o);
  Add(*f, 1, 100, kT0);  // bucket 128
  EXPECT_FALSE(Form(*f, kT0).batch.has_value()) << "128 x 2 still fits, wait for more";
  Add(*f, 2, 90, kT0);
  Add(*f, 3, 70, kT0);
  Former::Result r = Form(*f, kT0);
  ASSERT_TRUE(r.batch.has_value()) << "128 x 3 = 384 > 256: the budget is reached";
  EXPECT_THAT(Ids(*r.batch), ElementsAre(1, 2));
  EXPECT_EQ(r.batch->padded_sequence_length, 128u);
  EXPECT_EQ(r.batch->padded_batch_size, 2u);
  EXPECT_EQ(r.batch->real_tokens, 190u);
  EXPECT_EQ(r.batch->padded_tokens, 256u);
  EXPECT_EQ(f->stats().queued_tasks, 1u);
  EXPECT_EQ(f->stats().queued_tokens, 70u);
}

TEST_F(BatchFormerTest, ShortTasksStillFillABatchWhoseBudgetALongOneWouldBreak) {
  BatcherOptions o;
  o.max_batch_tokens = 512;
  o.max_queue_delay = microseconds(1000);
  auto f = Make(o);
  Add(*f, 1, 10, kT0);   // 16
  Add(*f, 2, 300, kT0);  // 384: 384 x 2 > 512, skipped
  Add(*f, 3, 12, kT0);   // 16
  Former::Result r = Form(*f, kT0 + microseconds(1000));
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), ElementsAre(1, 3));
  r = Form(*f, kT0 + microseconds(1000));
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), ElementsAre(2));
}

TEST_F(BatchFormerTest, RowsBeyondThePaddingRatioWaitForABatchOfTheirOwn) {
  BatcherOptions o;  // buckets 16, 32, 64, 128, 192, 256, 384, 512
  o.max_queue_delay = microseconds(0);
  o.max_padding_ratio = 1.5;
  auto f = Make(o);
  Add(*f, 1, 100, kT0);  // 128
  Add(*f, 2, 500, kT0);  // 512 > 1.5 x 128: not padded together with 1
  Add(*f, 3, 110, kT0);  // 128
  Add(*f, 4, 170, kT0);  // 192 = 1.5 x 128: joins
  Add(*f, 5, 480, kT0);  // 512
  Add(*f, 6, 330, kT0);  // 384 > 1.5 x 128, but 512 <= 1.5 x 384 in the next batch
  Former::Result r = Form(*f, kT0);
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), UnorderedElementsAre(1, 3, 4));
  EXPECT_EQ(r.batch->padded_sequence_length, 192u);
  r = Form(*f, kT0);
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), UnorderedElementsAre(2, 5, 6));
  EXPECT_EQ(r.batch->padded_sequence_length, 512u);
  EXPECT_FALSE(Form(*f, kT0).batch.has_value());
}

TEST_F(BatchFormerTest, SmallAbsolutePaddingIsAllowedBeyondTheRatioAndZeroRatioMeansNoLimit) {
  for (double ratio : {1.5, 0.0}) {
    BatcherOptions o;
    o.max_queue_delay = microseconds(0);
    o.max_padding_ratio = ratio;
    auto f = Make(o);
    Add(*f, 1, 10, kT0);   // 16
    Add(*f, 2, 60, kT0);   // 64: 4 x 16 but only 48 pad tokens: joins
    Add(*f, 3, 500, kT0);  // 512: joins only without a ratio
    Former::Result r = Form(*f, kT0);
    ASSERT_TRUE(r.batch.has_value());
    if (ratio > 0) {
      EXPECT_THAT(Ids(*r.batch), UnorderedElementsAre(1, 2));
    } else {
      EXPECT_THAT(Ids(*r.batch), UnorderedElementsAre(1, 2, 3));
    }
  }
  BatcherOptions bad;
  bad.max_padding_ratio = 0.5;
  EXPECT_EQ(ValidateBatcherOptions(bad).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(BatchFormerTest, TaskLargerThanTheBudgetRunsAlone) {
  BatcherOptions o;
  o.max_batch_tokens = 100;
  o.max_queue_delay = microseconds(1'000'000);
  auto f = Make(o);
  Add(*f, 1, 200, kT0);  // bucket 256 > 100
  Add(*f, 2, 5, kT0);
  Former::Result r = Form(*f, kT0);
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), ElementsAre(1));
  EXPECT_EQ(r.batch->padded_tokens, 208u) << "no row can join it: padded to 16, not to its bucket (256)";
}

TEST_F(BatchFormerTest, SaturationTokensCapABatchBelowTheBudgetAndReleaseItAtOnce) {
  BatcherOptions o;
  o.max_batch_size = 32;
  o.max_batch_tokens = 16384;
  o.saturation_tokens = 1000;
  o.sequence_buckets = {128, 256, 320, 512};
  o.max_queue_delay = microseconds(1'000'000);
  EXPECT_EQ(o.batch_token_cap(), 1000u);
  auto f = Make(o);
  for (int id = 1; id <= 5; ++id) Add(*f, id, 300, kT0);  // bucket 320 each
  // 3 x 320 = 960 fits, a fourth row would make 1280 > 1000: full, released with no delay.
  Former::Result r = Form(*f, kT0);
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), ElementsAre(1, 2, 3));
  EXPECT_EQ(r.batch->padded_tokens, 960u);
  // The remaining two (640) could still grow: they wait for the delay as before.
  EXPECT_FALSE(Form(*f, kT0).batch.has_value());
  r = Form(*f, kT0 + microseconds(1'000'000));
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), ElementsAre(4, 5));
}

// A 4096-token budget over buckets 128..1024, capped at `saturation` tokens.
BatcherOptions SaturatedOptions(size_t saturation, microseconds delay) {
  BatcherOptions o;
  o.max_batch_tokens = 4096;
  o.sequence_buckets = {128, 256, 512, 1024};
  o.saturation_tokens = saturation;
  o.max_queue_delay = delay;
  return o;
}

TEST_F(BatchFormerTest, ARowLongerThanTheSaturationRunsAloneAndZeroMeansNoCap) {
  BatcherOptions o = SaturatedOptions(400, microseconds(1'000'000));
  auto f = Make(o);
  Add(*f, 1, 500, kT0);  // bucket 512 > 400
  Add(*f, 2, 490, kT0);
  Former::Result r = Form(*f, kT0);
  ASSERT_TRUE(r.batch.has_value()) << "one row already past the cap: the batch is full";
  EXPECT_THAT(Ids(*r.batch), ElementsAre(1));
  r = Form(*f, kT0);
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), ElementsAre(2));

  o.saturation_tokens = 0;  // none: max_batch_tokens alone
  EXPECT_EQ(o.batch_token_cap(), 4096u);
  auto g = Make(o);
  Add(*g, 3, 500, kT0);
  Add(*g, 4, 490, kT0);
  r = Form(*g, kT0 + microseconds(1'000'000));
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), ElementsAre(3, 4));
}

TEST_F(BatchFormerTest, ARowNoOtherCanJoinIsPaddedToSixteenNotToItsBucket) {
  auto f = Make(SaturatedOptions(300, microseconds(0)));
  Add(*f, 1, 300, kT0);  // bucket 512: 2 x 512 > 300, alone for good
  Former::Result r = Form(*f, kT0);
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_EQ(r.batch->padded_sequence_length, 304u);
  EXPECT_EQ(r.batch->padded_tokens, 304u);
  EXPECT_EQ(r.batch->real_tokens, 300u);
  Add(*f, 2, 5, kT0);  // bucket 128: 2 x 128 <= 300, a second row could join: its bucket stays
  r = Form(*f, kT0);
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_EQ(r.batch->padded_sequence_length, 128u);
  Add(*f, 3, 512, kT0);  // exactly its bucket
  r = Form(*f, kT0);
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_EQ(r.batch->padded_sequence_length, 512u);
}

// batch_padding "longest": the rows still group by bucket (the same batches form), but each batch
// is padded to its longest row rounded up to 16, never past that row's bucket.
TEST_F(BatchFormerTest, PadToLongestRowPadsEveryBatchToItsLongestRowAlignedNotToTheBucket) {
  for (const bool longest : {false, true}) {
    SCOPED_TRACE(longest);
    BatcherOptions o;
    o.allowed_batch_sizes = {1, 2, 4, 8, 16, 32};
    o.pad_to_longest_row = longest;
    auto f = Make(o);
    Add(*f, 1, 130, kT0);  // bucket 192
    Add(*f, 2, 140, kT0);
    Add(*f, 3, 150, kT0);
    Former::Result r = Form(*f, kT0);
    ASSERT_TRUE(r.batch.has_value());
    EXPECT_THAT(Ids(*r.batch), ElementsAre(1, 2, 3));
    EXPECT_EQ(r.batch->padded_batch_size, 4u);
    EXPECT_EQ(r.batch->padded_sequence_length, longest ? 160u : 192u);
    EXPECT_EQ(r.batch->padded_tokens, longest ? 640u : 768u);
    EXPECT_EQ(r.batch->real_tokens, 420u);
    Add(*f, 4, 190, kT0);  // 192 rounded up is 192: never past the bucket
    r = Form(*f, kT0);
    ASSERT_TRUE(r.batch.has_value());
    EXPECT_EQ(r.batch->padded_sequence_length, 192u);
    Add(*f, 5, 3, kT0);  // at least one alignment step
    r = Form(*f, kT0);
    ASSERT_TRUE(r.batch.has_value());
    EXPECT_EQ(r.batch->padded_sequence_length, 16u);
  }
}

TEST_F(BatchFormerTest, BucketRoundingAndAllowedBatchSizes) {
  BatcherOptions o;
  o.allowed_batch_sizes = {1, 2, 4, 8, 16, 32};
  ShapeBuckets shapes(o);
  EXPECT_EQ(shapes.SequenceBucketLength(shapes.SequenceBucketIndex(1)), 16u);
  EXPECT_EQ(shapes.SequenceBucketLength(shapes.SequenceBucketIndex(16)), 16u);
  EXPECT_EQ(shapes.SequenceBucketLength(shapes.SequenceBucketIndex(17)), 32u);
  EXPECT_EQ(shapes.SequenceBucketLength(shapes.SequenceBucketIndex(129)), 192u);
  EXPECT_EQ(shapes.SequenceBucketLength(shapes.SequenceBucketIndex(512)), 512u);
  EXPECT_EQ(shapes.SequenceBucketIndex(513), ShapeBuckets::kNoBucket);
  EXPECT_EQ(shapes.PaddedBatchSize(3), 4u);
  EXPECT_EQ(shapes.PaddedBatchSize(5), 8u);
  EXPECT_EQ(shapes.PaddedBatchSize(8), 8u);

  auto f = Make(o);
  Add(*f, 1, 10, kT0);
  Add(*f, 2, 20, kT0);
  Add(*f, 3, 30, kT0);
  Former::Result r = Form(*f, kT0);
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_EQ(r.batch->size(), 3u);
  EXPECT_EQ(r.batch->padded_sequence_length, 32u);
  EXPECT_EQ(r.batch->padded_batch_size, 4u);
  EXPECT_EQ(r.batch->padded_tokens, 128u);
  EXPECT_DOUBLE_EQ(r.batch->padding_ratio(), 1.0 - 60.0 / 128.0);

  std::unique_ptr<FakeTask> too_long = Task(9, 513);
  absl::Status s = f->Enqueue(too_long, kT0);
  EXPECT_EQ(KindOf(s), ErrorKind::kInvalidInput);  // a limit exceeded: 422
  EXPECT_NE(too_long, nullptr);
  EXPECT_EQ(f->stats().rejected_invalid, 1u);
}

TEST_F(BatchFormerTest, AllowedBatchSizePaddingCountsAgainstTheTokenBudget) {
  BatcherOptions o;
  o.allowed_batch_sizes = {1, 2, 4, 8, 16, 32};
  o.max_batch_tokens = 16 * 3;  // 3 rows of 16 fit, but 3 rows pad to 4
  auto f = Make(o);
  for (int i = 1; i <= 3; ++i) Add(*f, i, 10, kT0);
  Former::Result r = Form(*f, kT0);
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_EQ(r.batch->size(), 2u);
  EXPECT_LE(r.batch->padded_tokens, o.max_batch_tokens);
}

TEST_F(BatchFormerTest, HigherPriorityGoesFirstEvenIfYounger) {
  BatcherOptions o;
  o.max_batch_size = 1;
  o.priority_levels = 3;
  o.default_priority_level = 2;
  auto f = Make(o);
  auto low = Task(1, 10);
  low->set_priority(3);
  Add(*f, std::move(low), kT0);
  Add(*f, 2, 10, kT0 + microseconds(1));  // priority 0 -> default level 2
  auto out_of_range = Task(3, 10);
  out_of_range->set_priority(7);  // -> default level 2
  Add(*f, std::move(out_of_range), kT0 + microseconds(2));
  auto high = Task(4, 10);
  high->set_priority(1);
  Add(*f, std::move(high), kT0 + microseconds(3));

  std::vector<int> order;
  for (int i = 0; i < 4; ++i) {
    Former::Result r = Form(*f, kT0 + microseconds(10));
    ASSERT_TRUE(r.batch.has_value());
    order.push_back(r.batch->tasks[0]->id());
  }
  EXPECT_THAT(order, ElementsAre(4, 2, 3, 1));
}

TEST_F(BatchFormerTest, LowerPriorityFillsRoomLeftByHigherPriority) {
  BatcherOptions o;
  o.max_batch_size = 4;
  o.priority_levels = 2;
  o.default_priority_level = 2;
  auto f = Make(o);
  Add(*f, 1, 10, kT0);  // level 2
  auto high = Task(2, 10);
  high->set_priority(1);
  Add(*f, std::move(high), kT0 + microseconds(1));
  Former::Result r = Form(*f, kT0 + microseconds(1));
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), ElementsAre(2, 1));
}

TEST_F(BatchFormerTest, QueueTimeoutRejectDropsAndIsCounted) {
  BatcherOptions o;
  o.max_queue_delay = microseconds(1'000'000);
  o.default_queue_policy.default_timeout = microseconds(500);
  o.default_queue_policy.timeout_action = TimeoutAction::kReject;
  auto f = Make(o);
  Add(*f, 1, 10, kT0);
  Former::Result r = Form(*f, kT0 + microseconds(100));
  EXPECT_FALSE(r.batch.has_value());
  EXPECT_EQ(r.wake_at, kT0 + microseconds(500)) << "the queue timeout is the next event";
  r = Form(*f, kT0 + microseconds(500));
  EXPECT_FALSE(r.batch.has_value());
  EXPECT_EQ(journal_.completions(1), 1);
  EXPECT_EQ(journal_.reason(1), DropReason::kQueueTimeout);
  EXPECT_EQ(journal_.status(1).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(f->stats().dropped_by(DropReason::kQueueTimeout), 1u);
  EXPECT_EQ(f->stats().queued_tasks, 0u);
}

TEST_F(BatchFormerTest, QueueTimeoutDelayMovesTheTaskBehindItsLevel) {
  BatcherOptions o;
  o.max_batch_size = 1;
  o.default_queue_policy.default_timeout = microseconds(500);
  o.default_queue_policy.timeout_action = TimeoutAction::kDelay;
  auto f = Make(o);
  Add(*f, 1, 10, kT0);
  Add(*f, 2, 10, kT0 + microseconds(400));
  Former::Result r = Form(*f, kT0 + microseconds(500));
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), ElementsAre(2)) << "task 1 timed out and waits behind task 2";
  r = Form(*f, kT0 + microseconds(5000));
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), ElementsAre(1));
  EXPECT_EQ(journal_.completions(1), 0) << "DELAY never drops";
  EXPECT_EQ(f->stats().delayed, 1u);
}

struct TimeoutCase {
  bool allow_override;
  int64_t default_us;  // 0 = none
  int64_t own_us;      // 0 = none
  int64_t expect_drop_us;
};

class PerRequestTimeoutTest : public BatchFormerTest, public ::testing::WithParamInterface<TimeoutCase> {};

TEST_P(PerRequestTimeoutTest, DropsExactlyAtTheEffectiveTimeout) {
  const TimeoutCase& c = GetParam();
  BatcherOptions o;
  o.max_queue_delay = microseconds(1'000'000);
  o.default_queue_policy.default_timeout = microseconds(c.default_us);
  o.default_queue_policy.allow_timeout_override = c.allow_override;
  auto f = Make(o);
  auto t = Task(1, 10);
  t->set_queue_timeout(microseconds(c.own_us));
  Add(*f, std::move(t), kT0);
  Form(*f, kT0 + microseconds(c.expect_drop_us) - std::chrono::nanoseconds(1));
  EXPECT_EQ(journal_.completions(1), 0);
  Form(*f, kT0 + microseconds(c.expect_drop_us));
  EXPECT_EQ(journal_.reason(1), DropReason::kQueueTimeout);
}

INSTANTIATE_TEST_SUITE_P(
    Timeouts, PerRequestTimeoutTest,
    ::testing::Values(TimeoutCase{false, 1000, 100, 1000},  // override not allowed: own timeout ignored
                      TimeoutCase{true, 1000, 100, 100},    // allowed: may shorten
                      TimeoutCase{true, 1000, 5000, 1000},  // allowed, but may not lengthen
                      TimeoutCase{true, 0, 300, 300},       // no default: the request's own applies
                      TimeoutCase{true, 700, 0, 700}));     // no own timeout: the default

TEST_F(BatchFormerTest, DeadlineAndCancellationDropsHappenBeforeFormingAndAreCounted) {
  BatcherOptions o;
  auto f = Make(o);
  auto late = Task(1, 10);
  late->set_deadline(kT0 + microseconds(50));
  Add(*f, std::move(late), kT0);
  auto flag = std::make_shared<std::atomic<bool>>(false);
  auto gone = Task(2, 10);
  gone->set_cancel_flag(flag);
  Add(*f, std::move(gone), kT0);
  Add(*f, 3, 10, kT0);
  flag->store(true);

  Former::Result r = Form(*f, kT0 + microseconds(100));
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), ElementsAre(3));
  EXPECT_EQ(journal_.reason(1), DropReason::kDeadlineExceeded);
  EXPECT_EQ(journal_.status(1).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(journal_.reason(2), DropReason::kCancelled);
  EXPECT_EQ(journal_.status(2).code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(f->stats().dropped_by(DropReason::kDeadlineExceeded), 1u);
  EXPECT_EQ(f->stats().dropped_by(DropReason::kCancelled), 1u);
  EXPECT_EQ(f->stats().queued_tasks, 0u);
  EXPECT_EQ(f->stats().queued_tokens, 0u);
}

TEST_F(BatchFormerTest, DeadlineIsAWakeUp) {
  BatcherOptions o;
  o.max_queue_delay = microseconds(1000);
  auto f = Make(o);
  auto t = Task(1, 10);
  t->set_deadline(kT0 + microseconds(300));
  Add(*f, std::move(t), kT0);
  Former::Result r = Form(*f, kT0);
  EXPECT_FALSE(r.batch.has_value());
  EXPECT_EQ(r.wake_at, kT0 + microseconds(300));
}

TEST_F(BatchFormerTest, FullQueueRejectsAndLeavesTheTaskWithTheCaller) {
  BatcherOptions o;
  o.priority_levels = 2;
  o.default_priority_level = 2;
  o.default_queue_policy.max_queue_size = 2;
  o.priority_queue_policy[1].max_queue_size = 1;
  auto f = Make(o);
  Add(*f, 1, 10, kT0);
  Add(*f, 2, 10, kT0);
  auto third = Task(3, 10);
  absl::Status s = f->Enqueue(third, kT0);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(third->id(), 3);

  auto high = Task(4, 10);
  high->set_priority(1);
  Add(*f, std::move(high), kT0);
  auto high2 = Task(5, 10);
  high2->set_priority(1);
  EXPECT_EQ(f->Enqueue(high2, kT0).code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(high2, nullptr);
  EXPECT_EQ(f->stats().rejected_queue_full, 2u);
  EXPECT_EQ(f->stats().submitted, 3u);
  EXPECT_EQ(journal_.completions(3), 0);
}

TEST_F(BatchFormerTest, DropAllDropsEverythingOnce) {
  BatcherOptions o;
  o.max_queue_delay = microseconds(1000);
  auto f = Make(o);
  for (int i = 1; i <= 3; ++i) Add(*f, i, 10 * i, kT0);
  auto dropped = f->DropAll(DropReason::kShutdown);
  Former::CompleteDropped(dropped);
  for (int i = 1; i <= 3; ++i) EXPECT_EQ(journal_.reason(i), DropReason::kShutdown);
  EXPECT_TRUE(f->empty());
  EXPECT_EQ(f->stats().dropped_by(DropReason::kShutdown), 3u);
  EXPECT_EQ(f->stats().queued_tokens, 0u);
}

TEST_F(BatchFormerTest, FlushIgnoresTheDelay) {
  BatcherOptions o;
  o.max_queue_delay = microseconds(1'000'000);
  auto f = Make(o);
  Add(*f, 1, 10, kT0);
  EXPECT_FALSE(Form(*f, kT0).batch.has_value());
  EXPECT_TRUE(Form(*f, kT0, /*flush=*/true).batch.has_value());
}

// A long sequence among a steady stream of short ones: it may be passed over while younger short
// tasks share batches, but once it is the oldest task of its level it anchors the next batch.
TEST_F(BatchFormerTest, LongSequenceIsNotStarvedByAStreamOfShortOnes) {
  BatcherOptions o;
  o.max_batch_size = 8;
  o.max_batch_tokens = 512;  // the long task (512) can never share a batch
  auto f = Make(o);
  int next_id = 100;
  Clock::time_point now = kT0;
  for (int i = 0; i < 5; ++i) Add(*f, next_id++, 10, now);
  now += microseconds(1);
  Add(*f, 1, 500, now);
  std::map<int, Clock::time_point> arrival;
  bool released = false;
  for (int round = 0; round < 20 && !released; ++round) {
    now += microseconds(1);
    for (int i = 0; i < 10; ++i) {  // more short work arrives than one batch takes
      arrival[next_id] = now;
      Add(*f, next_id++, 10, now);
    }
    Former::Result r = Form(*f, now);
    ASSERT_TRUE(r.batch.has_value());
    for (const auto& t : r.batch->tasks) released |= t->id() == 1;
  }
  EXPECT_TRUE(released) << "the long task starved";
  // It ran no later than the first batch formed once every task older than it had left.
  EXPECT_LE(f->stats().batches_formed, 2u);
}

TEST_F(BatchFormerTest, EveryBatchIsAnchoredByTheOldestTaskOfItsLevel) {
  BatcherOptions o;
  o.max_batch_size = 4;
  o.max_batch_tokens = 1024;
  auto f = Make(o);
  uint32_t rng = 12345;
  auto next = [&rng] { rng = rng * 1664525u + 1013904223u; return rng >> 8; };
  const size_t lens[] = {10, 60, 120, 250, 500};
  std::map<int, Clock::time_point> arrival;
  Clock::time_point now = kT0;
  int id = 0;
  for (int round = 0; round < 50; ++round) {
    now += microseconds(1);
    for (int k = 0; k < 3; ++k) {
      arrival[id] = now;
      Add(*f, id++, lens[next() % 5], now);
    }
    Former::Result r = Form(*f, now);
    ASSERT_TRUE(r.batch.has_value());
    const Clock::time_point anchor = arrival[r.batch->tasks[0]->id()];
    for (const auto& t : r.batch->tasks) arrival.erase(t->id());
    for (const auto& [left_id, t] : arrival) EXPECT_GE(t, anchor) << "task " << left_id << " is older than the anchor";
  }
}

TEST_F(BatchFormerTest, LengthGroupingPadsLessThanFifoOnAMixedStream) {
  BatcherOptions o;
  o.max_batch_size = 8;
  o.max_batch_tokens = 1 << 20;
  o.max_queue_delay = microseconds(1000);
  auto f = Make(o);
  ShapeBuckets shapes(o);
  uint32_t rng = 42;
  auto next = [&rng] { rng = rng * 1664525u + 1013904223u; return rng >> 8; };
  const size_t lens[] = {12, 40, 100, 300, 500};
  std::vector<size_t> stream;
  for (int i = 0; i < 64; ++i) stream.push_back(lens[next() % 5]);
  for (size_t i = 0; i < stream.size(); ++i) Add(*f, static_cast<int>(i), stream[i], kT0);

  size_t fifo_padded = 0;
  for (size_t i = 0; i < stream.size(); i += 8) {
    size_t longest = 0;
    for (size_t j = i; j < i + 8; ++j) longest = std::max(longest, stream[j]);
    fifo_padded += shapes.SequenceBucketLength(shapes.SequenceBucketIndex(longest)) * 8;
  }
  std::set<int> seen;
  size_t grouped_padded = 0;
  while (!f->empty()) {
    Former::Result r = Form(*f, kT0 + microseconds(1000));
    ASSERT_TRUE(r.batch.has_value());
    grouped_padded += r.batch->padded_tokens;
    for (int id : Ids(*r.batch)) EXPECT_TRUE(seen.insert(id).second) << "task " << id << " released twice";
  }
  EXPECT_EQ(seen.size(), stream.size());
  EXPECT_EQ(f->stats().padded_tokens, grouped_padded);
  EXPECT_LT(grouped_padded, fifo_padded);
  EXPECT_LT(grouped_padded * 10, fifo_padded * 8) << "expected at least 20% less padding than FIFO";
}

TEST_F(BatchFormerTest, FifoModeFillsInArrivalOrderAcrossBuckets) {
  BatcherOptions o;
  o.max_batch_size = 3;
  o.max_batch_tokens = 1 << 20;
  o.max_queue_delay = microseconds(1000);
  o.group_by_length = false;
  auto f = Make(o);
  // Arrival order 1..6 with alternating lengths; length grouping would pair 1,3,5 and 2,4,6.
  const size_t lens[] = {10, 300, 12, 310, 14, 320};
  for (int i = 0; i < 6; ++i) Add(*f, i + 1, lens[i], kT0 + microseconds(i));
  Former::Result r = Form(*f, kT0 + microseconds(10));
  ASSERT_TRUE(r.batch.has_value()) << "3 tasks reach max_batch_size";
  EXPECT_THAT(Ids(*r.batch), UnorderedElementsAre(1, 2, 3));
  EXPECT_EQ(r.batch->padded_sequence_length, 384u) << "still padded to the bucket of its longest member";
  r = Form(*f, kT0 + microseconds(10));
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), UnorderedElementsAre(4, 5, 6));

  o.group_by_length = true;
  auto g = Make(o);
  for (int i = 0; i < 6; ++i) Add(*g, i + 11, lens[i], kT0 + microseconds(i));
  r = Form(*g, kT0 + microseconds(10));
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), UnorderedElementsAre(11, 13, 15));
  EXPECT_EQ(r.batch->padded_sequence_length, 16u);
}

TEST_F(BatchFormerTest, FifoModeStopsAtTheFirstTaskThatBreaksTheBudgetAndReleases) {
  BatcherOptions o;
  o.max_batch_tokens = 512;
  o.max_queue_delay = microseconds(1'000'000);
  o.group_by_length = false;
  auto f = Make(o);
  Add(*f, 1, 10, kT0);                     // 16
  Add(*f, 2, 300, kT0 + microseconds(1));  // 384: 384 x 2 > 512
  Add(*f, 3, 12, kT0 + microseconds(2));   // 16: may not overtake task 2
  Former::Result r = Form(*f, kT0 + microseconds(3));
  ASSERT_TRUE(r.batch.has_value()) << "the next task in arrival order does not fit: the batch is full";
  EXPECT_THAT(Ids(*r.batch), ElementsAre(1));
  r = Form(*f, kT0 + microseconds(3));
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), ElementsAre(2)) << "384 + 16-token task 3 would cost 768 > 512";
  r = Form(*f, kT0 + microseconds(3));
  EXPECT_FALSE(r.batch.has_value()) << "task 3 alone waits for its delay";
  r = Form(*f, kT0 + microseconds(1'000'002));
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_THAT(Ids(*r.batch), ElementsAre(3));
}

}  // namespace
}  // namespace tide::batching
