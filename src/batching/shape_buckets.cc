#include "batching/shape_buckets.h"

#include <algorithm>

namespace tide::batching {

ShapeBuckets::ShapeBuckets(const BatcherOptions& options)
    : sequence_buckets_(options.sequence_buckets), allowed_batch_sizes_(options.allowed_batch_sizes) {}

size_t ShapeBuckets::SequenceBucketIndex(size_t seq_len) const {
  auto it = std::lower_bound(sequence_buckets_.begin(), sequence_buckets_.end(), seq_len);
  if (it == sequence_buckets_.end()) return kNoBucket;
  return static_cast<size_t>(it - sequence_buckets_.begin());
}

size_t ShapeBuckets::PaddedBatchSize(size_t count) const {
  if (allowed_batch_sizes_.empty()) return count;
  auto it = std::lower_bound(allowed_batch_sizes_.begin(), allowed_batch_sizes_.end(), count);
  return it == allowed_batch_sizes_.end() ? count : *it;
}

}  // namespace tide::batching
