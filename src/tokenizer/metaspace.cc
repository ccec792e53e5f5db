#include "tokenizer/metaspace.h"

#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/unicode.h"

namespace tide::tokenizer {

absl::StatusOr<std::unique_ptr<MetaspacePreTokenizer>> MetaspacePreTokenizer::Create(
    const Options& options) {
  const std::string& r = options.replacement;
  if (r.empty() || !unicode::IsValidUtf8(r) ||
      unicode::SequenceLength(static_cast<unsigned char>(r[0])) != r.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pre_tokenizer Metaspace: replacement must be one character, got \"", r, "\""));
  }
  return std::unique_ptr<MetaspacePreTokenizer>(new MetaspacePreTokenizer(options));
}

void MetaspacePreTokenizer::PreTokenize(Pieces* pieces, Pieces* scratch) const {
  PreTokenizeSections(pieces, scratch, /*first_section_starts_text=*/true);
}

void MetaspacePreTokenizer::PreTokenizeSections(Pieces* pieces, Pieces* scratch,
                                                bool first_section_starts_text) const {
  const std::string& rep = options_.replacement;
  scratch->clear();
  thread_local std::string buffer;
  for (size_t p = 0; p < pieces->size(); ++p) {
    const std::string& in = (*pieces)[p];
    if (in.empty()) continue;  // HF drops empty sections (and never prepends to them)
    buffer.clear();
    const bool starts_with_rep = in.compare(0, rep.size(), rep) == 0;
    bool prepend = false;
    switch (options_.prepend_scheme) {
      case PrependScheme::kAlways:
        // HF checks the string after replacing spaces, so a leading space counts as a replacement.
        prepend = !starts_with_rep && !(in.size() > 0 && in[0] == ' ');
        break;
      case PrependScheme::kFirst:
        prepend = p == 0 && first_section_starts_text && !starts_with_rep &&
                  !(in.size() > 0 && in[0] == ' ');
        break;
      case PrependScheme::kNever:
        break;
    }
    if (prepend) buffer.append(rep);
    for (char c : in) {
      if (c == ' ') {
        buffer.append(rep);
      } else {
        buffer.push_back(c);
      }
    }
    if (!options_.split) {
      if (!buffer.empty()) scratch->emplace_back(buffer);
      continue;
    }
    // Split before every replacement (HF: MergedWithNext on the replacement character).
    size_t start = 0;
    size_t pos = buffer.find(rep);
    while (pos != std::string::npos) {
      if (pos > start) scratch->emplace_back(buffer, start, pos - start);
      start = pos;
      pos = buffer.find(rep, pos + rep.size());
    }
    if (buffer.size() > start) scratch->emplace_back(buffer, start, buffer.size() - start);
  }
  pieces->swap(*scratch);
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> MakeMetaspacePreTokenizer(const nlohmann::json& json) {
  MetaspacePreTokenizer::Options options;
  auto rep = json.find("replacement");
  if (rep == json.end() || !rep->is_string()) {
    return absl::InvalidArgumentError("pre_tokenizer Metaspace: \"replacement\" must be a string");
  }
  options.replacement = rep->get<std::string>();
  std::optional<PrependScheme> scheme;
  if (auto it = json.find("prepend_scheme"); it != json.end() && !it->is_null()) {
    if (!it->is_string()) {
      return absl::InvalidArgumentError("pre_tokenizer Metaspace: \"prepend_scheme\" must be a string");
    }
    const std::string& s = it->get_ref<const std::string&>();
    if (s == "always") {
      scheme = PrependScheme::kAlways;
    } else if (s == "never") {
      scheme = PrependScheme::kNever;
    } else if (s == "first") {
      scheme = PrependScheme::kFirst;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("pre_tokenizer Metaspace: unknown prepend_scheme \"", s, "\""));
    }
  }
  std::optional<bool> add_prefix_space;
  if (auto it = json.find("add_prefix_space"); it != json.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return absl::InvalidArgumentError("pre_tokenizer Metaspace: \"add_prefix_space\" must be a bool");
    }
    add_prefix_space = it->get<bool>();
  }
  // HF 0.23: a declared prepend_scheme wins; add_prefix_space=false contradicting it is an error;
  // add_prefix_space alone maps true -> always, false -> never.
  if (scheme.has_value()) {
    if (add_prefix_space == false && *scheme != PrependScheme::kNever) {
      return absl::InvalidArgumentError(
          "pre_tokenizer Metaspace: add_prefix_space does not match declared prepend_scheme");
    }
    options.prepend_scheme = *scheme;
  } else if (add_prefix_space.has_value()) {
    options.prepend_scheme = *add_prefix_space ? PrependScheme::kAlways : PrependScheme::kNever;
  }
  auto split = json.find("split");
  if (split != json.end() && !split->is_null()) {
    if (!split->is_boolean()) {
      return absl::InvalidArgumentError("pre_tokenizer Metaspace: \"split\" must be a bool");
    }
    options.split = split->get<bool>();
  }
  auto made = MetaspacePreTokenizer::Create(options);
  if (!made.ok()) return made.status();
  return std::unique_ptr<PreTokenizer>(*std::move(made));
}

}  // namespace tide::tokenizer
