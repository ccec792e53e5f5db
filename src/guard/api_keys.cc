#include "guard/api_keys.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "guard/access.h"
#include "guard/api_key.h"

namespace tide::guard {

namespace {

bool IsKeyChar(char c) { return c > ' ' && c < 0x7f && c != '#'; }

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-';
}

// `text` split at any of `separators`, empty pieces skipped.
std::vector<std::string_view> Split(std::string_view text, std::string_view separators) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find_first_of(separators, start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool ParseNumber(std::string_view text, double* out) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(v) || v < 0) return false;
  *out = v;
  return true;
}

bool ParseCount(std::string_view text, int64_t* out) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < 0) return false;
  *out = v;
  return true;
}

}  // namespace

absl::Status ApiKeys::AddEntry(std::string key, std::string name, const KeyQuota& quota, KeyPolicy policy,
                               const Clock* clock) {
  for (const Entry& e : entries_) {
    if (e.key == key) return absl::InvalidArgumentError(absl::StrCat("a key is listed twice (second: name=", name, ")"));
    if (e.tenant->name() == name) return absl::InvalidArgumentError(absl::StrCat("name=", name, " is used twice"));
  }
  roles_present_ |= policy.roles;
  entries_.push_back(Entry{std::move(key), std::make_shared<Tenant>(std::move(name), quota, clock, policy)});
  return absl::OkStatus();
}

namespace {

// `tenant,admin` -> role bits; 0 when a role is unknown or the list is empty.
uint8_t ParseRoles(std::string_view text) {
  uint8_t roles = 0;
  if (text.empty() || text.front() == ',' || text.back() == ',' || text.find(",,") != std::string_view::npos) return 0;
  for (std::string_view role : Split(text, ",")) {
    if (role == "tenant") {
      roles |= kRoleTenant;
    } else if (role == "admin") {
      roles |= kRoleAdmin;
    } else if (role == "monitor") {
      roles |= kRoleMonitor;
    } else {
      return 0;
    }
  }
  return roles;
}

}  // namespace

absl::StatusOr<std::shared_ptr<ApiKeys>> ApiKeys::Parse(std::string_view text, std::string_view source,
                                                        const Clock* clock) {
  auto keys = std::shared_ptr<ApiKeys>(new ApiKeys());
  int line_number = 0;
  const std::string where(source);
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    auto fail = [&](const std::string& what) {
      return absl::InvalidArgumentError(absl::StrCat(where, ":", line_number, ": ", what));
    };
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    std::vector<std::string_view> fields = Split(line, " \t\r");
    if (fields.empty()) continue;
    const std::string_view key = fields[0];
    for (char c : key) {
      if (!IsKeyChar(c)) return fail("the key has a character that is not printable ASCII");
    }
    std::string name;
    KeyQuota quota;
    KeyPolicy policy;
    for (size_t i = 1; i < fields.size(); ++i) {
      const size_t eq = fields[i].find('=');
      if (eq == std::string_view::npos) {
        return fail(absl::StrCat("expected attribute=value, got '", std::string(fields[i].substr(0, 64)), "'"));
      }
      const std::string_view attribute = fields[i].substr(0, eq);
      const std::string_view value = fields[i].substr(eq + 1);
      if (attribute == "name") {
        if (value.empty() || value.size() > 64) return fail("name must have 1 to 64 characters");
        for (char c : value) {
          if (!IsNameChar(c)) return fail("name may hold only letters, digits, '_', '.' and '-'");
        }
        name = std::string(value);
      } else if (attribute == "role") {
        policy.roles = ParseRoles(value);
        if (policy.roles == 0) return fail("role must be tenant, admin or monitor (or several, comma-separated)");
      } else if (attribute == "max_priority") {
        int64_t level = 0;
        if (!ParseCount(value, &level) || level < 1 || level > 1000000) {
          return fail("max_priority must be an integer >= 1 (1 = the highest priority)");
        }
        policy.max_priority = static_cast<int>(level);
      } else if (attribute == "requests_per_second") {
        if (!ParseNumber(value, &quota.requests_per_second)) return fail("requests_per_second must be a number >= 0");
      } else if (attribute == "pairs_per_second") {
        if (!ParseNumber(value, &quota.pairs_per_second)) return fail("pairs_per_second must be a number >= 0");
      } else if (attribute == "max_concurrent") {
        if (!ParseCount(value, &quota.max_concurrent)) return fail("max_concurrent must be an integer >= 0");
      } else {
        return fail(absl::StrCat("unknown attribute '", std::string(attribute.substr(0, 64)),
                                 "' (known: name, role, requests_per_second, pairs_per_second, max_concurrent, max_priority)"));
      }
    }
    if (name.empty()) return fail("name=NAME is required (it labels metrics and logs instead of the key)");
    if (absl::Status s = keys->AddEntry(std::string(key), name, quota, policy, clock); !s.ok()) {
      return fail(std::string(s.message()));
    }
  }
  if (keys->entries_.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": no keys"));
  return keys;
}

absl::StatusOr<std::shared_ptr<ApiKeys>> ApiKeys::Load(const std::filesystem::path& file, const Clock* clock) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read API keys file ", file.string()));
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), file.string(), clock);
}

absl::StatusOr<std::shared_ptr<ApiKeys>> ApiKeys::WithKey(std::shared_ptr<ApiKeys> keys, std::string key,
                                                          std::string name, uint8_t roles, std::string_view what,
                                                          const Clock* clock) {
  auto out = std::shared_ptr<ApiKeys>(new ApiKeys());
  if (keys != nullptr) {
    out->entries_ = keys->entries_;
    out->roles_present_ = keys->roles_present_;
  }
  if (key.empty()) return absl::InvalidArgumentError(absl::StrCat(std::string(what), ": the key is empty"));
  for (char c : key) {
    if (!IsKeyChar(c)) {
      return absl::InvalidArgumentError(absl::StrCat(std::string(what), ": the key has a character that is not printable ASCII"));
    }
  }
  KeyPolicy policy;
  policy.roles = roles;
  if (absl::Status s = out->AddEntry(std::move(key), std::move(name), KeyQuota{}, policy, clock); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(what), ": ", s.message()));
  }
  return out;
}

int64_t ClampPriority(const Tenant* tenant, int64_t requested) {
  if (tenant == nullptr || requested <= 0) return requested;
  if (tenant->max_priority() <= 0) return 0;
  return std::max<int64_t>(requested, tenant->max_priority());
}

std::shared_ptr<Tenant> ApiKeys::Find(std::string_view authorization) const {
  const std::string_view token = BearerToken(authorization);
  if (token.empty()) return nullptr;
  std::shared_ptr<Tenant> found;
  for (const Entry& e : entries_) {
    // Every key is compared, whichever matched.
    const bool match = ConstantTimeEquals(token, e.key);
    if (match) found = e.tenant;
  }
  return found;
}

std::vector<std::string> ApiKeys::names() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) out.push_back(e.tenant->name());
  return out;
}

}  // namespace tide::guard
