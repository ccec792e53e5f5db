#include "serving/score_cache.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tide::serving {
namespace {

TEST(ScoreCache, KeysSeparateEveryField) {
  // Length prefixes: moving a character from the query to the document makes another key.
  EXPECT_NE(ScoreCache::Key(1, "", "t", "ab", "c"), ScoreCache::Key(1, "", "t", "a", "bc"));
  EXPECT_NE(ScoreCache::Key(1, "", "t", "a", "b"), ScoreCache::Key(2, "", "t", "a", "b"));
  EXPECT_NE(ScoreCache::Key(1, "", "t", "a", "b"), ScoreCache::Key(1, "", "f", "a", "b"));
  EXPECT_EQ(ScoreCache::Key(1, "", "t", "a", "b"), ScoreCache::Key(1, "", "t", "a", "b"));
  // The partition (a tenant's name) is a field of its own too.
  EXPECT_NE(ScoreCache::Key(1, "alice", "t", "a", "b"), ScoreCache::Key(1, "bob", "t", "a", "b"));
  EXPECT_NE(ScoreCache::Key(1, "alice", "t", "a", "b"), ScoreCache::Key(1, "", "t", "a", "b"));
  EXPECT_NE(ScoreCache::Key(1, "a", "t", "a", "b"), ScoreCache::Key(1, "", "at", "a", "b"));
}

TEST(ScoreCache, APartitionNeverHitsAnotherPartitionsEntry) {
  ScoreCache cache(1 << 20);
  cache.Insert(ScoreCache::Key(1, "alice", "t", "q", "d"), {1.0f});
  EXPECT_FALSE(cache.Lookup(ScoreCache::Key(1, "bob", "t", "q", "d")).has_value());
  EXPECT_FALSE(cache.Lookup(ScoreCache::Key(1, "", "t", "q", "d")).has_value());
  auto own = cache.Lookup(ScoreCache::Key(1, "alice", "t", "q", "d"));
  ASSERT_TRUE(own.has_value());
  EXPECT_EQ((*own)[0], 1.0f);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.misses(), 2u);
}

TEST(ScoreCache, HitsMissesAndLeastRecentlyUsedEvictionWithinItsBytes) {
  // One entry costs its key + 4 bytes of logits + the overhead; each shard holds a sixteenth.
  const std::string probe = ScoreCache::Key(1, "", "t", "q", "doc-00");
  const size_t cost = probe.size() + sizeof(float) + ScoreCache::kEntryOverheadBytes;
  ScoreCache cache(16 * 3 * cost);  // three entries per shard
  for (int i = 0; i < 200; ++i) {
    cache.Insert(ScoreCache::Key(1, "", "t", "q", "doc-" + std::to_string(100 + i)), {static_cast<float>(i)});
  }
  EXPECT_LE(cache.bytes(), static_cast<int64_t>(cache.capacity_bytes()));
  EXPECT_GT(cache.evictions(), 0u);
  // The newest entry is there; the oldest was evicted.
  auto newest = cache.Lookup(ScoreCache::Key(1, "", "t", "q", "doc-299"));
  ASSERT_TRUE(newest.has_value());
  EXPECT_EQ((*newest)[0], 199.0f);
  EXPECT_FALSE(cache.Lookup(ScoreCache::Key(1, "", "t", "q", "doc-100")).has_value());
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.misses(), 1u);
  // Inserting a key again refreshes it without growing.
  const int64_t before = cache.bytes();
  cache.Insert(ScoreCache::Key(1, "", "t", "q", "doc-299"), {7.0f});
  EXPECT_EQ(cache.bytes(), before);
  EXPECT_EQ((*cache.Lookup(ScoreCache::Key(1, "", "t", "q", "doc-299")))[0], 7.0f);
}

TEST(ScoreCache, AnEntryLargerThanAShardIsNotKept) {
  ScoreCache cache(16 * 200);
  cache.Insert(ScoreCache::Key(1, "", "t", "q", std::string(1000, 'x')), {1.0f});
  EXPECT_EQ(cache.bytes(), 0);
  EXPECT_FALSE(cache.Lookup(ScoreCache::Key(1, "", "t", "q", std::string(1000, 'x'))).has_value());
}

}  // namespace
}  // namespace tide::serving
