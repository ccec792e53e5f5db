#include "tracing/trace_context.h"

#include <set>
#include <vector>

namespace tide::tracing {
namespace {

constexpr size_t kVersion00Size = 55;  // 2 + 1 + 32 + 1 + 16 + 1 + 2
constexpr uint8_t kKnownFlags = 0x03;  // sampled, random (Trace Context Level 2)

bool IsOws(char c) { return c == ' ' || c == '\t'; }

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && IsOws(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsOws(s.back())) s.remove_suffix(1);
  return s;
}

int LowerHex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool IsLcAlpha(char c) { return c >= 'a' && c <= 'z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsKeyChar(char c) {
  return IsLcAlpha(c) || IsDigit(c) || c == '_' || c == '-' || c == '*' || c == '/';
}

// key = simple-key / multi-tenant-key
// simple-key = lcalpha 0*255( lcalpha / DIGIT / "_" / "-"/ "*" / "/" )
// multi-tenant-key = tenant-id "@" system-id
// tenant-id = ( lcalpha / DIGIT ) 0*240( lcalpha / DIGIT / "_" / "-"/ "*" / "/" )
// system-id = lcalpha 0*13( lcalpha / DIGIT / "_" / "-"/ "*" / "/" )
bool ValidKey(std::string_view key) {
  const size_t at = key.find('@');
  auto rest_ok = [](std::string_view s) {
    for (char c : s.substr(1)) {
      if (!IsKeyChar(c)) return false;
    }
    return true;
  };
  if (at == std::string_view::npos) {
    return !key.empty() && key.size() <= 256 && IsLcAlpha(key[0]) && rest_ok(key);
  }
  const std::string_view tenant = key.substr(0, at);
  const std::string_view system = key.substr(at + 1);
  return !tenant.empty() && tenant.size() <= 241 && (IsLcAlpha(tenant[0]) || IsDigit(tenant[0])) &&
         rest_ok(tenant) && !system.empty() && system.size() <= 14 && IsLcAlpha(system[0]) &&
         rest_ok(system);
}

// value = 0*255(chr) nblk-chr; chr = %x20 / nblk-chr; nblk-chr = %x21-2B / %x2D-3C / %x3E-7E
bool ValidValue(std::string_view value) {
  if (value.empty() || value.size() > 256 || value.back() == ' ') return false;
  for (char c : value) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7E || c == ',' || c == '=') return false;
  }
  return true;
}

}  // namespace

std::optional<SpanContext> ParseTraceparent(std::string_view header) {
  const std::string_view s = TrimOws(header);
  if (s.size() < kVersion00Size) return std::nullopt;
  const int v_hi = LowerHex(s[0]);
  const int v_lo = LowerHex(s[1]);
  if (v_hi < 0 || v_lo < 0) return std::nullopt;
  const int version = v_hi << 4 | v_lo;
  if (version == 0xff) return std::nullopt;
  if (version == 0 && s.size() != kVersion00Size) return std::nullopt;
  if (version > 0 && s.size() > kVersion00Size && s[kVersion00Size] != '-') return std::nullopt;
  if (s[2] != '-' || s[35] != '-' || s[52] != '-') return std::nullopt;
  const std::optional<TraceId> trace_id = TraceIdFromHex(s.substr(3, 32));
  const std::optional<SpanId> span_id = SpanIdFromHex(s.substr(36, 16));
  const int f_hi = LowerHex(s[53]);
  const int f_lo = LowerHex(s[54]);
  if (!trace_id || !span_id || f_hi < 0 || f_lo < 0) return std::nullopt;
  if (!IsValid(*trace_id) || !IsValid(*span_id)) return std::nullopt;
  SpanContext context;
  context.trace_id = *trace_id;
  context.span_id = *span_id;
  context.trace_flags = static_cast<uint8_t>((f_hi << 4 | f_lo) & kKnownFlags);
  context.remote = true;
  return context;
}

std::optional<std::string> ParseTracestate(std::string_view header) {
  std::string canonical;
  std::set<std::string_view> keys;
  size_t members = 0;
  size_t start = 0;
  while (start <= header.size()) {
    size_t comma = header.find(',', start);
    if (comma == std::string_view::npos) comma = header.size();
    const std::string_view member = TrimOws(header.substr(start, comma - start));
    start = comma + 1;
    if (member.empty()) continue;  // empty list-members are allowed
    const size_t eq = member.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    const std::string_view key = member.substr(0, eq);
    const std::string_view value = member.substr(eq + 1);
    if (!ValidKey(key) || !ValidValue(value)) return std::nullopt;
    if (!keys.insert(key).second) return std::nullopt;  // a key twice
    if (++members > kMaxTracestateMembers) return std::nullopt;
    if (!canonical.empty()) canonical += ',';
    canonical.append(member);
  }
  return canonical;
}

std::string FormatTraceparent(const SpanContext& context) {
  static constexpr char kHexDigits[] = "0123456789abcdef";
  std::string out = "00-";
  out += ToHex(context.trace_id);
  out += '-';
  out += ToHex(context.span_id);
  out += '-';
  out += kHexDigits[context.trace_flags >> 4];
  out += kHexDigits[context.trace_flags & 0xF];
  return out;
}

std::optional<SpanContext> Extract(std::optional<std::string_view> traceparent,
                                   std::optional<std::string_view> tracestate,
                                   TraceContextCounters* counters) {
  if (!traceparent) return std::nullopt;
  std::optional<SpanContext> context = ParseTraceparent(*traceparent);
  if (!context) {
    if (counters) counters->malformed_traceparent.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  if (tracestate) {
    std::optional<std::string> state = ParseTracestate(*tracestate);
    if (state) {
      context->trace_state = std::move(*state);
    } else if (counters) {
      counters->malformed_tracestate.fetch_add(1, std::memory_order_relaxed);
    }
  }
  return context;
}

}  // namespace tide::tracing
