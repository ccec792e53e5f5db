#include "batching/batcher_options.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tide::batching {
namespace {

bool StrictlyIncreasing(const std::vector<size_t>& v) {
  return std::adjacent_find(v.begin(), v.end(), [](size_t a, size_t b) { return a >= b; }) == v.end();
}

}  // namespace

absl::Status ValidateBatcherOptions(const BatcherOptions& o) {
  if (o.max_batch_size == 0) return absl::InvalidArgumentError("max_batch_size must be > 0");
  if (o.max_batch_tokens == 0) return absl::InvalidArgumentError("max_batch_tokens must be > 0");
  if (o.max_queue_delay.count() < 0) return absl::InvalidArgumentError("max_queue_delay must be >= 0");
  if (!(o.max_padding_ratio == 0 || o.max_padding_ratio >= 1)) {
    return absl::InvalidArgumentError("max_padding_ratio must be 0 (no limit) or >= 1");
  }
  for (size_t p : o.preferred_batch_sizes) {
    if (p == 0 || p > o.max_batch_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("preferred_batch_size ", p, " must be in 1..max_batch_size (", o.max_batch_size, ")"));
    }
  }
  if (o.sequence_buckets.empty() || o.sequence_buckets.front() == 0 || !StrictlyIncreasing(o.sequence_buckets)) {
    return absl::InvalidArgumentError("sequence_buckets must be non-empty, positive and strictly increasing");
  }
  if (!o.allowed_batch_sizes.empty()) {
    if (o.allowed_batch_sizes.front() == 0 || !StrictlyIncreasing(o.allowed_batch_sizes)) {
      return absl::InvalidArgumentError("allowed_batch_sizes must be positive and strictly increasing");
    }
    if (o.allowed_batch_sizes.back() < o.max_batch_size) {
      return absl::InvalidArgumentError(absl::StrCat("the largest allowed batch size (", o.allowed_batch_sizes.back(),
                                                     ") must be >= max_batch_size (", o.max_batch_size, ")"));
    }
  }
  if (o.priority_levels < 0) return absl::InvalidArgumentError("priority_levels must be >= 0");
  if (o.priority_levels > 0 &&
      (o.default_priority_level < 1 || o.default_priority_level > o.priority_levels)) {
    return absl::InvalidArgumentError(absl::StrCat("default_priority_level must be in 1..priority_levels (",
                                                   o.priority_levels, ")"));
  }
  for (const auto& [level, policy] : o.priority_queue_policy) {
    if (level < 1 || level > std::max(o.priority_levels, 1)) {
      return absl::InvalidArgumentError(absl::StrCat("priority_queue_policy level ", level, " is out of range"));
    }
    if (policy.default_timeout.count() < 0) {
      return absl::InvalidArgumentError("priority_queue_policy default_timeout must be >= 0");
    }
  }
  if (o.default_queue_policy.default_timeout.count() < 0) {
    return absl::InvalidArgumentError("default_queue_policy default_timeout must be >= 0");
  }
  return absl::OkStatus();
}

}  // namespace tide::batching
