#include "tokenizer/pre_tokenizers.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "tokenizer/unicode.h"

namespace tide::tokenizer {
namespace {

using json = nlohmann::json;
using Spans = std::vector<std::pair<uint32_t, uint32_t>>;

// Base for pre-tokenizers that only split: PreTokenize is derived from Split.
class SplittingPreTokenizer : public PreTokenizer {
 public:
  void PreTokenize(Pieces* pieces, Pieces* scratch) const override {
    thread_local Spans spans;
    scratch->clear();
    for (const std::string& piece : *pieces) {
      spans.clear();
      Split(piece, &spans);
      for (auto [b, e] : spans) scratch->emplace_back(piece, b, e - b);
    }
    pieces->swap(*scratch);
  }
};

// Whitespace removed, every punctuation character isolated.
class BertPreTokenizer final : public SplittingPreTokenizer {
 public:
  bool Split(std::string_view s, Spans* spans) const override {
    size_t pos = 0, start = 0;
    while (pos < s.size()) {
      size_t at = pos;
      char32_t cp = unicode::Next(s, &pos);
      bool ws, punct;
      if (cp < 0x80) {
        ws = cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
        punct = !ws && unicode::IsPunctuation(cp);
      } else {
        ws = unicode::IsWhitespace(cp);
        punct = !ws && unicode::IsPunctuation(cp);
      }
      if (ws || punct) {
        if (at > start) spans->emplace_back(start, at);
        if (punct) spans->emplace_back(at, pos);
        start = pos;
      }
    }
    if (s.size() > start) spans->emplace_back(start, s.size());
    return true;
  }
};

// HF Whitespace: the matches of \w+|[^\w\s]+, i.e. maximal runs of word characters or of other
// non-space characters.
class WhitespacePreTokenizer final : public SplittingPreTokenizer {
 public:
  bool Split(std::string_view s, Spans* spans) const override {
    size_t pos = 0, start = 0;
    int current = 0;  // 0 = space, 1 = word, 2 = other
    while (pos < s.size()) {
      size_t at = pos;
      char32_t cp = unicode::Next(s, &pos);
      int cls = unicode::IsWordChar(cp) ? 1 : unicode::IsWhitespace(cp) ? 0 : 2;
      if (cls != current) {
        if (current != 0 && at > start) spans->emplace_back(start, at);
        start = at;
        current = cls;
      }
    }
    if (current != 0 && s.size() > start) spans->emplace_back(start, s.size());
    return true;
  }
};

// Splits on characters matching a predicate with a delimiter behaviour.
template <typename Pred>
class CharSplitPreTokenizer final : public SplittingPreTokenizer {
 public:
  CharSplitPreTokenizer(Pred pred, SplitDelimiterBehavior behavior)
      : pred_(pred), behavior_(behavior) {}
  bool Split(std::string_view s, Spans* spans) const override {
    if (behavior_ == SplitDelimiterBehavior::kRemoved) {  // common case, no segment list
      size_t pos = 0, start = 0;
      while (pos < s.size()) {
        size_t at = pos;
        if (pred_(unicode::Next(s, &pos))) {
          if (at > start) spans->emplace_back(start, at);
          start = pos;
        }
      }
      if (s.size() > start) spans->emplace_back(start, s.size());
      return true;
    }
    thread_local std::vector<SplitSegment> segments;
    segments.clear();
    size_t pos = 0, last = 0;
    while (pos < s.size()) {
      size_t at = pos;
      if (pred_(unicode::Next(s, &pos))) {
        if (at > last) segments.push_back({uint32_t(last), uint32_t(at), false});
        segments.push_back({uint32_t(at), uint32_t(pos), true});
        last = pos;
      }
    }
    if (s.size() > last) segments.push_back({uint32_t(last), uint32_t(s.size()), false});
    ApplySplitBehavior(segments, behavior_, 0, spans);
    return true;
  }

 private:
  Pred pred_;
  SplitDelimiterBehavior behavior_;
};

template <typename Pred>
std::unique_ptr<PreTokenizer> MakeCharSplit(Pred pred, SplitDelimiterBehavior behavior) {
  return std::make_unique<CharSplitPreTokenizer<Pred>>(pred, behavior);
}

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {
    splits_only_ = true;
    Spans probe;
    for (const auto& step : steps_) splits_only_ = splits_only_ && step->Split("", &probe);
  }

  void PreTokenize(Pieces* pieces, Pieces* scratch) const override {
    for (const auto& step : steps_) step->PreTokenize(pieces, scratch);
  }

  bool Split(std::string_view s, Spans* spans) const override {
    if (!splits_only_) return false;
    thread_local Spans current, next;
    current.clear();
    current.emplace_back(0, uint32_t(s.size()));
    if (s.empty()) current.clear();
    for (const auto& step : steps_) {
      next.clear();
      for (auto [b, e] : current) {
        size_t first = next.size();
        step->Split(s.substr(b, e - b), &next);
        for (size_t i = first; i < next.size(); ++i) {
          next[i].first += b;
          next[i].second += b;
        }
      }
      current.swap(next);
    }
    spans->insert(spans->end(), current.begin(), current.end());
    return true;
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
  bool splits_only_ = false;
};

}  // namespace

absl::StatusOr<SplitDelimiterBehavior> ParseSplitDelimiterBehavior(std::string_view name) {
  if (name == "Removed") return SplitDelimiterBehavior::kRemoved;
  if (name == "Isolated") return SplitDelimiterBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitDelimiterBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitDelimiterBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitDelimiterBehavior::kContiguous;
  return absl::InvalidArgumentError(absl::StrCat("unknown split behavior '", std::string(name), "'"));
}

void ApplySplitBehavior(const std::vector<SplitSegment>& segments, SplitDelimiterBehavior behavior,
                        uint32_t base, Spans* spans) {
  const size_t first = spans->size();
  auto push = [&](uint32_t b, uint32_t e) { spans->emplace_back(base + b, base + e); };
  switch (behavior) {
    case SplitDelimiterBehavior::kRemoved:
      for (const auto& s : segments) {
        if (!s.is_match) push(s.begin, s.end);
      }
      break;
    case SplitDelimiterBehavior::kIsolated:
      for (const auto& s : segments) push(s.begin, s.end);
      break;
    case SplitDelimiterBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const auto& s : segments) {
        if (s.is_match && !previous_match && spans->size() > first) {
          spans->back().second = base + s.end;
        } else {
          push(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      break;
    }
    case SplitDelimiterBehavior::kMergedWithNext: {
      // Walk backwards, merging a match into the piece that follows it.
      bool previous_match = false;
      for (size_t i = segments.size(); i-- > 0;) {
        const auto& s = segments[i];
        if (s.is_match && !previous_match && spans->size() > first) {
          spans->back().first = base + s.begin;
        } else {
          push(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      std::reverse(spans->begin() + first, spans->end());
      break;
    }
    case SplitDelimiterBehavior::kContiguous: {
      bool previous_match = false;
      for (const auto& s : segments) {
        if (s.is_match == previous_match && spans->size() > first) {
          spans->back().second = base + s.end;
        } else {
          push(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      break;
    }
  }
  // HF drops empty pieces.
  size_t w = first;
  for (size_t r = first; r < spans->size(); ++r) {
    if ((*spans)[r].second > (*spans)[r].first) (*spans)[w++] = (*spans)[r];
  }
  spans->resize(w);
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> MakeWordPieceFamilyPreTokenizer(const json& j) {
  const std::string type = j.value("type", "");
  if (type == "BertPreTokenizer") return std::make_unique<BertPreTokenizer>();
  if (type == "Whitespace") return std::make_unique<WhitespacePreTokenizer>();
  if (type == "WhitespaceSplit") {
    return MakeCharSplit([](char32_t c) { return unicode::IsWhitespace(c); },
                         SplitDelimiterBehavior::kRemoved);
  }
  if (type == "Punctuation") {
    auto behavior = ParseSplitDelimiterBehavior(j.value("behavior", "Isolated"));
    if (!behavior.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("pre_tokenizer Punctuation: ", behavior.status().message()));
    }
    return MakeCharSplit([](char32_t c) { return unicode::IsPunctuation(c); }, *behavior);
  }
  if (type == "Digits") {
    bool individual = false;
    if (auto it = j.find("individual_digits"); it != j.end() && it->is_boolean()) {
      individual = it->get<bool>();
    }
    return MakeCharSplit([](char32_t c) { return unicode::IsNumeric(c); },  // char::is_numeric
                         individual ? SplitDelimiterBehavior::kIsolated
                                    : SplitDelimiterBehavior::kContiguous);
  }
  if (type == "Sequence") {
    auto it = j.find("pretokenizers");
    if (it == j.end() || !it->is_array()) {
      return absl::InvalidArgumentError("pre_tokenizer Sequence: 'pretokenizers' must be an array");
    }
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (const auto& child : *it) {
      auto step = MakePreTokenizer(child);
      if (!step.ok()) return step.status();
      steps.push_back(*std::move(step));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  if (type.empty()) return absl::InvalidArgumentError("pre_tokenizer: missing 'type'");
  return absl::UnimplementedError(absl::StrCat("pre_tokenizer ", type, ": not supported by tide"));
}

}  // namespace tide::tokenizer
