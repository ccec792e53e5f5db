#include "guard/access.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/error.h"
#include "guard/api_keys.h"

namespace tide::guard {

std::string_view AccessName(Access access) {
  switch (access) {
    case Access::kOpen: return "none";
    case Access::kMonitor: return "monitor";
    case Access::kTenant: return "tenant";
    case Access::kAdmin: return "admin";
    case Access::kUnset: break;
  }
  return "unset";
}

namespace {

absl::Status Missing(std::string_view role) {
  return errors::Unauthenticated(
      absl::StrCat("missing or invalid API key (Authorization: Bearer <key>); this needs a key with role ", std::string(role)));
}

absl::Status WrongRole(const Tenant& key, std::string_view needed) {
  return errors::Forbidden(absl::StrCat("the API key '", key.name(), "' may not call this: it needs role ", std::string(needed)));
}

}  // namespace

absl::StatusOr<std::shared_ptr<Tenant>> Authorize(const ApiKeys* keys, Access access, std::string_view authorization,
                                                  const AccessOptions& options, Listener listener) {
  const bool any_key = keys != nullptr && keys->size() > 0;
  switch (access) {
    case Access::kOpen:
      return std::shared_ptr<Tenant>();
    case Access::kMonitor: {
      if (!options.monitor_requires_key || listener == Listener::kAdminPort) return std::shared_ptr<Tenant>();
      if (!any_key || !keys->any_with_role(kRoleMonitor | kRoleAdmin)) {
        return errors::Forbidden(
            "--metrics-require-key is set but no key has role monitor or admin: mark one in --api-keys "
            "(role=monitor) or scrape the --admin-port listener");
      }
      std::shared_ptr<Tenant> key = keys->Find(authorization);
      if (key == nullptr) return Missing("monitor or admin");
      if (!key->has_role(kRoleMonitor | kRoleAdmin)) return WrongRole(*key, "monitor or admin");
      return key;
    }
    case Access::kTenant: {
      if (!any_key || !keys->any_with_role(kRoleTenant)) return std::shared_ptr<Tenant>();
      std::shared_ptr<Tenant> key = keys->Find(authorization);
      if (key == nullptr) return Missing("tenant");
      if (!key->has_role(kRoleTenant)) return WrongRole(*key, "tenant");
      return key;
    }
    case Access::kAdmin: {
      if (!any_key) return std::shared_ptr<Tenant>();
      if (!keys->any_with_role(kRoleAdmin)) {
        return errors::Forbidden(
            "the admin API is disabled: API keys are configured but none is an admin credential; set "
            "--admin-api-key-file (or --admin-api-key) or mark a key role=admin in the --api-keys file");
      }
      std::shared_ptr<Tenant> key = keys->Find(authorization);
      if (key == nullptr) return Missing("admin");
      if (!key->has_role(kRoleAdmin)) return WrongRole(*key, "admin");
      return key;
    }
    case Access::kUnset:
      break;
  }
  return errors::Internal("no access decision for this route (a route table entry without access)");
}

}  // namespace tide::guard
