#include "tokenizer/unicode.h"

#include <cstdlib>

#include "utf8proc.h"

namespace tide::tokenizer::unicode {

bool IsValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    char32_t cp, min;
    if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

namespace {
inline utf8proc_category_t Category(char32_t cp) {
  return static_cast<utf8proc_category_t>(utf8proc_category(static_cast<utf8proc_int32_t>(cp)));
}
}  // namespace

bool IsWhitespace(char32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  if (cp == 0x85) return true;
  auto c = Category(cp);
  return c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL || c == UTF8PROC_CATEGORY_ZP;
}

bool IsNumeric(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  auto c = Category(cp);
  return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

bool IsAlphanumeric(char32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z');
  auto c = Category(cp);
  return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) || c == UTF8PROC_CATEGORY_ND ||
         c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

bool IsOther(char32_t cp) {
  auto c = Category(cp);
  return c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF || c == UTF8PROC_CATEGORY_CO ||
         c == UTF8PROC_CATEGORY_CS;
}

bool IsPunctuation(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
           (cp >= 123 && cp <= 126);
  }
  auto c = Category(cp);
  return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

bool IsCombiningMark(char32_t cp) {
  if (cp < 0x300) return false;
  auto c = Category(cp);
  return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME;
}

bool IsNonspacingMark(char32_t cp) {
  if (cp < 0x300) return false;
  return Category(cp) == UTF8PROC_CATEGORY_MN;
}

bool IsWordChar(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= '0' && cp <= '9') || ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') || cp == '_';
  }
  auto c = Category(cp);
  // Join_Control (ZWNJ, ZWJ) is part of \w in Unicode regex engines (UTS #18).
  if (cp == 0x200C || cp == 0x200D) return true;
  // Circled and squared Latin letters are So but Other_Alphabetic, hence word characters.
  if ((cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) ||
      (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189)) {
    return true;
  }
  return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) ||
         (c >= UTF8PROC_CATEGORY_MN && c <= UTF8PROC_CATEGORY_ME) || c == UTF8PROC_CATEGORY_ND ||
         c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_PC;
}

bool IsChineseChar(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

void AppendLowercase(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    return;
  }
  // The only unconditional multi-character lowercase mapping in SpecialCasing.txt; utf8proc
  // exposes simple case mappings only.
  if (cp == 0x130) {
    out->push_back('i');
    Append(0x307, out);
    return;
  }
  Append(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))), out);
}

void AppendNfd(char32_t cp, std::string* out) {
  if (cp < 0xC0) {
    Append(cp, out);
    return;
  }
  utf8proc_int32_t buf[32];
  int last_boundclass = 0;
  utf8proc_ssize_t n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), buf, 32,
                                               UTF8PROC_DECOMPOSE, &last_boundclass);
  if (n <= 0 || n > 32) {
    Append(cp, out);
    return;
  }
  for (utf8proc_ssize_t i = 0; i < n; ++i) Append(static_cast<char32_t>(buf[i]), out);
}

void Normalize(std::string_view in, NormalizationForm form, std::string* out) {
  out->clear();
  bool ascii = true;
  for (unsigned char c : in) {
    if (c >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) {  // ASCII is invariant under all four forms.
    out->assign(in);
    return;
  }
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalizationForm::kNfc: options |= UTF8PROC_COMPOSE; break;
    case NormalizationForm::kNfd: options |= UTF8PROC_DECOMPOSE; break;
    case NormalizationForm::kNfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalizationForm::kNfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* result = nullptr;
  utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(in.data()),
                   static_cast<utf8proc_ssize_t>(in.size()), &result,
                   static_cast<utf8proc_option_t>(options));
  if (n < 0 || result == nullptr) {
    out->assign(in);  // unreachable for valid UTF-8
  } else {
    out->assign(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
  }
  std::free(result);
}

}  // namespace tide::tokenizer::unicode
