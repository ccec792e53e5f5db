#include "serving/warmup_shapes.h"

#include <algorithm>

namespace tide::serving {

std::vector<BatchShape> WarmupShapes(const config::ModelConfig& config, const batching::BatcherOptions& o) {
  std::vector<BatchShape> shapes;
  for (const ModelWarmup& w : config.model_warmup()) {
    int64_t seq = 16;
    for (const auto& [name, input] : w.inputs()) {
      if (!input.dims().empty()) seq = std::max<int64_t>(seq, input.dims(input.dims_size() - 1));
    }
    for (uint32_t i = 0; i < std::max<uint32_t>(w.count(), 1); ++i) {
      shapes.push_back({std::max<int64_t>(w.batch_size(), 1), seq});
    }
  }
  if (!shapes.empty()) return shapes;
  for (size_t bucket : o.sequence_buckets) {
    // Past 512 only the longest bucket: a long-context model has dozens of buckets there, each
    // warm-up run at thousands of tokens, and its largest shape is what sizes the arena.
    if (bucket > kWarmEveryBucketUpTo && bucket != o.sequence_buckets.back()) continue;
    const size_t most_rows = std::clamp<size_t>(o.batch_token_cap() / bucket, 1, o.max_batch_size);
    std::vector<size_t> sizes;
    if (o.allowed_batch_sizes.empty()) {
      sizes = {1, most_rows};
    } else {
      for (size_t size : o.allowed_batch_sizes) {
        if (size == o.allowed_batch_sizes.front() || size * bucket <= o.batch_token_cap()) sizes.push_back(size);
      }
    }
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    for (size_t rows : sizes) shapes.push_back({static_cast<int64_t>(rows), static_cast<int64_t>(bucket)});
  }
  return shapes;
}

}  // namespace tide::serving
