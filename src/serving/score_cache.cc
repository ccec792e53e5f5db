#include "serving/score_cache.h"

#include <utility>

#include "absl/hash/hash.h"

namespace tide::serving {

namespace {

void AppendLength(std::string* out, size_t n) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((n >> (8 * i)) & 0xff));
}

}  // namespace

ScoreCache::ScoreCache(size_t capacity_bytes)
    : capacity_bytes_(capacity_bytes), shard_capacity_(capacity_bytes / kShards) {}

std::string ScoreCache::Key(uint64_t generation, std::string_view partition, std::string_view options,
                            std::string_view query, std::string_view document) {
  // Length-prefixed fields, so that no two different tuples make the same key.
  std::string key;
  key.reserve(8 + 4 * 8 + partition.size() + options.size() + query.size() + document.size());
  AppendLength(&key, generation);
  AppendLength(&key, partition.size());
  key.append(partition);
  AppendLength(&key, options.size());
  key.append(options);
  AppendLength(&key, query.size());
  key.append(query);
  AppendLength(&key, document.size());
  key.append(document);
  return key;
}

ScoreCache::Shard& ScoreCache::ShardFor(const std::string& key) {
  return shards_[absl::HashOf(key) % kShards];
}

std::optional<std::vector<float>> ScoreCache::Lookup(const std::string& key) {
  Shard& shard = ShardFor(key);
  absl::MutexLock lock(&shard.mu);
  auto it = shard.index.find(std::string_view(key));
  if (it == shard.index.end()) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  shard.lru.splice(shard.lru.begin(), shard.lru, it->second);
  hits_.fetch_add(1, std::memory_order_relaxed);
  return it->second->logits;
}

void ScoreCache::Insert(std::string key, std::vector<float> logits) {
  const size_t cost = key.size() + logits.size() * sizeof(float) + kEntryOverheadBytes;
  if (cost > shard_capacity_) return;
  Shard& shard = ShardFor(key);
  absl::MutexLock lock(&shard.mu);
  if (auto it = shard.index.find(std::string_view(key)); it != shard.index.end()) {
    // A concurrent miss of the same pair already stored it: refresh.
    it->second->logits = std::move(logits);
    shard.lru.splice(shard.lru.begin(), shard.lru, it->second);
    return;
  }
  while (shard.bytes + cost > shard_capacity_ && !shard.lru.empty()) {
    Entry& victim = shard.lru.back();
    shard.bytes -= victim.cost;
    bytes_.fetch_sub(static_cast<int64_t>(victim.cost), std::memory_order_relaxed);
    shard.index.erase(std::string_view(victim.key));
    shard.lru.pop_back();
    evictions_.fetch_add(1, std::memory_order_relaxed);
  }
  shard.lru.push_front(Entry{std::move(key), std::move(logits), cost});
  // The index views the key stored in the list node, which never moves.
  shard.index.emplace(std::string_view(shard.lru.front().key), shard.lru.begin());
  shard.bytes += cost;
  bytes_.fetch_add(static_cast<int64_t>(cost), std::memory_order_relaxed);
}

}  // namespace tide::serving
