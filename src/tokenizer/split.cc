#include "tokenizer/split.h"

#include <algorithm>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/unicode.h"

namespace tide::tokenizer {
namespace {

// Per-thread PCRE2 state: one-pair match data (only group 0 is read) and a JIT stack large
// enough for long runs of letters or spaces.
struct MatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  MatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, nullptr);
    if (context != nullptr && jit_stack != nullptr) {
      pcre2_jit_stack_assign(context, nullptr, jit_stack);
    }
  }
  ~MatchState() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

struct Segment {
  size_t begin;
  size_t end;
  bool is_match;  // after `invert`; for the merge behaviors, "merged" marks it
};

}  // namespace

absl::StatusOr<std::unique_ptr<Regex>> Regex::Compile(std::string_view pattern) {
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_UCP, &error, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return absl::InvalidArgumentError(absl::StrCat("regex \"", std::string(pattern), "\": ",
                                                   reinterpret_cast<const char*>(message),
                                                   " at offset ", error_offset));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // best effort: the interpreter is the fallback
  std::unique_ptr<Regex> regex(new Regex());
  regex->code_ = code;
  return regex;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>* matches) const {
  thread_local MatchState state;
  if (state.data == nullptr) return;
  auto* code = static_cast<pcre2_code*>(code_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t len = text.size();
  const size_t first = matches->size();
  size_t offset = 0;
  bool checked = false;
  bool have_last = false;
  size_t last_end = 0;
  while (offset <= len) {
    const int rc = pcre2_match(code, subject, len, offset, checked ? PCRE2_NO_UTF_CHECK : 0,
                               state.data, state.context);
    if (rc < 0) {
      if (rc != PCRE2_ERROR_NOMATCH && !checked) matches->resize(first);  // e.g. invalid UTF-8
      return;
    }
    checked = true;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(state.data);
    const size_t s = ov[0];
    const size_t e = ov[1];
    if (s == e && have_last && last_end == e) {
      if (e >= len) return;
      offset = e + unicode::CharLength(text, e);
      continue;
    }
    matches->emplace_back(s, e);
    have_last = true;
    last_end = e;
    offset = e;
  }
}

void SplitSpansByMatches(size_t text_size, const std::vector<std::pair<size_t, size_t>>& matches,
                         SplitBehavior behavior, bool invert,
                         std::vector<std::pair<uint32_t, uint32_t>>* spans) {
  thread_local std::vector<Segment> segments;
  thread_local std::vector<Segment> merged;
  segments.clear();
  if (text_size == 0) return;  // HF: one empty non-match, which is dropped
  size_t prev = 0;
  for (const auto& [s, e] : matches) {
    if (prev != s) segments.push_back(Segment{prev, s, invert});
    segments.push_back(Segment{s, e, !invert});
    prev = e;
  }
  if (prev != text_size) segments.push_back(Segment{prev, text_size, invert});

  const std::vector<Segment>* result = &segments;
  merged.clear();
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const Segment& seg : segments) {
        if (!seg.is_match) merged.push_back(seg);
      }
      result = &merged;
      break;
    case SplitBehavior::kIsolated:
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Segment& seg : segments) {
        if (seg.is_match && !previous_match && !merged.empty()) {
          merged.back().end = seg.end;
        } else {
          merged.push_back(seg);
        }
        previous_match = seg.is_match;
      }
      result = &merged;
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous_match = false;
      for (size_t i = segments.size(); i > 0; --i) {
        const Segment& seg = segments[i - 1];
        if (seg.is_match && !previous_match && !merged.empty()) {
          merged.back().begin = seg.begin;
        } else {
          merged.push_back(seg);
        }
        previous_match = seg.is_match;
      }
      std::reverse(merged.begin(), merged.end());
      result = &merged;
      break;
    }
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const Segment& seg : segments) {
        if (seg.is_match == previous_match && !merged.empty()) {
          merged.back().end = seg.end;
        } else {
          merged.push_back(seg);
        }
        previous_match = seg.is_match;
      }
      result = &merged;
      break;
    }
  }
  for (const Segment& seg : *result) {
    if (seg.end > seg.begin) {
      spans->emplace_back(static_cast<uint32_t>(seg.begin), static_cast<uint32_t>(seg.end));
    }
  }
}

absl::StatusOr<std::unique_ptr<SplitPreTokenizer>> SplitPreTokenizer::Create(
    const Options& options) {
  std::unique_ptr<SplitPreTokenizer> split(new SplitPreTokenizer(options));
  if (options.is_regex) {
    auto regex = Regex::Compile(options.pattern);
    if (!regex.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("pre_tokenizer Split: ", regex.status().message()));
    }
    split->regex_ = *std::move(regex);
  }
  return split;
}

bool SplitPreTokenizer::Split(std::string_view text,
                              std::vector<std::pair<uint32_t, uint32_t>>* spans) const {
  thread_local std::vector<std::pair<size_t, size_t>> matches;
  matches.clear();
  const std::string& pattern = options_.pattern;
  if (regex_ != nullptr) {
    regex_->FindAll(text, &matches);
  } else if (!pattern.empty()) {
    for (size_t pos = text.find(pattern); pos != std::string_view::npos;
         pos = text.find(pattern, pos + pattern.size())) {
      matches.emplace_back(pos, pos + pattern.size());
    }
  }
  SplitSpansByMatches(text.size(), matches, options_.behavior, options_.invert, spans);
  return true;
}

void SplitPreTokenizer::PreTokenize(Pieces* pieces, Pieces* scratch) const {
  thread_local std::vector<std::pair<uint32_t, uint32_t>> spans;
  scratch->clear();
  for (const std::string& piece : *pieces) {
    spans.clear();
    Split(piece, &spans);
    for (auto [b, e] : spans) scratch->emplace_back(piece, b, e - b);
  }
  pieces->swap(*scratch);
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> MakeSplitPreTokenizer(const nlohmann::json& json) {
  SplitPreTokenizer::Options options;
  auto pattern = json.find("pattern");
  if (pattern == json.end() || !pattern->is_object() || pattern->size() != 1) {
    return absl::InvalidArgumentError(
        "pre_tokenizer Split: \"pattern\" must be {\"String\": ...} or {\"Regex\": ...}");
  }
  if (auto s = pattern->find("String"); s != pattern->end() && s->is_string()) {
    options.pattern = s->get<std::string>();
  } else if (auto r = pattern->find("Regex"); r != pattern->end() && r->is_string()) {
    options.pattern = r->get<std::string>();
    options.is_regex = true;
  } else {
    return absl::InvalidArgumentError(
        "pre_tokenizer Split: \"pattern\" must be {\"String\": ...} or {\"Regex\": ...}");
  }
  auto behavior = json.find("behavior");
  if (behavior == json.end() || !behavior->is_string()) {
    return absl::InvalidArgumentError("pre_tokenizer Split: \"behavior\" must be a string");
  }
  const std::string& b = behavior->get_ref<const std::string&>();
  if (b == "Removed") {
    options.behavior = SplitBehavior::kRemoved;
  } else if (b == "Isolated") {
    options.behavior = SplitBehavior::kIsolated;
  } else if (b == "MergedWithPrevious") {
    options.behavior = SplitBehavior::kMergedWithPrevious;
  } else if (b == "MergedWithNext") {
    options.behavior = SplitBehavior::kMergedWithNext;
  } else if (b == "Contiguous") {
    options.behavior = SplitBehavior::kContiguous;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("pre_tokenizer Split: unknown behavior \"", b, "\""));
  }
  auto invert = json.find("invert");
  if (invert != json.end() && !invert->is_null()) {
    if (!invert->is_boolean()) {
      return absl::InvalidArgumentError("pre_tokenizer Split: \"invert\" must be a bool");
    }
    options.invert = invert->get<bool>();
  }
  auto made = SplitPreTokenizer::Create(options);
  if (!made.ok()) return made.status();
  return std::unique_ptr<PreTokenizer>(*std::move(made));
}

}  // namespace tide::tokenizer
