// tide common ASCII helpers for protocol text (HTTP header names and tokens), where case folding is
// ASCII-only by definition (RFC 9110) and locale must not matter.
//
// Contract: pure, constexpr, thread-safe; bytes outside A-Z compare as themselves.
#pragma once

#include <cstddef>
#include <string_view>

namespace tide {

constexpr char AsciiToLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

constexpr bool AsciiEqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (AsciiToLower(a[i]) != AsciiToLower(b[i])) return false;
  }
  return true;
}

static_assert(AsciiEqualsIgnoreCase("Content-Length", "content-length"));
static_assert(!AsciiEqualsIgnoreCase("Content-Length", "content-lengtH2"));
static_assert(!AsciiEqualsIgnoreCase("[", "{"));  // '[' + 32 == '{': only A-Z fold

}  // namespace tide
