// tide::batching::Batch<Task> — a formed batch, the task requirements (BatchTask) and the reasons
// the batcher drops a task.
//
// Contract:
//  - A Batch owns its tasks. The runner that receives it completes every task (or, on failure,
//    leaves the ones it did not complete in `tasks` for the instance pool to fail).
//  - A task the batcher drops gets exactly one OnDropped(reason, status) call, made without any
//    batcher lock held, so it may complete a promise or even Submit again.
//  - Not thread-safe; a Batch belongs to one thread at a time.
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/clock.h"

namespace tide::batching {

enum class DropReason {
  kDeadlineExceeded = 0,  // the task's own deadline passed while queued (DEADLINE_EXCEEDED)
  kCancelled,             // the client went away (CANCELLED)
  kQueueTimeout,          // queue timeout with timeout_action REJECT (UNAVAILABLE)
  kShutdown,              // the batcher shut down before the task ran (UNAVAILABLE)
  kRunnerError,           // the runner failed the batch (the runner's status)
};
inline constexpr size_t kDropReasonCount = 5;

std::string_view DropReasonName(DropReason reason);
// The status a dropped task is completed with (kRunnerError: INTERNAL; the pool passes the
// runner's own status instead).
absl::Status DropStatus(DropReason reason);

// What the batcher needs from a task.
//  seq_len():   real tokens of the task (pair), before padding.
//  priority():  1 = highest; 0 or out of range = the default level.
//  deadline():  when the client stops waiting; time_point::max() = none.
//  cancelled(): the client went away; polled before a batch forms.
//  OnDropped(): the one completion of a task the batcher (or pool) gives up on.
// Optional: `Clock::duration queue_timeout() const` — the request's own queue timeout (zero =
// none), honoured per QueuePolicy::allow_timeout_override.
template <typename T>
concept BatchTask = requires(T& task, const T& ctask, DropReason reason, absl::Status status) {
  { ctask.seq_len() } -> std::convertible_to<size_t>;
  { ctask.priority() } -> std::convertible_to<int>;
  { ctask.deadline() } -> std::convertible_to<Clock::time_point>;
  { ctask.cancelled() } -> std::convertible_to<bool>;
  task.OnDropped(reason, status);
};

template <typename T>
concept HasQueueTimeout = requires(const T& ctask) {
  { ctask.queue_timeout() } -> std::convertible_to<Clock::duration>;
};

template <typename Task>
struct Batch {
  std::vector<std::unique_ptr<Task>> tasks;
  // queue_durations[i]: how long tasks[i] waited, arrival to formation.
  std::vector<Clock::duration> queue_durations;
  size_t padded_sequence_length = 0;  // sequence bucket of the longest task
  size_t padded_batch_size = 0;       // allowed batch size >= tasks.size(); extra rows are padding
  size_t real_tokens = 0;             // sum of seq_len()
  size_t padded_tokens = 0;           // padded_sequence_length * padded_batch_size
  // Set once the batch ran: of real_tokens, those whose keys and values came from a decoder's shared
  // prompt prefix, computed once (runtime/prompt_prefix.h), instead of being computed here.
  size_t prompt_prefix_tokens = 0;
  Clock::time_point formation_time{};
  // Set by Batcher::WaitForBatch: when this batch was formed, no other batch of its batcher was
  // running (returned and not yet BatchDone) and no task stayed queued. The instance running it
  // may then use the cores its idle sibling instances would otherwise leave unused.
  bool alone = false;

  size_t size() const { return tasks.size(); }
  // Share of computed tokens that are padding, 0..1.
  double padding_ratio() const {
    return padded_tokens == 0 ? 0.0 : 1.0 - static_cast<double>(real_tokens) / static_cast<double>(padded_tokens);
  }
};

// Counters of one batcher. Gauges: queued_tasks, queued_tokens, running_batches; the rest only grow.
struct BatcherStats {
  size_t queued_tasks = 0;
  size_t queued_tokens = 0;
  size_t running_batches = 0;  // returned by WaitForBatch, not yet BatchDone (Batcher::Stats fills it)
  uint64_t submitted = 0;
  uint64_t rejected_queue_full = 0;
  uint64_t rejected_invalid = 0;
  uint64_t delayed = 0;  // tasks moved behind their level by timeout_action DELAY
  uint64_t dropped[kDropReasonCount] = {};
  uint64_t batches_formed = 0;
  uint64_t batched_tasks = 0;   // sum of batch sizes
  uint64_t real_tokens = 0;     // sum over batches
  uint64_t padded_tokens = 0;   // sum over batches

  uint64_t dropped_by(DropReason r) const { return dropped[static_cast<size_t>(r)]; }
};

}  // namespace tide::batching
