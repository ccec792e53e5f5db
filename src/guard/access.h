// tide::guard access — who may call what: the roles a credential carries, the access level a route
// or RPC requires, and the one decision function both edges apply (server/access/access_table.h
// says which route or RPC needs which level).
//
// Roles, never implied: a key is a tenant key (inference), an admin key (repository and rollout
// APIs) or a monitor key (metrics, load report, dashboard, readiness when --metrics-require-key),
// or several of these when the keys file says so (`role=tenant,monitor`). No role implies another.
//
// Decision (Authorize):
//  - kOpen: always allowed (liveness/readiness probes, static API docs).
//  - kMonitor: allowed without a key unless `monitor_requires_key` (and never required on the
//    admin listener); else a key with role monitor or admin.
//  - kTenant: allowed without a key when no key has role tenant (a keyless inference server);
//    else a key with role tenant.
//  - kAdmin: allowed without a key only when no credential of any role is configured (a keyless
//    development server; the HTTP edge's browser checks still apply); else a key with role admin.
//    Keys configured but none with role admin: the admin API is disabled (403 saying how to
//    enable it), never open.
//  - No or an unknown key: UNAUTHENTICATED (401); a known key without the role: PERMISSION_DENIED
//    (403), naming the role needed, never the key.
// Contract: pure functions over an immutable key table; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"

namespace tide::guard {

class ApiKeys;
class Tenant;

// What a route or RPC requires. kUnset is never valid in a table (a test checks every entry).
enum class Access : uint8_t { kUnset = 0, kOpen, kMonitor, kTenant, kAdmin };

std::string_view AccessName(Access access);  // "none", "monitor", "tenant", "admin"

// The roles of a key, a bit set.
enum Role : uint8_t { kRoleTenant = 1, kRoleAdmin = 2, kRoleMonitor = 4 };

struct AccessOptions {
  // --metrics-require-key: kMonitor routes need a monitor or admin key (main listener only).
  bool monitor_requires_key = false;
};

// Where the request arrived: the admin listener (--admin-port) always serves kMonitor routes
// without a key (it serves nothing else above kOpen).
enum class Listener : uint8_t { kMain, kAdminPort };

// The key the call presented (null when none was needed and none matched), or the refusal.
absl::StatusOr<std::shared_ptr<Tenant>> Authorize(const ApiKeys* keys, Access access, std::string_view authorization,
                                                  const AccessOptions& options, Listener listener = Listener::kMain);

}  // namespace tide::guard
