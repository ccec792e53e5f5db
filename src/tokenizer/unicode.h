// Unicode helpers for the tokenizer, backed by utf8proc (no hand-made tables).
//
// Contract: pure functions, thread-safe, no allocation except into caller-owned strings.
// Strings are UTF-8; callers validate input once with IsValidUtf8 and the decoders below then
// assume valid UTF-8. Predicates reproduce the Rust definitions HuggingFace tokenizers relies on
// (char::is_whitespace, char::is_alphanumeric, char::to_lowercase, unicode_categories).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tide::tokenizer::unicode {

// True when `s` is well-formed UTF-8 (no surrogates, no overlongs, <= U+10FFFF).
bool IsValidUtf8(std::string_view s);

// Decodes the code point starting at s[*pos] (valid UTF-8 assumed) and advances *pos.
inline char32_t Next(std::string_view s, size_t* pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + *pos;
  unsigned char c = p[0];
  if (c < 0x80) {
    *pos += 1;
    return c;
  }
  if (c < 0xE0) {
    *pos += 2;
    return (char32_t(c & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if (c < 0xF0) {
    *pos += 3;
    return (char32_t(c & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  *pos += 4;
  return (char32_t(c & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) |
         (char32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

// Number of bytes of the UTF-8 sequence that starts with byte `lead`.
inline size_t SequenceLength(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// Byte length of the code point starting at `pos` of `s`; 1 for a sequence cut short by the end of
// `s` (so a scan over invalid UTF-8 always advances and never reads past the end).
inline size_t CharLength(std::string_view s, size_t pos) {
  const size_t len = SequenceLength(static_cast<unsigned char>(s[pos]));
  return pos + len <= s.size() ? len : 1;
}

// Byte length of the last code point of non-empty valid UTF-8 `s`.
inline size_t LastCharLength(std::string_view s) {
  size_t n = 1;
  while (n < s.size() && (static_cast<unsigned char>(s[s.size() - n]) & 0xC0) == 0x80) ++n;
  return n;
}

inline void Append(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Rust char::is_whitespace (the White_Space property: Zs, Zl, Zp, U+0009..U+000D, U+0085).
bool IsWhitespace(char32_t cp);
// Rust char::is_alphanumeric (letters and numbers).
bool IsAlphanumeric(char32_t cp);
// Rust char::is_numeric (Nd, Nl, No).
bool IsNumeric(char32_t cp);
// What HF's BertNormalizer drops as control characters: Cc, Cf, Co, Cs (unassigned code
// points are kept; measured against the reference).
bool IsOther(char32_t cp);
// ASCII punctuation or any Unicode P* category (HF's BERT punctuation test).
bool IsPunctuation(char32_t cp);
// General category Mark (Mn, Mc, Me): what HF's StripAccents normalizer removes.
bool IsCombiningMark(char32_t cp);
// Nonspacing marks (Mn) only: what HF's BertNormalizer strips as accents after NFD (it keeps Mc
// and Me; measured against the reference).
bool IsNonspacingMark(char32_t cp);
// Regex \w as Oniguruma defines it for Unicode: letters, marks, decimal digits, connectors.
bool IsWordChar(char32_t cp);
// The CJK ideograph blocks BERT surrounds with spaces.
bool IsChineseChar(char32_t cp);

// Appends Rust's char::to_lowercase(cp) (full mapping: U+0130 gives "i\u0307").
void AppendLowercase(char32_t cp, std::string* out);
// Appends the canonical decomposition (NFD) of one code point, in canonical order.
void AppendNfd(char32_t cp, std::string* out);

enum class NormalizationForm { kNfc, kNfd, kNfkc, kNfkd };
// Normalizes the whole string; `in` must be valid UTF-8.
void Normalize(std::string_view in, NormalizationForm form, std::string* out);

}  // namespace tide::tokenizer::unicode
