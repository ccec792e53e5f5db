// tide::batching::ShapeBuckets — rounds sequence lengths and batch sizes up to the configured
// shapes so that the runtime sees few distinct shapes and reuses its memory plans.
//
// Contract: immutable after construction, thread-safe. Built from validated BatcherOptions.
#pragma once

#include <cstddef>
#include <vector>

#include "batching/batcher_options.h"

namespace tide::batching {

class ShapeBuckets {
 public:
  static constexpr size_t kNoBucket = static_cast<size_t>(-1);

  explicit ShapeBuckets(const BatcherOptions& options);

  size_t sequence_bucket_count() const { return sequence_buckets_.size(); }
  // Index of the smallest bucket >= seq_len; kNoBucket when seq_len exceeds the last bucket.
  size_t SequenceBucketIndex(size_t seq_len) const;
  size_t SequenceBucketLength(size_t index) const { return sequence_buckets_[index]; }
  // Smallest allowed batch size >= count (count itself when every size is allowed).
  size_t PaddedBatchSize(size_t count) const;
  // Padded cost of `count` rows of padded length `padded_len`.
  size_t PaddedTokens(size_t padded_len, size_t count) const { return padded_len * PaddedBatchSize(count); }

 private:
  std::vector<size_t> sequence_buckets_;
  std::vector<size_t> allowed_batch_sizes_;
};

}  // namespace tide::batching
