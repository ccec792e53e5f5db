#include "guard/api_key.h"

#include <cstddef>
#include <cstdint>


namespace tide::guard {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

char AsciiLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// True when `s` starts with `lower_prefix` (given in lower case), ignoring ASCII case.
bool StartsWithIgnoreCase(std::string_view s, std::string_view lower_prefix) {
  if (s.size() < lower_prefix.size()) return false;
  for (size_t i = 0; i < lower_prefix.size(); ++i) {
    if (AsciiLower(s[i]) != lower_prefix[i]) return false;
  }
  return true;
}

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

bool ConstantTimeEquals(std::string_view presented, std::string_view expected) {
  // Accumulate differences over every byte of `expected`; a shorter `presented` is compared as if
  // padded, and the length difference is folded in, so no branch depends on the content.
  const size_t n = expected.size();
  const size_t m = presented.size();
  volatile uint8_t difference = static_cast<uint8_t>(m != n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t a = i < m ? static_cast<uint8_t>(presented[i]) : 0;
    const uint8_t b = static_cast<uint8_t>(expected[i]);
    difference = difference | static_cast<uint8_t>(a ^ b);
  }
  return difference == 0;
}

std::string_view BearerToken(std::string_view authorization_header) {
  std::string_view value = TrimSpaces(authorization_header);
  constexpr std::string_view kScheme = "bearer";
  if (value.size() <= kScheme.size() || !StartsWithIgnoreCase(value, kScheme) ||
      !IsSpace(value[kScheme.size()])) {
    return {};
  }
  return TrimSpaces(value.substr(kScheme.size()));
}

bool ApiKeyMatches(std::string_view authorization_header, std::string_view expected_key) {
  if (expected_key.empty()) return false;
  const std::string_view token = BearerToken(authorization_header);
  if (token.empty()) return false;
  return ConstantTimeEquals(token, expected_key);
}

}  // namespace tide::guard
