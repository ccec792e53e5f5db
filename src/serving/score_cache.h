// tide::serving::ScoreCache — the per-pair score cache (`--score-cache-bytes`): the raw logits a
// model version gave one (query, document) pair under given tokenization options, so that a pair
// seen again (RAG pipelines re-send the same candidates for popular queries) is not queued again.
//
// Contract:
//  - Keyed by (model generation, partition, pair options, query text, document text). The
//    generation is ServedModel::generation(), unique per loaded version object, so a reloaded or
//    replaced version never answers from its predecessor's entries (they age out). The partition
//    is who may share entries (ScoreCacheScope): with kTenant the caller's tenant name, so a hit
//    (and its latency) never tells one tenant that another scored the same pair; with kShared
//    empty for everyone. Partitions share the byte budget and the LRU order.
//  - Bounded in bytes: each entry costs its key, its logits and a fixed overhead
//    (kEntryOverheadBytes); Insert evicts least recently used entries until the total fits.
//    An entry larger than a shard's share of the capacity is not kept.
//  - Thread-safe: 16 shards by key hash, each with its own mutex and LRU list; a Lookup is one
//    hash, one lock and one list splice.
//  - Counters (hits, misses, evictions, bytes) are read without a consistent cut.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace tide::serving {

// Who shares score cache entries (`--score-cache-scope`).
enum class ScoreCacheScope {
  kTenant,  // each tenant (API key name) its own entries; no keys configured: one partition
  kShared,  // every caller the same entries: more hits, but a hit reveals another tenant's pair
};

class ScoreCache {
 public:
  static constexpr size_t kEntryOverheadBytes = 96;  // list node + map slot + vector header

  explicit ScoreCache(size_t capacity_bytes);

  // The key of one pair. `partition`: who may hit it (see the contract; "" for everyone).
  // `options` encodes the tokenization options that change the model's input (truncation,
  // direction, max tokens per document).
  static std::string Key(uint64_t generation, std::string_view partition, std::string_view options,
                         std::string_view query, std::string_view document);

  std::optional<std::vector<float>> Lookup(const std::string& key);
  void Insert(std::string key, std::vector<float> logits);

  size_t capacity_bytes() const { return capacity_bytes_; }
  uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }
  uint64_t evictions() const { return evictions_.load(std::memory_order_relaxed); }
  int64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  static constexpr size_t kShards = 16;
  struct Entry {
    std::string key;
    std::vector<float> logits;
    size_t cost = 0;
  };
  struct Shard {
    absl::Mutex mu;
    std::list<Entry> lru ABSL_GUARDED_BY(mu);  // front: most recently used
    absl::flat_hash_map<std::string_view, std::list<Entry>::iterator> index ABSL_GUARDED_BY(mu);
    size_t bytes ABSL_GUARDED_BY(mu) = 0;
  };
  Shard& ShardFor(const std::string& key);

  const size_t capacity_bytes_;
  const size_t shard_capacity_;
  std::array<Shard, kShards> shards_;
  std::atomic<uint64_t> hits_{0}, misses_{0}, evictions_{0};
  std::atomic<int64_t> bytes_{0};
};

}  // namespace tide::serving
