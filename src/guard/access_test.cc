#include "guard/access.h"

#include <memory>

#include "common/clock.h"
#include "common/error.h"
#include "gtest/gtest.h"
#include "guard/api_keys.h"

namespace tide::guard {
namespace {

constexpr char kKeys[] = R"(
tenant-key   name=search
admin-key    name=ops role=admin
monitor-key  name=prom role=monitor
both-key     name=both role=tenant,admin max_priority=2
)";

std::shared_ptr<ApiKeys> Keys(const char* text) {
  static FakeClock clock;
  auto keys = ApiKeys::Parse(text, "keys.txt", &clock);
  EXPECT_TRUE(keys.ok()) << keys.status();
  return *keys;
}

ErrorKind KindOfResult(const absl::StatusOr<std::shared_ptr<Tenant>>& r) {
  return r.ok() ? ErrorKind::kInternal : KindOf(r.status());
}

TEST(Access, EveryRoleOnlyWhatItNames) {
  auto keys = Keys(kKeys);
  const AccessOptions open_metrics;
  // Tenant routes: tenant keys only; an admin-only or monitor-only key is forbidden, no key 401.
  EXPECT_EQ((*Authorize(keys.get(), Access::kTenant, "Bearer tenant-key", open_metrics))->name(), "search");
  EXPECT_EQ(KindOfResult(Authorize(keys.get(), Access::kTenant, "Bearer admin-key", open_metrics)), ErrorKind::kForbidden);
  EXPECT_EQ(KindOfResult(Authorize(keys.get(), Access::kTenant, "Bearer monitor-key", open_metrics)), ErrorKind::kForbidden);
  EXPECT_EQ(KindOfResult(Authorize(keys.get(), Access::kTenant, "", open_metrics)), ErrorKind::kUnauthenticated);
  EXPECT_EQ(KindOfResult(Authorize(keys.get(), Access::kTenant, "Bearer nope", open_metrics)), ErrorKind::kUnauthenticated);
  // Admin routes: admin keys only; a tenant key is forbidden.
  EXPECT_EQ((*Authorize(keys.get(), Access::kAdmin, "Bearer admin-key", open_metrics))->name(), "ops");
  EXPECT_EQ((*Authorize(keys.get(), Access::kAdmin, "Bearer both-key", open_metrics))->name(), "both");
  EXPECT_EQ(KindOfResult(Authorize(keys.get(), Access::kAdmin, "Bearer tenant-key", open_metrics)), ErrorKind::kForbidden);
  EXPECT_EQ(KindOfResult(Authorize(keys.get(), Access::kAdmin, "Bearer monitor-key", open_metrics)), ErrorKind::kForbidden);
  EXPECT_EQ(KindOfResult(Authorize(keys.get(), Access::kAdmin, "", open_metrics)), ErrorKind::kUnauthenticated);
  // Open routes: anyone. Monitor routes: anyone unless required.
  EXPECT_TRUE(Authorize(keys.get(), Access::kOpen, "", open_metrics).ok());
  EXPECT_TRUE(Authorize(keys.get(), Access::kMonitor, "", open_metrics).ok());
  AccessOptions required;
  required.monitor_requires_key = true;
  EXPECT_EQ(KindOfResult(Authorize(keys.get(), Access::kMonitor, "", required)), ErrorKind::kUnauthenticated);
  EXPECT_EQ(KindOfResult(Authorize(keys.get(), Access::kMonitor, "Bearer tenant-key", required)), ErrorKind::kForbidden);
  EXPECT_TRUE(Authorize(keys.get(), Access::kMonitor, "Bearer monitor-key", required).ok());
  EXPECT_TRUE(Authorize(keys.get(), Access::kMonitor, "Bearer admin-key", required).ok());
  // The admin listener serves monitor routes without a key whatever the flag says.
  EXPECT_TRUE(Authorize(keys.get(), Access::kMonitor, "", required, Listener::kAdminPort).ok());
  // An unset entry is never allowed.
  EXPECT_EQ(KindOfResult(Authorize(keys.get(), Access::kUnset, "Bearer admin-key", open_metrics)), ErrorKind::kInternal);
}

TEST(Access, TenantsWithoutAnAdminCredentialDisableTheAdminApi) {
  auto keys = Keys("tenant-key name=search\n");
  auto r = Authorize(keys.get(), Access::kAdmin, "Bearer tenant-key", AccessOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(KindOf(r.status()), ErrorKind::kForbidden);
  EXPECT_NE(r.status().message().find("admin API is disabled"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("role=admin"), std::string::npos) << r.status();
  // No key at all: the same 403, never open.
  EXPECT_EQ(KindOf(Authorize(keys.get(), Access::kAdmin, "", AccessOptions{}).status()), ErrorKind::kForbidden);
}

TEST(Access, AKeylessServerIsOpenAndAnAdminKeyAloneLeavesInferenceOpen) {
  for (Access a : {Access::kOpen, Access::kMonitor, Access::kTenant, Access::kAdmin}) {
    EXPECT_TRUE(Authorize(nullptr, a, "", AccessOptions{}).ok()) << AccessName(a);
  }
  auto admin_only = Keys("admin-key name=ops role=admin\n");
  EXPECT_TRUE(Authorize(admin_only.get(), Access::kTenant, "", AccessOptions{}).ok());
  EXPECT_EQ(KindOf(Authorize(admin_only.get(), Access::kAdmin, "", AccessOptions{}).status()),
            ErrorKind::kUnauthenticated);
}

TEST(Access, RefusalsNameTheRoleNeverTheKey) {
  auto keys = Keys(kKeys);
  auto r = Authorize(keys.get(), Access::kAdmin, "Bearer tenant-key", AccessOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'search'"), std::string::npos);
  EXPECT_EQ(r.status().message().find("tenant-key"), std::string::npos);
}

TEST(ApiKeysRoles, ParsesRolesAndMaxPriorityAndRefusesUnknownOnes) {
  FakeClock clock;
  auto keys = ApiKeys::Parse(kKeys, "keys.txt", &clock);
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ((*keys)->Find("Bearer tenant-key")->roles(), kRoleTenant);
  EXPECT_EQ((*keys)->Find("Bearer admin-key")->roles(), kRoleAdmin);
  EXPECT_EQ((*keys)->Find("Bearer both-key")->roles(), kRoleTenant | kRoleAdmin);
  EXPECT_EQ((*keys)->Find("Bearer both-key")->max_priority(), 2);
  EXPECT_TRUE((*keys)->any_with_role(kRoleMonitor));
  for (const char* bad : {"k name=a role=root\n", "k name=a role=\n", "k name=a role=admin,\n", "k name=a max_priority=0\n",
                          "k name=a max_priority=x\n"}) {
    auto r = ApiKeys::Parse(bad, "keys.txt", &clock);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("keys.txt:1:"), std::string::npos) << r.status();
  }
  // The single keys of the command line join with their own roles.
  auto with = ApiKeys::WithKey(*keys, "admin-2", "admin", kRoleAdmin, "--admin-api-key", &clock);
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ((*with)->Find("Bearer admin-2")->roles(), kRoleAdmin);
  EXPECT_FALSE(ApiKeys::WithKey(*keys, "tenant-key", "default", kRoleTenant, "--api-key", &clock).ok());
  EXPECT_FALSE(ApiKeys::WithKey(*keys, "", "default", kRoleTenant, "--api-key", &clock).ok());
}

TEST(ApiKeysRoles, ClampPriorityKeepsATenantAtOrBelowItsMaxPriority) {
  FakeClock clock;
  Tenant plain("a", KeyQuota{}, &clock);
  Tenant capped("b", KeyQuota{}, &clock, KeyPolicy{kRoleTenant, 3});
  EXPECT_EQ(ClampPriority(nullptr, 1), 1);  // no keys: as asked
  EXPECT_EQ(ClampPriority(&plain, 1), 0);   // no max_priority: the model's default level
  EXPECT_EQ(ClampPriority(&plain, 5), 0);
  EXPECT_EQ(ClampPriority(&capped, 1), 3);  // above its level: clamped
  EXPECT_EQ(ClampPriority(&capped, 3), 3);
  EXPECT_EQ(ClampPriority(&capped, 7), 7);  // lower priorities stay
  EXPECT_EQ(ClampPriority(&capped, 0), 0);
}

}  // namespace
}  // namespace tide::guard
