// WordCache: a bounded per-thread memo of word -> token ids for the Unigram and BPE models
// (HF keeps a similar per-model cache; ids never depend on it).
//
// Contract:
//  - ForThread(owner) returns this thread's cache for model `owner` (a process-unique id from
//    NewOwnerId, so a destroyed model's entries can never serve a new model). Each thread keeps a
//    few models' caches; others are evicted. Not shared between threads: no locking.
//  - Bounded: words longer than kMaxWordBytes are never cached, and a cache holding kMaxWords
//    words is cleared before the next insert. Lookups allocate nothing; inserts allocate only the
//    key (amortised).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace tide::tokenizer {

class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 64;
  static constexpr size_t kMaxWords = 16384;

  static uint64_t NewOwnerId() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
  }

  static WordCache& ForThread(uint64_t owner) {
    struct Slots {
      std::array<WordCache, 4> caches;
      size_t next_victim = 0;
    };
    thread_local Slots slots;
    for (WordCache& c : slots.caches) {
      if (c.owner_ == owner) return c;
    }
    WordCache& victim = slots.caches[slots.next_victim];
    slots.next_victim = (slots.next_victim + 1) % slots.caches.size();
    victim.Reset(owner);
    return victim;
  }

  static bool Cacheable(std::string_view word) { return word.size() <= kMaxWordBytes; }

  // Appends the cached ids of `word` to `ids`; false when absent.
  bool Lookup(std::string_view word, std::vector<int64_t>* ids) const {
    auto it = map_.find(absl::string_view(word.data(), word.size()));
    if (it == map_.end()) return false;
    ids->insert(ids->end(), arena_.begin() + it->second.first,
                arena_.begin() + it->second.first + it->second.second);
    return true;
  }

  void Insert(std::string_view word, const int64_t* ids, size_t n) {
    if (!Cacheable(word)) return;
    if (map_.size() >= kMaxWords) {
      map_.clear();
      arena_.clear();
    }
    const auto offset = static_cast<uint32_t>(arena_.size());
    arena_.insert(arena_.end(), ids, ids + n);
    map_.emplace(std::string(word), std::make_pair(offset, static_cast<uint32_t>(n)));
  }

 private:
  void Reset(uint64_t owner) {
    owner_ = owner;
    map_.clear();
    arena_.clear();
  }

  uint64_t owner_ = 0;
  absl::flat_hash_map<std::string, std::pair<uint32_t, uint32_t>> map_;
  std::vector<int64_t> arena_;
};

}  // namespace tide::tokenizer
