#include "guard/api_keys.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
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

absl::Status ApiKeys::AddEntry(std::string key, std::string name, const KeyQuota& quota, const Clock* clock) {
  for (const Entry& e : entries_) {
    if (e.key == key) return absl::InvalidArgumentError(absl::StrCat("a key is listed twice (second: name=", name, ")"));
    if (e.tenant->name() == name) return absl::InvalidArgumentError(absl::StrCat("name=", name, " is used twice"));
  }
  entries_.push_back(Entry{std::move(key), std::make_shared<Tenant>(std::move(name), quota, clock)});
  return absl::OkStatus();
}

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
      } else if (attribute == "requests_per_second") {
        if (!ParseNumber(value, &quota.requests_per_second)) return fail("requests_per_second must be a number >= 0");
      } else if (attribute == "pairs_per_second") {
        if (!ParseNumber(value, &quota.pairs_per_second)) return fail("pairs_per_second must be a number >= 0");
      } else if (attribute == "max_concurrent") {
        if (!ParseCount(value, &quota.max_concurrent)) return fail("max_concurrent must be an integer >= 0");
      } else {
        return fail(absl::StrCat("unknown attribute '", std::string(attribute.substr(0, 64)),
                                 "' (known: name, requests_per_second, pairs_per_second, max_concurrent)"));
      }
    }
    if (name.empty()) return fail("name=NAME is required (it labels metrics and logs instead of the key)");
    if (absl::Status s = keys->AddEntry(std::string(key), name, quota, clock); !s.ok()) return fail(std::string(s.message()));
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

absl::StatusOr<std::shared_ptr<ApiKeys>> ApiKeys::WithSingleKey(std::shared_ptr<ApiKeys> file_keys,
                                                                std::string single_key, const Clock* clock) {
  auto keys = std::shared_ptr<ApiKeys>(new ApiKeys());
  if (file_keys != nullptr) keys->entries_ = file_keys->entries_;
  if (absl::Status s = keys->AddEntry(std::move(single_key), "default", KeyQuota{}, clock); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--api-key beside --api-keys: ", s.message()));
  }
  return keys;
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
