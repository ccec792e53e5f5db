#include "common/error_echo.h"

#include <cstdint>

namespace tide {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void AppendByteEscape(std::string* out, unsigned char c) {
  out->append("\\x");
  out->push_back(kHex[c >> 4]);
  out->push_back(kHex[c & 0xF]);
}

void AppendCodePointEscape(std::string* out, uint32_t cp) {
  out->append("\\u");
  for (int shift = 12; shift >= 0; shift -= 4) out->push_back(kHex[(cp >> shift) & 0xF]);
}

// Length of the well-formed UTF-8 sequence at text[i] (2..4) and its code point, or 0 when the
// bytes there are not one (a stray continuation byte, an overlong form, a surrogate, a code point
// above U+10FFFF, or a sequence cut short).
size_t DecodeUtf8(std::string_view text, size_t i, uint32_t* cp) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char lead = byte(0);
  size_t n = 0;
  uint32_t min = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2, min = 0x80, *cp = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3, min = 0x800, *cp = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4, min = 0x10000, *cp = lead & 0x07;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(k) & 0xC0) != 0x80) return 0;
    *cp = (*cp << 6) | (byte(k) & 0x3F);
  }
  if (*cp < min || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF)) return 0;
  return n;
}

// Code points that pass UTF-8 validation but still act as line breaks or reorder what a reader sees.
bool IsInvisibleControl(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 || cp == 0x200E || cp == 0x200F ||
         (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

std::string EscapeForLog(std::string_view text, size_t max_bytes) {
  bool truncated = false;
  if (text.size() > max_bytes) {
    size_t cut = max_bytes;
    // Back off over at most 3 continuation bytes (one UTF-8 character); more are not UTF-8 anyway.
    while (cut > 0 && max_bytes - cut < 3 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    text = text.substr(0, cut);
    truncated = true;
  }
  std::string out;
  out.reserve(text.size() + (truncated ? kTruncatedMarker.size() : 0));
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      switch (c) {
        case '\\': out.append("\\\\"); break;
        case '"': out.append("\\\""); break;
        case '\n': out.append("\\n"); break;
        case '\r': out.append("\\r"); break;
        case '\t': out.append("\\t"); break;
        default:
          if (c < 0x20 || c == 0x7F) {
            AppendByteEscape(&out, c);
          } else {
            out.push_back(static_cast<char>(c));
          }
      }
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const size_t n = DecodeUtf8(text, i, &cp);
    if (n == 0) {
      AppendByteEscape(&out, c);
      ++i;
    } else if (IsInvisibleControl(cp)) {
      AppendCodePointEscape(&out, cp);
      i += n;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  if (truncated) out.append(kTruncatedMarker);
  return out;
}

}  // namespace tide
