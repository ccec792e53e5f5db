#include "tokenizer/normalizers.h"

#include <string>
#include <utility>
#include <vector>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/strings/str_cat.h"
#include "tokenizer/unicode.h"

namespace tide::tokenizer {
namespace {

using json = nlohmann::json;

// Per-thread output buffer; Normalize builds into it and swaps with the caller's string, so
// capacities circulate instead of being reallocated.
std::string& ThreadBuffer() {
  thread_local std::string buffer;
  buffer.clear();
  return buffer;
}

// BertNormalizer: every step maps one code point to a string independently of its neighbours
// (NFD + dropping all marks makes canonical reordering irrelevant), so the result for each BMP
// code point is precomputed once.
class BertNormalizer final : public Normalizer {
 public:
  explicit BertNormalizer(const BertNormalizerOptions& o)
      : clean_text_(o.clean_text),
        chinese_(o.handle_chinese_chars),
        strip_accents_(o.strip_accents.value_or(o.lowercase)),
        lowercase_(o.lowercase) {
    table_.resize(0x10000);
    std::string tmp;
    for (char32_t cp = 0; cp < 0x10000; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      tmp.clear();
      MapSlow(cp, &tmp);
      table_[cp] = (static_cast<uint32_t>(pool_.size()) << 8) | static_cast<uint32_t>(tmp.size());
      pool_ += tmp;
    }
  }

  void Normalize(std::string* text) const override {
    std::string& out = ThreadBuffer();
    out.reserve(text->size() + text->size() / 4 + 8);
    const std::string_view s = *text;
    size_t pos = 0;
    while (pos < s.size()) {
      char32_t cp = unicode::Next(s, &pos);
      if (cp < 0x10000) {
        uint32_t e = table_[cp];
        uint32_t len = e & 0xFF;
        if (len == 1) {
          out.push_back(pool_[e >> 8]);
        } else if (len) {
          out.append(pool_.data() + (e >> 8), len);
        }
      } else {
        MapSlow(cp, &out);
      }
    }
    text->swap(out);
  }

 private:
  void MapSlow(char32_t cp, std::string* out) const {
    if (clean_text_) {
      // HF filters control characters first, then maps whitespace: so U+000B and U+0085
      // (whitespace, but Cc) are dropped rather than turned into spaces.
      if (cp == 0 || cp == 0xFFFD) return;
      const bool tab_or_newline = cp == '\t' || cp == '\n' || cp == '\r';
      if (!tab_or_newline && unicode::IsOther(cp)) return;
      if (tab_or_newline || unicode::IsWhitespace(cp)) cp = ' ';
    }
    bool chinese = chinese_ && unicode::IsChineseChar(cp);
    if (chinese) out->push_back(' ');
    if (strip_accents_) {
      std::string nfd;
      unicode::AppendNfd(cp, &nfd);
      size_t p = 0;
      while (p < nfd.size()) {
        char32_t d = unicode::Next(nfd, &p);
        if (unicode::IsNonspacingMark(d)) continue;
        if (lowercase_) {
          unicode::AppendLowercase(d, out);
        } else {
          unicode::Append(d, out);
        }
      }
    } else if (lowercase_) {
      unicode::AppendLowercase(cp, out);
    } else {
      unicode::Append(cp, out);
    }
    if (chinese) out->push_back(' ');
  }

  bool clean_text_, chinese_, strip_accents_, lowercase_;
  std::vector<uint32_t> table_;  // (offset into pool_ << 8) | length
  std::string pool_;
};

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(unicode::NormalizationForm form) : form_(form) {}
  void Normalize(std::string* text) const override {
    std::string& out = ThreadBuffer();
    unicode::Normalize(*text, form_, &out);
    text->swap(out);
  }

 private:
  unicode::NormalizationForm form_;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  void Normalize(std::string* text) const override {
    std::string& out = ThreadBuffer();
    const std::string_view s = *text;
    size_t pos = 0;
    while (pos < s.size()) unicode::AppendLowercase(unicode::Next(s, &pos), &out);
    text->swap(out);
  }
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void Normalize(std::string* text) const override {
    const std::string_view s = *text;
    size_t begin = 0, end = s.size();
    if (left_) {
      while (begin < end) {
        size_t p = begin;
        if (!unicode::IsWhitespace(unicode::Next(s, &p))) break;
        begin = p;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t len = unicode::LastCharLength(s.substr(begin, end - begin));
        size_t p = end - len;
        if (!unicode::IsWhitespace(unicode::Next(s, &p))) break;
        end -= len;
      }
    }
    if (end < s.size()) text->resize(end);
    if (begin > 0) text->erase(0, begin);
  }

 private:
  bool left_, right_;
};

class StripAccentsNormalizer final : public Normalizer {
 public:
  void Normalize(std::string* text) const override {
    std::string& out = ThreadBuffer();
    const std::string_view s = *text;
    size_t pos = 0;
    while (pos < s.size()) {
      size_t start = pos;
      char32_t cp = unicode::Next(s, &pos);
      if (!unicode::IsCombiningMark(cp)) out.append(s.substr(start, pos - start));
    }
    text->swap(out);
  }
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prepend) : prepend_(std::move(prepend)) {}
  void Normalize(std::string* text) const override {
    if (!text->empty()) text->insert(0, prepend_);
  }

 private:
  std::string prepend_;
};

class ReplaceStringNormalizer final : public Normalizer {
 public:
  ReplaceStringNormalizer(std::string pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void Normalize(std::string* text) const override {
    if (pattern_.empty() || text->find(pattern_) == std::string::npos) return;
    std::string& out = ThreadBuffer();
    const std::string_view s = *text;
    size_t pos = 0;
    while (true) {
      size_t hit = s.find(pattern_, pos);
      if (hit == std::string_view::npos) break;
      out.append(s.substr(pos, hit - pos));
      out.append(content_);
      pos = hit + pattern_.size();
    }
    out.append(s.substr(pos));
    text->swap(out);
  }

 private:
  std::string pattern_, content_;
};

struct Pcre2CodeDeleter {
  void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};

class ReplaceRegexNormalizer final : public Normalizer {
 public:
  static absl::StatusOr<std::unique_ptr<Normalizer>> Create(const std::string& pattern,
                                                            std::string content) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset,
                                     nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      return absl::InvalidArgumentError(absl::StrCat("normalizer Replace: bad regex '", pattern,
                                                     "' at ", offset, ": ",
                                                     reinterpret_cast<const char*>(message)));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    return std::unique_ptr<Normalizer>(
        new ReplaceRegexNormalizer(std::unique_ptr<pcre2_code, Pcre2CodeDeleter>(code),
                                   std::move(content)));
  }

  void Normalize(std::string* text) const override {
    thread_local std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> match(
        pcre2_match_data_create(1, nullptr), pcre2_match_data_free);
    std::string& out = ThreadBuffer();
    const std::string_view s = *text;
    size_t pos = 0, copied = 0;
    bool any = false;
    while (pos <= s.size()) {
      int rc = pcre2_match(code_.get(), reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), pos,
                           PCRE2_NO_UTF_CHECK, match.get(), nullptr);
      if (rc < 0) break;
      PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match.get());
      size_t b = ov[0], e = ov[1];
      if (e == b) {  // empty match: skip one character, as regex engines' find_iter does
        if (b >= s.size()) break;
        pos = b + unicode::SequenceLength(static_cast<unsigned char>(s[b]));
        continue;
      }
      any = true;
      out.append(s.substr(copied, b - copied));
      out.append(content_);
      copied = pos = e;
    }
    if (!any) return;
    out.append(s.substr(copied));
    text->swap(out);
  }

 private:
  ReplaceRegexNormalizer(std::unique_ptr<pcre2_code, Pcre2CodeDeleter> code, std::string content)
      : code_(std::move(code)), content_(std::move(content)) {}
  std::unique_ptr<pcre2_code, Pcre2CodeDeleter> code_;
  std::string content_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  void Normalize(std::string* text) const override {
    for (const auto& step : steps_) step->Normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

absl::StatusOr<bool> GetBool(const json& j, const char* key, bool fallback,
                             std::string_view component) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) {
    return absl::InvalidArgumentError(
        absl::StrCat("normalizer ", std::string(component), ": '", key, "' must be a boolean"));
  }
  return it->get<bool>();
}

}  // namespace

std::unique_ptr<Normalizer> MakeBertNormalizer(const BertNormalizerOptions& options) {
  return std::make_unique<BertNormalizer>(options);
}

absl::StatusOr<std::unique_ptr<Normalizer>> MakeWordPieceFamilyNormalizer(const json& j) {
  const std::string type = j.value("type", "");
  if (type == "BertNormalizer") {
    BertNormalizerOptions o;
    auto clean = GetBool(j, "clean_text", true, type);
    auto chinese = GetBool(j, "handle_chinese_chars", true, type);
    auto lower = GetBool(j, "lowercase", true, type);
    if (!clean.ok()) return clean.status();
    if (!chinese.ok()) return chinese.status();
    if (!lower.ok()) return lower.status();
    o.clean_text = *clean;
    o.handle_chinese_chars = *chinese;
    o.lowercase = *lower;
    auto it = j.find("strip_accents");
    if (it != j.end() && !it->is_null()) {
      if (!it->is_boolean()) {
        return absl::InvalidArgumentError("normalizer BertNormalizer: 'strip_accents' must be a boolean or null");
      }
      o.strip_accents = it->get<bool>();
    }
    return MakeBertNormalizer(o);
  }
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(unicode::NormalizationForm::kNfc);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(unicode::NormalizationForm::kNfd);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(unicode::NormalizationForm::kNfkc);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(unicode::NormalizationForm::kNfkd);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
  if (type == "Strip") {
    auto left = GetBool(j, "strip_left", true, type);
    auto right = GetBool(j, "strip_right", true, type);
    if (!left.ok()) return left.status();
    if (!right.ok()) return right.status();
    return std::make_unique<StripNormalizer>(*left, *right);
  }
  if (type == "Prepend") {
    auto it = j.find("prepend");
    if (it == j.end() || !it->is_string()) {
      return absl::InvalidArgumentError("normalizer Prepend: 'prepend' must be a string");
    }
    return std::make_unique<PrependNormalizer>(it->get<std::string>());
  }
  if (type == "Replace") {
    auto pattern = j.find("pattern");
    auto content = j.find("content");
    if (pattern == j.end() || !pattern->is_object() || content == j.end() || !content->is_string()) {
      return absl::InvalidArgumentError(
          "normalizer Replace: needs 'pattern' {String|Regex} and a string 'content'");
    }
    if (auto s = pattern->find("String"); s != pattern->end() && s->is_string()) {
      return std::make_unique<ReplaceStringNormalizer>(s->get<std::string>(),
                                                       content->get<std::string>());
    }
    if (auto r = pattern->find("Regex"); r != pattern->end() && r->is_string()) {
      return ReplaceRegexNormalizer::Create(r->get<std::string>(), content->get<std::string>());
    }
    return absl::InvalidArgumentError("normalizer Replace: 'pattern' must hold String or Regex");
  }
  if (type == "Sequence") {
    auto it = j.find("normalizers");
    if (it == j.end() || !it->is_array()) {
      return absl::InvalidArgumentError("normalizer Sequence: 'normalizers' must be an array");
    }
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const auto& child : *it) {
      auto step = MakeNormalizer(child);
      if (!step.ok()) return step.status();
      steps.push_back(*std::move(step));
    }
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  if (type.empty()) return absl::InvalidArgumentError("normalizer: missing 'type'");
  return absl::UnimplementedError(absl::StrCat("normalizer ", type, ": not supported by tide"));
}

}  // namespace tide::tokenizer
