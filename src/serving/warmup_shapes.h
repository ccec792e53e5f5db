// tide::serving::WarmupShapes — the batch shapes every instance runs once before its model is
// ready, so that no request pays for a first-seen shape (memory plans, arena growth).
//
// Contract: pure; the shapes are, in order,
//  - config.model_warmup when it has entries (batch_size x the longest dims of each input, `count`
//    times each), else
//  - for each sequence bucket, every allowed batch size whose padded cost (rows x bucket) fits
//    max_batch_tokens, plus always the smallest allowed size; when every batch size is allowed
//    (allowed_batch_sizes empty), batch 1 and the most rows the budget allows for that bucket
//    (capped by max_batch_size): the largest shape per bucket sizes the arena, and warming all
//    1..max_batch_size sizes per bucket would take minutes on a small CPU. Buckets longer than
//    kWarmEveryBucketUpTo are skipped except the last (the model's max length): a long-context
//    model has eight buckets per doubling there (DefaultSequenceBuckets).
#pragma once

#include <vector>

#include "batching/batcher_options.h"
#include "config/model_config.h"
#include "serving/model_runner.h"

namespace tide::serving {

inline constexpr size_t kWarmEveryBucketUpTo = 512;

std::vector<BatchShape> WarmupShapes(const config::ModelConfig& config, const batching::BatcherOptions& options);

}  // namespace tide::serving
