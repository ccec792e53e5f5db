// tide::batching::BatchFormer<Task> — the queue and the pure batching decision, without threads.
//
// Contract:
//  - NOT thread-safe and never blocks: Batcher<Task> wraps it with a mutex and a condition
//    variable. It never reads a clock; every call gets `now`, so tests drive it exhaustively.
//  - Enqueue moves the task in only on OK. Errors leave it with the caller:
//    INVALID_ARGUMENT when seq_len() exceeds the last sequence bucket; UNAVAILABLE when the queue
//    of the task's priority level holds max_queue_size tasks.
//  - Form(now) first sweeps the queue: cancelled tasks, tasks past their deadline and tasks past
//    their queue timeout (REJECT) are removed and returned in Result::dropped, which the caller
//    must complete (CompleteDropped) outside its lock; DELAY tasks move behind their level. Then
//    it either returns a batch or none plus the time at which the answer may change (wake_at:
//    the oldest task's arrival + max_queue_delay, or the earliest deadline or queue timeout).
//    A Submit can also change the answer; callers re-Form after each.
//  - Form is O(queued tasks) (the sweep); fine for queues of up to ~10^4 tasks.
//
// Batch formation. The anchor of a batch is the oldest task of the highest-priority non-empty
// queue, so no task starves within its level. The rest is filled from that level first, taking
// sequence buckets nearest the anchor's first (same bucket, then the next smaller, the next
// larger, ...) and each bucket oldest first, then from lower levels the same way, while the batch
// stays within max_batch_size (or the largest preferred_batch_size), the padded cost
// (bucketed longest length x allowed batch size) stays within max_batch_tokens (or
// saturation_tokens, if smaller: BatcherOptions::batch_token_cap), and the padded length stays
// within max_padding_ratio of the shortest bucket in the batch. An anchor whose own cost exceeds
// that cap runs alone. The batch is released when it is full (size cap
// reached, or one more task of its padded length would exceed the token budget), when the oldest
// queued task has waited max_queue_delay, at once when max_queue_delay is zero, or when flushing
// (shutdown). A batch of one row that no other row could join (twice its bucket exceeds the cap) is
// padded to a multiple of BatcherOptions::kLoneRowAlignment instead of its bucket; with
// pad_to_longest_row every batch is padded to its longest row so aligned. On a delay
// release with preferred sizes, the largest preferred size <= the
// candidate's size is taken. With group_by_length false (first-in-first-out, kept for
// comparison) the rest is filled in arrival order across buckets instead, and the batch is full
// at the first task that would break the token budget.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "batching/batch.h"
#include "batching/batcher_options.h"
#include "batching/shape_buckets.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/status_macros.h"

namespace tide::batching {

template <BatchTask Task>
class BatchFormer {
 public:
  struct Dropped {
    std::unique_ptr<Task> task;
    DropReason reason;
  };
  struct Result {
    std::optional<Batch<Task>> batch;
    // When to Form again if nothing is submitted meanwhile; max() = not before the next Submit.
    Clock::time_point wake_at = Clock::time_point::max();
    std::vector<Dropped> dropped;
  };

  static absl::StatusOr<std::unique_ptr<BatchFormer>> Create(const BatcherOptions& options) {
    TIDE_RETURN_IF_ERROR(ValidateBatcherOptions(options));
    return std::unique_ptr<BatchFormer>(new BatchFormer(options));
  }

  absl::Status Enqueue(std::unique_ptr<Task>& task, Clock::time_point now);
  Result Form(Clock::time_point now, bool flush = false);
  // Removes every queued task (shutdown after the grace period).
  std::vector<Dropped> DropAll(DropReason reason);

  // Calls OnDropped on each dropped task; call without locks held.
  static void CompleteDropped(std::vector<Dropped>& dropped) {
    for (Dropped& d : dropped) d.task->OnDropped(d.reason, DropStatus(d.reason));
    dropped.clear();
  }

  // Counts drops made outside the former (the instance pool's kRunnerError), so that one
  // BatcherStats covers every way a task can fail.
  void CountDropped(DropReason reason, uint64_t n) { stats_.dropped[static_cast<size_t>(reason)] += n; }

  bool empty() const { return stats_.queued_tasks == 0; }
  const BatcherStats& stats() const { return stats_; }
  const BatcherOptions& options() const { return options_; }
  const ShapeBuckets& shape_buckets() const { return buckets_; }

 private:
  // Implementation details follow.
  struct Entry {
    std::unique_ptr<Task> task;
    Clock::time_point arrival{};
    Clock::time_point timeout_at = Clock::time_point::max();
    size_t seq_len = 0;
    uint64_t sequence = 0;  // submission order; breaks arrival ties
    bool OlderThan(const Entry& other) const {
      return arrival != other.arrival ? arrival < other.arrival : sequence < other.sequence;
    }
  };
  // Candidate batch: how many tasks to take from the front of each (lane, bucket) queue.
  struct Plan {
    std::vector<size_t> takes;
    size_t count = 0;
    size_t padded_len = 0;
    size_t shortest_len = 0;  // bucket length of the shortest task in the batch
    size_t anchor = 0;  // flattened (lane, bucket) of the anchor
    bool full = false;
  };

  explicit BatchFormer(const BatcherOptions& options);

  size_t levels() const { return static_cast<size_t>(std::max(options_.priority_levels, 1)); }
  // Lane 2*level is the level's normal queue, 2*level+1 its DELAYed tasks (level 0-based).
  size_t lane_count() const { return 2 * levels(); }
  size_t index(size_t lane, size_t bucket) const { return lane * buckets_.sequence_bucket_count() + bucket; }
  const QueuePolicy& PolicyFor(size_t level) const {
    auto it = options_.priority_queue_policy.find(static_cast<int>(level) + 1);
    return it == options_.priority_queue_policy.end() ? options_.default_queue_policy : it->second;
  }
  size_t LevelOf(const Task& task) const {
    if (options_.priority_levels == 0) return 0;
    int p = task.priority();
    if (p < 1 || p > options_.priority_levels) p = options_.default_priority_level;
    return static_cast<size_t>(p - 1);
  }
  void Forget(const Entry& e, size_t lane) {
    --stats_.queued_tasks;
    stats_.queued_tokens -= e.seq_len;
    --level_sizes_[lane / 2];
  }
  void Sweep(Clock::time_point now, Result* result, Clock::time_point* oldest);
  Plan Build(size_t limit) const;
  // Build's tail when !group_by_length: after the anchor, tasks join in arrival order.
  template <typename Fits>
  void BuildInArrivalOrder(size_t anchor_lane, size_t limit, const Fits& fits, Plan* plan) const;
  Batch<Task> Take(const Plan& plan, Clock::time_point now);

  const BatcherOptions options_;
  const ShapeBuckets buckets_;
  const size_t full_cap_;  // largest preferred size, else max_batch_size
  std::vector<std::vector<size_t>> bucket_order_;  // [anchor bucket] -> buckets, nearest first
  std::vector<std::deque<Entry>> queues_;          // [index(lane, bucket)], oldest first
  std::vector<size_t> level_sizes_;
  uint64_t next_sequence_ = 0;
  BatcherStats stats_;
};

template <BatchTask Task>
BatchFormer<Task>::BatchFormer(const BatcherOptions& options)
    : options_(options),
      buckets_(options),
      full_cap_(options.preferred_batch_sizes.empty()
                    ? options.max_batch_size
                    : *std::max_element(options.preferred_batch_sizes.begin(), options.preferred_batch_sizes.end())),
      queues_(lane_count() * buckets_.sequence_bucket_count()),
      level_sizes_(levels(), 0) {
  const size_t n = buckets_.sequence_bucket_count();
  bucket_order_.resize(n);
  for (size_t a = 0; a < n; ++a) {
    std::vector<size_t>& order = bucket_order_[a];
    for (size_t b = 0; b < n; ++b) order.push_back(b);
    // Nearest first; on a tie the smaller bucket, which does not raise the batch's padded length.
    std::stable_sort(order.begin(), order.end(), [a](size_t x, size_t y) {
      const size_t dx = x > a ? x - a : a - x, dy = y > a ? y - a : a - y;
      return dx != dy ? dx < dy : x < y;
    });
  }
}

template <BatchTask Task>
absl::Status BatchFormer<Task>::Enqueue(std::unique_ptr<Task>& task, Clock::time_point now) {
  if (task == nullptr) return errors::Internal("null task");
  const size_t seq_len = task->seq_len();
  const size_t bucket = buckets_.SequenceBucketIndex(seq_len);
  if (bucket == ShapeBuckets::kNoBucket) {
    ++stats_.rejected_invalid;
    return errors::InvalidInput(absl::StrCat("sequence length ", seq_len, " exceeds the largest bucket (",
                                                   options_.sequence_buckets.back(), ")"));
  }
  const size_t level = LevelOf(*task);
  const QueuePolicy& policy = PolicyFor(level);
  if (policy.max_queue_size > 0 && level_sizes_[level] >= policy.max_queue_size) {
    ++stats_.rejected_queue_full;
    return errors::Unavailable(absl::StrCat("queue is full (max_queue_size ", policy.max_queue_size, ")"));
  }
  Clock::duration timeout = std::chrono::duration_cast<Clock::duration>(policy.default_timeout);
  if constexpr (HasQueueTimeout<Task>) {
    if (policy.allow_timeout_override) {
      const Clock::duration own = task->queue_timeout();
      if (own > Clock::duration::zero() && (timeout == Clock::duration::zero() || own < timeout)) timeout = own;
    }
  }
  Entry e;
  e.arrival = now;
  e.timeout_at = timeout > Clock::duration::zero() ? now + timeout : Clock::time_point::max();
  e.seq_len = seq_len;
  e.sequence = next_sequence_++;
  e.task = std::move(task);
  queues_[index(2 * level, bucket)].push_back(std::move(e));
  ++level_sizes_[level];
  ++stats_.queued_tasks;
  stats_.queued_tokens += seq_len;
  ++stats_.submitted;
  return absl::OkStatus();
}

template <BatchTask Task>
void BatchFormer<Task>::Sweep(Clock::time_point now, Result* result, Clock::time_point* oldest) {
  const size_t nb = buckets_.sequence_bucket_count();
  std::vector<Entry> to_delay;
  for (size_t lane = 0; lane < lane_count(); ++lane) {
    const bool delayed_lane = lane % 2 == 1;
    const QueuePolicy& policy = PolicyFor(lane / 2);
    for (size_t b = 0; b < nb; ++b) {
      std::deque<Entry>& q = queues_[index(lane, b)];
      size_t w = 0;
      for (size_t r = 0; r < q.size(); ++r) {
        Entry& e = q[r];
        std::optional<DropReason> reason;
        if (e.task->cancelled()) {
          reason = DropReason::kCancelled;
        } else if (now >= e.task->deadline()) {
          reason = DropReason::kDeadlineExceeded;
        } else if (!delayed_lane && now >= e.timeout_at) {
          if (policy.timeout_action == TimeoutAction::kReject) {
            reason = DropReason::kQueueTimeout;
          } else {
            to_delay.push_back(std::move(e));
            continue;
          }
        }
        if (reason) {
          Forget(e, lane);
          ++stats_.dropped[static_cast<size_t>(*reason)];
          result->dropped.push_back(Dropped{std::move(e.task), *reason});
          continue;
        }
        result->wake_at = std::min(result->wake_at, e.task->deadline());
        if (!delayed_lane) result->wake_at = std::min(result->wake_at, e.timeout_at);
        *oldest = std::min(*oldest, e.arrival);
        if (w != r) q[w] = std::move(q[r]);
        ++w;
      }
      q.resize(w);
      if (!to_delay.empty()) {
        // The delayed lane is swept next, which applies the deadline checks to these too.
        std::deque<Entry>& dq = queues_[index(lane + 1, b)];
        for (Entry& e : to_delay) {
          e.timeout_at = Clock::time_point::max();
          dq.push_back(std::move(e));
          ++stats_.delayed;
        }
        to_delay.clear();
      }
    }
  }
}

template <BatchTask Task>
typename BatchFormer<Task>::Plan BatchFormer<Task>::Build(size_t limit) const {
  const size_t nb = buckets_.sequence_bucket_count();
  Plan plan;
  plan.takes.assign(queues_.size(), 0);
  size_t anchor_lane = lane_count();
  for (size_t lane = 0; lane < lane_count() && anchor_lane == lane_count(); ++lane) {
    for (size_t b = 0; b < nb; ++b) {
      if (!queues_[index(lane, b)].empty()) {
        anchor_lane = lane;
        break;
      }
    }
  }
  if (anchor_lane == lane_count()) return plan;
  size_t anchor_bucket = nb;
  for (size_t b = 0; b < nb; ++b) {
    const std::deque<Entry>& q = queues_[index(anchor_lane, b)];
    if (q.empty()) continue;
    if (anchor_bucket == nb || q.front().OlderThan(queues_[index(anchor_lane, anchor_bucket)].front())) {
      anchor_bucket = b;
    }
  }
  const size_t max_tokens = options_.batch_token_cap();
  auto fits = [&](size_t len, size_t n) { return buckets_.PaddedTokens(len, n) <= max_tokens; };
  plan.anchor = index(anchor_lane, anchor_bucket);
  plan.takes[plan.anchor] = 1;
  plan.count = 1;
  plan.padded_len = buckets_.SequenceBucketLength(anchor_bucket);
  plan.shortest_len = plan.padded_len;
  if (!options_.group_by_length) {
    BuildInArrivalOrder(anchor_lane, limit, fits, &plan);
    return plan;
  }
  const double ratio = options_.max_padding_ratio;
  for (size_t lane = anchor_lane; lane < lane_count() && plan.count < limit; ++lane) {
    for (size_t b : bucket_order_[anchor_bucket]) {
      if (plan.count >= limit) break;
      const size_t i = index(lane, b);
      const size_t bucket_len = buckets_.SequenceBucketLength(b);
      const size_t len = std::max(plan.padded_len, bucket_len);
      const size_t shortest = std::min(plan.shortest_len, bucket_len);
      const size_t available = queues_[i].size();
      if (ratio > 0 && len > shortest + BatcherOptions::kPaddingSlackTokens &&
          static_cast<double>(len) > ratio * static_cast<double>(shortest)) {
        continue;
      }
      while (plan.count < limit && plan.takes[i] < available && fits(len, plan.count + 1)) {
        ++plan.takes[i];
        ++plan.count;
        plan.padded_len = len;
        plan.shortest_len = shortest;
      }
    }
  }
  plan.full = plan.count >= limit || !fits(plan.padded_len, plan.count + 1);
  return plan;
}

template <BatchTask Task>
template <typename Fits>
void BatchFormer<Task>::BuildInArrivalOrder(size_t anchor_lane, size_t limit, const Fits& fits, Plan* plan) const {
  const size_t nb = buckets_.sequence_bucket_count();
  bool blocked = false;
  for (size_t lane = anchor_lane; lane < lane_count() && plan->count < limit && !blocked; ++lane) {
    while (plan->count < limit) {
      // The oldest task of this lane not yet in the plan, whatever its bucket.
      size_t next = nb;
      for (size_t b = 0; b < nb; ++b) {
        const std::deque<Entry>& q = queues_[index(lane, b)];
        const size_t taken = plan->takes[index(lane, b)];
        if (taken >= q.size()) continue;
        if (next == nb || q[taken].OlderThan(queues_[index(lane, next)][plan->takes[index(lane, next)]])) next = b;
      }
      if (next == nb) break;
      const size_t len = std::max(plan->padded_len, buckets_.SequenceBucketLength(next));
      if (!fits(len, plan->count + 1)) {
        blocked = true;  // first-in-first-out: nothing may overtake the task that does not fit
        break;
      }
      ++plan->takes[index(lane, next)];
      ++plan->count;
      plan->padded_len = len;
    }
  }
  plan->full = blocked || plan->count >= limit || !fits(plan->padded_len, plan->count + 1);
}

template <BatchTask Task>
Batch<Task> BatchFormer<Task>::Take(const Plan& plan, Clock::time_point now) {
  Batch<Task> batch;
  batch.formation_time = now;
  batch.tasks.reserve(plan.count);
  batch.queue_durations.reserve(plan.count);
  const size_t nb = buckets_.sequence_bucket_count();
  size_t longest = 0;
  auto take_from = [&](size_t i) {
    std::deque<Entry>& q = queues_[i];
    for (size_t k = 0; k < plan.takes[i]; ++k) {
      Entry& e = q.front();
      Forget(e, i / nb);
      batch.real_tokens += e.seq_len;
      longest = std::max(longest, e.seq_len);
      batch.queue_durations.push_back(now - e.arrival);
      batch.tasks.push_back(std::move(e.task));
      q.pop_front();
    }
  };
  take_from(plan.anchor);  // the anchor leads the batch
  for (size_t i = 0; i < queues_.size(); ++i) {
    if (i != plan.anchor) take_from(i);
  }
  batch.padded_sequence_length = plan.padded_len;
  batch.padded_batch_size = buckets_.PaddedBatchSize(batch.tasks.size());
  if (options_.pad_to_longest_row ||
      (batch.padded_batch_size == 1 && 2 * plan.padded_len > options_.batch_token_cap())) {
    // A row that can never share a batch (any second row would take the padded cost past the cap)
    // gains nothing from its bucket, whose purpose is a shape rows share: it is padded to a
    // multiple of kLoneRowAlignment only (past 512 a bucket may add up to 1/8 of the row's length).
    // With pad_to_longest_row every batch is: the longest row, aligned.
    const size_t a = BatcherOptions::kLoneRowAlignment;
    batch.padded_sequence_length = std::min(plan.padded_len, std::max<size_t>(a, (longest + a - 1) / a * a));
  }
  batch.padded_tokens = batch.padded_sequence_length * batch.padded_batch_size;
  ++stats_.batches_formed;
  stats_.batched_tasks += batch.tasks.size();
  stats_.real_tokens += batch.real_tokens;
  stats_.padded_tokens += batch.padded_tokens;
  return batch;
}

template <BatchTask Task>
typename BatchFormer<Task>::Result BatchFormer<Task>::Form(Clock::time_point now, bool flush) {
  Result result;
  Clock::time_point oldest = Clock::time_point::max();
  Sweep(now, &result, &oldest);
  if (empty()) return result;
  Plan plan = Build(full_cap_);
  const Clock::duration delay = std::chrono::duration_cast<Clock::duration>(options_.max_queue_delay);
  const bool expired = flush || delay == Clock::duration::zero() || now - oldest >= delay;
  if (!plan.full && !expired) {
    result.wake_at = std::min(result.wake_at, oldest + delay);
    return result;
  }
  if (!plan.full && !options_.preferred_batch_sizes.empty()) {
    size_t best = 0;
    for (size_t p : options_.preferred_batch_sizes) {
      if (p <= plan.count) best = std::max(best, p);
    }
    if (best > 0 && best < plan.count) plan = Build(best);
  }
  result.batch = Take(plan, now);
  return result;
}

template <BatchTask Task>
std::vector<typename BatchFormer<Task>::Dropped> BatchFormer<Task>::DropAll(DropReason reason) {
  std::vector<Dropped> dropped;
  const size_t nb = buckets_.sequence_bucket_count();
  for (size_t i = 0; i < queues_.size(); ++i) {
    for (Entry& e : queues_[i]) {
      Forget(e, i / nb);
      ++stats_.dropped[static_cast<size_t>(reason)];
      dropped.push_back(Dropped{std::move(e.task), reason});
    }
    queues_[i].clear();
  }
  return dropped;
}

}  // namespace tide::batching
