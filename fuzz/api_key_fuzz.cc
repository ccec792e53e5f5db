// libFuzzer target for the Authorization header check (untrusted input on every inference request).
// Oracle: ApiKeyMatches agrees with a plain, obviously-correct parser using ordinary string
// equality, and ConstantTimeEquals agrees with operator==.
//
//   cmake -S . -B build-fuzz -G Ninja -DTIDE_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++
//   ninja -C build-fuzz api_key_fuzz && build-fuzz/fuzz/api_key_fuzz -max_total_time=60
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "guard/api_key.h"

namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

bool ReferenceMatches(std::string_view header, std::string_view key) {
  if (key.empty()) return false;
  size_t begin = 0;
  size_t end = header.size();
  while (begin < end && IsSpace(header[begin])) ++begin;
  while (end > begin && IsSpace(header[end - 1])) --end;
  const std::string_view value = header.substr(begin, end - begin);
  if (value.size() < 7) return false;
  for (size_t i = 0; i < 6; ++i) {
    const char c = value[i];
    const char lower = (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
    if (lower != "bearer"[i]) return false;
  }
  if (!IsSpace(value[6])) return false;
  size_t token_begin = 6;
  while (token_begin < value.size() && IsSpace(value[token_begin])) ++token_begin;
  const std::string_view token = value.substr(token_begin);
  return !token.empty() && token == key;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The first byte splits the input into an expected key and a header value.
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t split = data[0] % (rest.size() + 1);
  const std::string_view key = rest.substr(0, split);
  const std::string_view header = rest.substr(split);
  if (tide::guard::ApiKeyMatches(header, key) != ReferenceMatches(header, key)) std::abort();
  if (tide::guard::ConstantTimeEquals(header, key) != (header == key)) std::abort();
  return 0;
}
