// tide::guard::ApiKeys — several API keys, each a named tenant with optional quotas
// (`--api-keys FILE`, beside the single `--api-key`).
//
// File format: one key a line, `KEY name=NAME [requests_per_second=R] [pairs_per_second=P]
// [max_concurrent=C]`; `#` starts a comment (to the end of the line); blank lines are skipped.
// KEY is any run of printable ASCII without spaces or '#'; NAME is [A-Za-z0-9_.-]+ (it labels
// metrics and logs, so it must never be the key). R and P are non-negative numbers, C a
// non-negative integer; 0 or absent: unlimited.
//
// Contract:
//  - Parse / Load check the whole file and fail with the first error as "<source>:<line>: ...",
//    never echoing a key. Duplicate keys and duplicate names are errors.
//  - Find(authorization) returns the tenant whose key the `Authorization: Bearer <key>` value
//    carries, or null. It compares the presented token with every key in constant time (no early
//    exit), so timing reveals neither which key matched nor a prefix of any key.
//  - A Tenant's buckets and limiter are shared by every request of that key; thread-safe. A table
//    is immutable once built (tenants keep their own mutable quota state); reloading builds a new
//    table whose tenants start with full buckets.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "guard/concurrency_limiter.h"
#include "guard/token_bucket.h"

namespace tide::guard {

struct KeyQuota {
  double requests_per_second = 0;  // 0: unlimited
  double pairs_per_second = 0;     // 0: unlimited; pairs = documents (rerank) or rows (tensors)
  int64_t max_concurrent = 0;      // 0: unlimited
};

class Tenant {
 public:
  Tenant(std::string name, const KeyQuota& quota, const Clock* clock)
      : name_(std::move(name)),
        quota_(quota),
        requests_(clock, quota.requests_per_second),
        pairs_(clock, quota.pairs_per_second),
        concurrency_(quota.max_concurrent) {}

  const std::string& name() const { return name_; }
  const KeyQuota& quota() const { return quota_; }
  TokenBucket& requests() { return requests_; }
  TokenBucket& pairs() { return pairs_; }
  ConcurrencyLimiter& concurrency() { return concurrency_; }

 private:
  const std::string name_;
  const KeyQuota quota_;
  TokenBucket requests_;
  TokenBucket pairs_;
  ConcurrencyLimiter concurrency_;
};

class ApiKeys {
 public:
  static absl::StatusOr<std::shared_ptr<ApiKeys>> Parse(std::string_view text, std::string_view source,
                                                        const Clock* clock);
  static absl::StatusOr<std::shared_ptr<ApiKeys>> Load(const std::filesystem::path& file, const Clock* clock);
  // `single_key` (--api-key) added as the tenant "default" without quotas to `file_keys` (may be
  // null); INVALID_ARGUMENT when the file already has that key or the name "default".
  static absl::StatusOr<std::shared_ptr<ApiKeys>> WithSingleKey(std::shared_ptr<ApiKeys> file_keys,
                                                                std::string single_key, const Clock* clock);

  std::shared_ptr<Tenant> Find(std::string_view authorization) const;
  size_t size() const { return entries_.size(); }
  std::vector<std::string> names() const;

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<Tenant> tenant;
  };
  absl::Status AddEntry(std::string key, std::string name, const KeyQuota& quota, const Clock* clock);
  std::vector<Entry> entries_;
};

}  // namespace tide::guard
