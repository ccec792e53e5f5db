#include "tracing/span_context.h"

#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

namespace tide::tracing {
namespace {

constexpr char kHex[] = "0123456789abcdef";

template <size_t N>
bool AllZero(const std::array<uint8_t, N>& id) {
  for (uint8_t b : id) {
    if (b != 0) return false;
  }
  return true;
}

template <size_t N>
std::string Hex(const std::array<uint8_t, N>& id) {
  std::string out(2 * N, '0');
  for (size_t i = 0; i < N; ++i) {
    out[2 * i] = kHex[id[i] >> 4];
    out[2 * i + 1] = kHex[id[i] & 0xF];
  }
  return out;
}

int LowerHexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

template <size_t N>
std::optional<std::array<uint8_t, N>> FromHex(std::string_view hex) {
  if (hex.size() != 2 * N) return std::nullopt;
  std::array<uint8_t, N> id{};
  for (size_t i = 0; i < N; ++i) {
    const int hi = LowerHexDigit(hex[2 * i]);
    const int lo = LowerHexDigit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    id[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return id;
}

uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// xoshiro256** (Blackman, Vigna), one per thread.
struct Xoshiro {
  uint64_t s[4];
  Xoshiro() {
    std::random_device device;
    uint64_t seed = (static_cast<uint64_t>(device()) << 32) ^ device();
    seed ^= std::hash<std::thread::id>{}(std::this_thread::get_id());
    seed ^= static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    for (uint64_t& word : s) word = SplitMix64(seed);
  }
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t Next() {
    const uint64_t result = Rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = Rotl(s[3], 45);
    return result;
  }
};

Xoshiro& ThreadGenerator() {
  thread_local Xoshiro generator;
  return generator;
}

}  // namespace

bool IsValid(const TraceId& id) { return !AllZero(id); }
bool IsValid(const SpanId& id) { return !AllZero(id); }
std::string ToHex(const TraceId& id) { return Hex(id); }
std::string ToHex(const SpanId& id) { return Hex(id); }
std::optional<TraceId> TraceIdFromHex(std::string_view hex) { return FromHex<16>(hex); }
std::optional<SpanId> SpanIdFromHex(std::string_view hex) { return FromHex<8>(hex); }

uint64_t IdGenerator::Next64() { return ThreadGenerator().Next(); }

TraceId IdGenerator::NewTraceId() {
  TraceId id;
  do {
    const uint64_t hi = Next64();
    const uint64_t lo = Next64();
    std::memcpy(id.data(), &hi, 8);
    std::memcpy(id.data() + 8, &lo, 8);
  } while (!IsValid(id));
  return id;
}

SpanId IdGenerator::NewSpanId() {
  SpanId id;
  do {
    const uint64_t v = Next64();
    std::memcpy(id.data(), &v, 8);
  } while (!IsValid(id));
  return id;
}

}  // namespace tide::tracing
