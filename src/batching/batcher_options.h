// tide::batching::BatcherOptions — the dynamic batching and queue-policy settings of one model,
// in Triton's words (dynamic_batching { max_queue_delay_microseconds, preferred_batch_size,
// priority_levels, default_queue_policy, priority_queue_policy }) plus TEI's max_batch_tokens.
//
// Contract: plain data. ValidateBatcherOptions returns INVALID_ARGUMENT naming the first bad field;
// Batcher::Create and BatchFormer::Create call it, so a constructed batcher always has valid
// options.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <vector>

#include "absl/status/status.h"

namespace tide::batching {

// What happens to a queued task whose queue timeout expires (Triton's timeout_action).
enum class TimeoutAction {
  kReject,  // drop it with DropReason::kQueueTimeout (UNAVAILABLE)
  kDelay,   // keep it, but behind every task of its priority level that has not timed out
};

// Triton's ModelQueuePolicy, for one priority level.
struct QueuePolicy {
  TimeoutAction timeout_action = TimeoutAction::kReject;
  // Queue timeout of a task of this level; zero = none.
  std::chrono::microseconds default_timeout{0};
  // Triton's semantics: when false a task's own timeout is ignored; when true it is honoured, but
  // only where it is shorter than default_timeout (or default_timeout is zero).
  bool allow_timeout_override = false;
  // Queued tasks of this level beyond which Submit answers UNAVAILABLE; zero = unbounded.
  size_t max_queue_size = 0;
};

struct BatcherOptions {
  // Most tasks in one batch.
  size_t max_batch_size = 32;
  // Most padded tokens in one batch: padded sequence length x padded batch size. A single task
  // whose own padded cost exceeds it still runs, alone.
  size_t max_batch_tokens = 16384;
  // Padded tokens past which a batch stops growing; zero: none (max_batch_tokens alone). The
  // batch-size knob of compute-bound rows: once a batch holds this much work its matrix products
  // already run at the engine's ceiling, so one more row only adds padding and ties that row's
  // request to the others' completion (an instance that finishes early then idles while rows it
  // could have run wait inside another batch). A row whose own padded cost exceeds it runs alone,
  // and a batch that reaches it leaves at once, without waiting for max_queue_delay. The server
  // derives it from the model's weights (serving::DefaultBatchSaturationTokens).
  size_t saturation_tokens = 0;
  // A row no other row could share a batch with (2 x its bucket > batch_token_cap()) runs padded to
  // a multiple of this, not to its bucket (BatchFormer::Take); so does every batch with
  // pad_to_longest_row.
  static constexpr size_t kLoneRowAlignment = 16;
  // True: a batch is padded to its longest row rounded up to kLoneRowAlignment (never past that
  // row's bucket) instead of to the bucket; buckets still group the rows and bound the token
  // budget. More distinct shapes, less padding: worth it where a row costs its length (CPU).
  bool pad_to_longest_row = false;
  // Batch sizes released at once when reached (the largest one) or preferred when the queue delay
  // expires. Empty: only max_batch_size / max_batch_tokens release early. Each <= max_batch_size.
  std::vector<size_t> preferred_batch_sizes;
  // How long the oldest queued task may wait for its batch to grow. Zero: an idle instance takes
  // whatever is queued at once.
  std::chrono::microseconds max_queue_delay{0};
  // Sequence lengths are padded up to the next bucket; a task longer than the last bucket is
  // refused (INVALID_ARGUMENT). Strictly increasing.
  std::vector<size_t> sequence_buckets = {16, 32, 64, 128, 192, 256, 384, 512};
  // True: a batch gathers tasks of sequence buckets nearest its anchor's first (length-sorted),
  // which keeps padding low. False (first-in-first-out, for comparison): tasks join strictly in
  // arrival order across buckets, and the batch ends at the first task that does not fit; it is
  // still padded to the bucket of its longest member.
  bool group_by_length = true;
  // With group_by_length: a task joins a batch only while the batch's padded length stays within
  // this factor of the shortest sequence bucket in it (or within kPaddingSlackTokens of it: a few
  // pad tokens on a short row cost less than a separate runtime call), so a 100-token row is not
  // padded to 512 because a long row happened to be queued; rows beyond it wait for a batch of
  // their own (an idle instance takes it at once). Zero: no limit (only the token budget bounds
  // padding). Else >= 1.
  double max_padding_ratio = 1.5;
  static constexpr size_t kPaddingSlackTokens = 64;
  // Batch sizes the runtime accepts; a batch of n tasks is padded up to the next one. Empty: every
  // size 1..max_batch_size. Strictly increasing, the last >= max_batch_size.
  std::vector<size_t> allowed_batch_sizes;
  // Priority levels 1..priority_levels, 1 highest (Triton). Zero: priorities are ignored.
  int priority_levels = 0;
  // Level of tasks whose priority is 0 or out of range; required (1..priority_levels) when
  // priority_levels > 0.
  int default_priority_level = 0;
  // Policy of every level not listed in priority_queue_policy.
  QueuePolicy default_queue_policy;
  // Per-level policies, keyed by level (1..priority_levels).
  std::map<int, QueuePolicy> priority_queue_policy;

  // The most padded tokens one batch may hold: max_batch_tokens, or saturation_tokens if smaller.
  size_t batch_token_cap() const {
    return saturation_tokens > 0 && saturation_tokens < max_batch_tokens ? saturation_tokens : max_batch_tokens;
  }
};

absl::Status ValidateBatcherOptions(const BatcherOptions& options);

}  // namespace tide::batching
