// tide::guard::ApiKeys — several API keys, each a named tenant with optional quotas
// (`--api-keys FILE`, beside the single `--api-key`).
//
// File format: one key a line, `KEY name=NAME [role=ROLE[,ROLE...]] [requests_per_second=R]
// [pairs_per_second=P] [max_concurrent=C] [max_priority=N]`; `#` starts a comment (to the end of the
// line); blank lines are skipped. KEY is any run of printable ASCII without spaces or '#'; NAME is
// [A-Za-z0-9_.-]+ (it labels metrics and logs, so it must never be the key). ROLE is tenant
// (inference; the default), admin (repository and rollout APIs) or monitor (metrics, load report,
// dashboard under --metrics-require-key): guard/access.h. R and P are non-negative numbers, C a
// non-negative integer; 0 or absent: unlimited. N (>= 1) is the highest priority level the tenant
// may ask for (x-priority / KServe "priority", 1 = highest); absent: the tenant's requests always
// run at the model's default level (ClampPriority).
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

// Who a key is: its name, roles and inference policy (quotas, the highest priority it may ask for).
struct KeyPolicy {
  uint8_t roles = 1;     // guard::Role bits; the file's default: tenant
  int max_priority = 0;  // 0: none (the model's default level); else 1.. (1 = highest)
};

class Tenant {
 public:
  Tenant(std::string name, const KeyQuota& quota, const Clock* clock, KeyPolicy policy = KeyPolicy{})
      : name_(std::move(name)),
        policy_(policy),
        quota_(quota),
        requests_(clock, quota.requests_per_second),
        pairs_(clock, quota.pairs_per_second),
        concurrency_(quota.max_concurrent) {}

  const std::string& name() const { return name_; }
  uint8_t roles() const { return policy_.roles; }
  bool has_role(uint8_t role) const { return (policy_.roles & role) != 0; }
  int max_priority() const { return policy_.max_priority; }
  const KeyQuota& quota() const { return quota_; }
  TokenBucket& requests() { return requests_; }
  TokenBucket& pairs() { return pairs_; }
  ConcurrencyLimiter& concurrency() { return concurrency_; }

 private:
  const std::string name_;
  const KeyPolicy policy_;
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
  // `key` added to `keys` (may be null) as `name` with `roles`, no quotas (tide serve: --api-key as
  // "default" with role tenant, --admin-api-key as "admin" with role admin); INVALID_ARGUMENT
  // naming `what` when the table already has that key or that name.
  static absl::StatusOr<std::shared_ptr<ApiKeys>> WithKey(std::shared_ptr<ApiKeys> keys, std::string key,
                                                          std::string name, uint8_t roles, std::string_view what,
                                                          const Clock* clock);

  std::shared_ptr<Tenant> Find(std::string_view authorization) const;
  size_t size() const { return entries_.size(); }
  std::vector<std::string> names() const;
  // Whether any key carries `role` (guard::Role).
  bool any_with_role(uint8_t role) const { return (roles_present_ & role) != 0; }

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<Tenant> tenant;
  };
  absl::Status AddEntry(std::string key, std::string name, const KeyQuota& quota, KeyPolicy policy,
                        const Clock* clock);
  std::vector<Entry> entries_;
  uint8_t roles_present_ = 0;
};

// The priority a call of `tenant` runs at when it asks for `requested` (0 = the model's default
// level; 1 = highest): unchanged without a tenant (no keys) or for 0; a tenant without max_priority
// gets 0 (its priority requests are ignored); one with max_priority M gets at most level M (a
// request for 1..M-1 is clamped to M; M and lower priorities are kept).
int64_t ClampPriority(const Tenant* tenant, int64_t requested);

}  // namespace tide::guard
