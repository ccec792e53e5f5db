#include "tokenizer/precompiled.h"

#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/unicode.h"
#include "utf8proc.h"

namespace tide::tokenizer {
namespace {

// Darts-clone unit layout (what SentencePiece writes).
inline uint32_t UnitOffset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
inline bool UnitHasLeaf(uint32_t u) { return ((u >> 8) & 1u) == 1u; }
inline uint32_t UnitValue(uint32_t u) { return u & ((1u << 31) - 1); }
inline uint32_t UnitLabel(uint32_t u) { return u & ((1u << 31) | 0xFFu); }

// Decodes one code point at s[pos]; returns its byte length, or 0 when the bytes there are not a
// complete, well-formed sequence (then the caller treats the single byte as opaque).
size_t DecodeAt(std::string_view s, size_t pos, int32_t* cp) {
  utf8proc_int32_t c = -1;
  utf8proc_ssize_t n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + pos),
                                        static_cast<utf8proc_ssize_t>(s.size() - pos), &c);
  if (n <= 0 || c < 0) return 0;
  *cp = c;
  return static_cast<size_t>(n);
}

}  // namespace

absl::StatusOr<PrecompiledCharsmap> PrecompiledCharsmap::Parse(std::string_view blob) {
  if (blob.size() < 4) {
    return absl::InvalidArgumentError(
        "normalizer Precompiled: precompiled_charsmap is shorter than its 4-byte header");
  }
  const auto* b = reinterpret_cast<const unsigned char*>(blob.data());
  const uint32_t trie_size = uint32_t(b[0]) | (uint32_t(b[1]) << 8) | (uint32_t(b[2]) << 16) |
                             (uint32_t(b[3]) << 24);
  const size_t num_units = trie_size / 4;
  if (num_units == 0 || num_units > (blob.size() - 4) / 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "normalizer Precompiled: precompiled_charsmap declares a trie of ", trie_size,
        " bytes but holds ", blob.size() - 4));
  }
  PrecompiledCharsmap map;
  map.units_.resize(num_units);
  for (size_t i = 0; i < num_units; ++i) {
    const unsigned char* p = b + 4 + 4 * i;
    map.units_[i] = uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) |
                    (uint32_t(p[3]) << 24);
  }
  map.normalized_.assign(blob.substr(4 + 4 * num_units));
  if (!unicode::IsValidUtf8(map.normalized_)) {
    return absl::InvalidArgumentError(
        "normalizer Precompiled: the replacement strings of precompiled_charsmap are not UTF-8");
  }
  return map;
}

std::optional<std::string_view> PrecompiledCharsmap::Transform(std::string_view chunk) const {
  const size_t size = units_.size();
  size_t pos = UnitOffset(units_[0]);
  for (unsigned char c : chunk) {
    if (c == 0) break;
    pos ^= c;
    if (pos >= size) return std::nullopt;
    const uint32_t unit = units_[pos];
    if (UnitLabel(unit) != c) return std::nullopt;
    pos ^= UnitOffset(unit);
    if (UnitHasLeaf(unit)) {
      // The first (shortest) key found wins, as in spm_precompiled.
      if (pos >= size) return std::nullopt;
      const size_t index = UnitValue(units_[pos]);
      if (index > normalized_.size()) return std::nullopt;
      if (index < normalized_.size() &&
          (static_cast<unsigned char>(normalized_[index]) & 0xC0) == 0x80) {
        return std::nullopt;  // not a character boundary: a corrupt value
      }
      std::string_view rest(normalized_);
      rest.remove_prefix(index);
      const size_t end = rest.find('\0');
      return end == std::string_view::npos ? rest : rest.substr(0, end);
    }
  }
  return std::nullopt;
}

PrecompiledNormalizer::PrecompiledNormalizer(PrecompiledCharsmap charsmap)
    : charsmap_(std::move(charsmap)) {
  for (int c = 1; c < 128; ++c) {
    const char ch = static_cast<char>(c);
    if (auto r = charsmap_.Transform(std::string_view(&ch, 1))) ascii_[c] = std::string(*r);
  }
}

absl::StatusOr<std::unique_ptr<PrecompiledNormalizer>> PrecompiledNormalizer::Create(
    std::string_view blob) {
  auto map = PrecompiledCharsmap::Parse(blob);
  if (!map.ok()) return map.status();
  return std::unique_ptr<PrecompiledNormalizer>(new PrecompiledNormalizer(*std::move(map)));
}

void PrecompiledNormalizer::AppendGrapheme(std::string_view grapheme, std::string* out) const {
  if (grapheme.size() < 6) {
    if (auto r = charsmap_.Transform(grapheme)) {
      out->append(*r);
      return;
    }
  }
  size_t pos = 0;
  while (pos < grapheme.size()) {
    int32_t cp;
    size_t len = DecodeAt(grapheme, pos, &cp);
    if (len == 0) len = 1;
    const std::string_view ch = grapheme.substr(pos, len);
    if (auto r = charsmap_.Transform(ch)) {
      out->append(*r);
    } else {
      out->append(ch);
    }
    pos += len;
  }
}

void PrecompiledNormalizer::Normalize(std::string* text) const {
  thread_local std::string out;
  out.clear();
  out.reserve(text->size() + text->size() / 4);
  const std::string_view s(*text);
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      // An ASCII code point is a grapheme of its own unless a non-ASCII code point (e.g. a
      // combining mark) follows it, or it is the CR of a CRLF pair.
      const bool next_ascii = i + 1 >= n || static_cast<unsigned char>(s[i + 1]) < 0x80;
      if (next_ascii && !(b == '\r' && i + 1 < n && s[i + 1] == '\n')) {
        if (b == 0) {
          out.push_back('\0');  // the trie never matches NUL
        } else if (ascii_[b]) {
          out.append(*ascii_[b]);
        } else {
          out.push_back(static_cast<char>(b));
        }
        ++i;
        continue;
      }
    }
    int32_t cp1;
    size_t len = DecodeAt(s, i, &cp1);
    if (len == 0) {  // invalid byte: copied as is
      out.push_back(s[i]);
      ++i;
      continue;
    }
    size_t j = i + len;
    utf8proc_int32_t state = 0;
    while (j < n) {
      int32_t cp2;
      const size_t len2 = DecodeAt(s, j, &cp2);
      if (len2 == 0 || utf8proc_grapheme_break_stateful(cp1, cp2, &state)) break;
      cp1 = cp2;
      j += len2;
    }
    AppendGrapheme(s.substr(i, j - i), &out);
    i = j;
  }
  text->swap(out);
}

absl::StatusOr<std::unique_ptr<Normalizer>> MakePrecompiledNormalizer(const nlohmann::json& json) {
  auto it = json.find("precompiled_charsmap");
  if (it == json.end() || !it->is_string()) {
    return absl::InvalidArgumentError(
        "normalizer Precompiled: \"precompiled_charsmap\" must be a base64 string");
  }
  std::string blob;
  if (!absl::Base64Unescape(it->get_ref<const std::string&>(), &blob)) {
    return absl::InvalidArgumentError("normalizer Precompiled: precompiled_charsmap is not base64");
  }
  auto normalizer = PrecompiledNormalizer::Create(blob);
  if (!normalizer.ok()) return normalizer.status();
  return std::unique_ptr<Normalizer>(*std::move(normalizer));
}

}  // namespace tide::tokenizer
