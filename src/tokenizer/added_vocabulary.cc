#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "tokenizer/unicode.h"

namespace tide::tokenizer {
namespace {

bool IsWordBoundaryChar(char32_t cp) { return unicode::IsWordChar(cp); }

bool EndsWithWord(std::string_view s) {
  if (s.empty()) return false;
  size_t p = s.size() - unicode::LastCharLength(s);
  return IsWordBoundaryChar(unicode::Next(s, &p));
}

bool StartsWithWord(std::string_view s) {
  if (s.empty()) return false;
  size_t p = 0;
  return IsWordBoundaryChar(unicode::Next(s, &p));
}

// Byte index where the whitespace run at the end of `s` starts.
size_t SpaceLeftmostAtEnd(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t len = unicode::LastCharLength(s.substr(0, end));
    size_t p = end - len;
    if (!unicode::IsWhitespace(unicode::Next(s, &p))) break;
    end -= len;
  }
  return end;
}

// Byte length of the whitespace run at the start of `s`.
size_t SpaceRightmostAtStart(std::string_view s) {
  size_t p = 0;
  while (p < s.size()) {
    size_t q = p;
    if (!unicode::IsWhitespace(unicode::Next(s, &q))) break;
    p = q;
  }
  return p;
}

}  // namespace

absl::StatusOr<std::vector<AddedToken>> AddedVocabulary::ParseJson(const nlohmann::json& j) {
  std::vector<AddedToken> tokens;
  if (j.is_null()) return tokens;
  if (!j.is_array()) return absl::InvalidArgumentError("added_tokens: must be an array");
  for (const auto& item : j) {
    if (!item.is_object() || !item.contains("content") || !item["content"].is_string() ||
        !item.contains("id") || !item["id"].is_number_integer()) {
      return absl::InvalidArgumentError("added_tokens: each entry needs a string content and an id");
    }
    AddedToken t;
    t.content = item["content"].get<std::string>();
    t.id = item["id"].get<int64_t>();
    auto flag = [&](const char* key, bool fallback) {
      auto it = item.find(key);
      return it != item.end() && it->is_boolean() ? it->get<bool>() : fallback;
    };
    t.single_word = flag("single_word", false);
    t.lstrip = flag("lstrip", false);
    t.rstrip = flag("rstrip", false);
    t.special = flag("special", false);
    t.normalized = flag("normalized", !t.special);
    tokens.push_back(std::move(t));
  }
  return tokens;
}

absl::StatusOr<AddedVocabulary> AddedVocabulary::Create(std::vector<AddedToken> tokens,
                                                        const Normalizer* normalizer) {
  AddedVocabulary v;
  v.tokens_ = std::move(tokens);
  for (size_t i = 0; i < v.tokens_.size(); ++i) {
    const AddedToken& t = v.tokens_[i];
    if (t.id < 0) {
      return absl::InvalidArgumentError(absl::StrCat("added_tokens: negative id for '", t.content, "'"));
    }
    if (!unicode::IsValidUtf8(t.content)) {
      return absl::InvalidArgumentError("added_tokens: content is not valid UTF-8");
    }
    v.by_content_.insert_or_assign(t.content, t.id);
    if (t.content.empty()) continue;
    if (t.normalized) {
      std::string content = t.content;
      if (normalizer != nullptr) normalizer->Normalize(&content);
      if (!content.empty()) v.normalized_.patterns.push_back({std::move(content), i});
    } else {
      v.raw_.patterns.push_back({t.content, i});
    }
  }
  Build(&v.raw_);
  Build(&v.normalized_);
  return v;
}

void AddedVocabulary::Build(Matcher* m) {
  std::stable_sort(m->patterns.begin(), m->patterns.end(), [](const Pattern& a, const Pattern& b) {
    unsigned char fa = a.text[0], fb = b.text[0];
    if (fa != fb) return fa < fb;
    return a.text.size() > b.text.size();
  });
  m->by_first_byte.fill({0, 0});
  for (uint32_t i = 0; i < m->patterns.size(); ++i) {
    auto& range = m->by_first_byte[static_cast<unsigned char>(m->patterns[i].text[0])];
    if (range.first == range.second) range.first = i;
    range.second = i + 1;
  }
}

void AddedVocabulary::Split(const Matcher& m, std::string_view text,
                            std::vector<TextSegment>* out) const {
  size_t start_offset = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    auto [lo, hi] = m.by_first_byte[static_cast<unsigned char>(text[pos])];
    const Pattern* hit = nullptr;
    for (uint32_t i = lo; i < hi; ++i) {  // longest first
      const std::string& p = m.patterns[i].text;
      if (text.size() - pos >= p.size() && text.compare(pos, p.size(), p) == 0) {
        hit = &m.patterns[i];
        break;
      }
    }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[hit->token];
    size_t start = pos, stop = pos + hit->text.size();
    pos = stop;  // the next search starts after this match, as aho-corasick's find_iter does
    if (token.single_word) {
      bool start_space = start == 0 || !EndsWithWord(text.substr(0, start));
      bool stop_space = stop == text.size() || !StartsWithWord(text.substr(stop));
      if (!start_space || !stop_space) continue;
    }
    if (token.lstrip) start = std::max(SpaceLeftmostAtEnd(text.substr(0, start)), start_offset);
    if (token.rstrip) {
      stop += SpaceRightmostAtStart(text.substr(stop));
      pos = stop;
    }
    if (start > start_offset) out->push_back({uint32_t(start_offset), uint32_t(start), -1});
    out->push_back({uint32_t(start), uint32_t(stop), token.id});
    start_offset = stop;
  }
  if (start_offset < text.size() || text.empty()) {
    out->push_back({uint32_t(start_offset), uint32_t(text.size()), -1});
  }
}

std::optional<int64_t> AddedVocabulary::TokenToId(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> AddedVocabulary::IdToToken(int64_t id) const {
  for (const auto& t : tokens_) {
    if (t.id == id) return t.content;
  }
  return std::nullopt;
}

}  // namespace tide::tokenizer
