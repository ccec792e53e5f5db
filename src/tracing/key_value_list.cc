#include "tracing/key_value_list.h"

#include "common/absl_view.h"
#include "absl/strings/str_cat.h"

namespace tide::tracing {
namespace {

using common::AbslView;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool PercentDecode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = HexValue(in[i + 1]);
    const int lo = HexValue(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi << 4 | lo));
    i += 2;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseKeyValueList(std::string_view text,
                                                                                  std::string_view what) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view member = Trim(text.substr(start, comma - start));
    start = comma + 1;
    if (member.empty()) continue;
    const size_t eq = member.find('=');
    if (eq == std::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(AbslView(what), ": \"", AbslView(member), "\" is not key=value"));
    }
    const std::string_view key = Trim(member.substr(0, eq));
    if (key.empty()) return absl::InvalidArgumentError(absl::StrCat(AbslView(what), ": \"", AbslView(member), "\" has no key"));
    std::string value;
    if (!PercentDecode(Trim(member.substr(eq + 1)), &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(AbslView(what), ": \"", AbslView(member), "\" has a bad percent escape (use %XX)"));
    }
    bool replaced = false;
    for (auto& [k, v] : out) {
      if (k == key) {
        v = value;
        replaced = true;
      }
    }
    if (!replaced) out.emplace_back(std::string(key), std::move(value));
  }
  return out;
}

}  // namespace tide::tracing
