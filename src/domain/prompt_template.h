// tide::PromptTemplate (the domain vocabulary; the encoding is tokenizer/prompt_encoder.h) — the
// prompt a decoder-only reranker (Qwen3-Reranker, mxbai-rerank-v2) is fed instead of a BERT pair:
// the model parameter `prompt_template`, text with the slots {instruction}, {query} and {document}.
//
// Contract:
//  - Parse: {query} and {document} are required, {instruction} optional, each at most once;
//    "{{" and "}}" are a literal "{" and "}". Any other "{name}", an unclosed "{", a lone "}"
//    or a repeated slot is an error whose message names it (the caller adds the file and key).
//    Special tokens are written as text ("<|im_start|>"): the tokenizer's added vocabulary turns
//    them into their ids when the rendered prompt is tokenized.
//  - Render: the template with each slot replaced by its value (an absent {instruction} slot
//    ignores the instruction), and the byte range each slot's value occupies in the result.
//    Head/Tail: the rendered text before and after the {document} slot (the prompt's "frame"
//    around the document).
//  - Header-only, dependency-free; immutable after Parse, thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tide {

class PromptTemplate {
 public:
  enum class Slot { kInstruction, kQuery, kDocument };

  // One part of a template: literal text (braces already unescaped) or a slot.
  struct Part {
    std::optional<Slot> slot;  // unset: literal `text`
    std::string text;
  };

  // A rendered prompt: the text and each slot's value range [begin, end) in bytes.
  struct Rendered {
    std::string text;
    std::pair<size_t, size_t> instruction{0, 0};
    std::pair<size_t, size_t> query{0, 0};
    std::pair<size_t, size_t> document{0, 0};
  };

  static constexpr std::string_view SlotName(Slot slot) {
    switch (slot) {
      case Slot::kInstruction: return "instruction";
      case Slot::kQuery: return "query";
      case Slot::kDocument: return "document";
    }
    return "?";
  }

  // The template, or nullopt with *error set (a sentence naming the problem).
  static std::optional<PromptTemplate> Parse(std::string_view text, std::string* error) {
    PromptTemplate t;
    t.source_ = std::string(text);
    std::string literal;
    bool seen[3] = {false, false, false};
    size_t i = 0;
    while (i < text.size()) {
      const char c = text[i];
      if (c == '{' && i + 1 < text.size() && text[i + 1] == '{') {
        literal.push_back('{');
        i += 2;
        continue;
      }
      if (c == '}' && i + 1 < text.size() && text[i + 1] == '}') {
        literal.push_back('}');
        i += 2;
        continue;
      }
      if (c == '}') {
        *error = "a lone '}' at byte " + std::to_string(i) + " (write '}}' for a literal brace)";
        return std::nullopt;
      }
      if (c != '{') {
        literal.push_back(c);
        ++i;
        continue;
      }
      const size_t close = text.find('}', i + 1);
      if (close == std::string_view::npos) {
        *error = "an unclosed '{' at byte " + std::to_string(i) + " (write '{{' for a literal brace)";
        return std::nullopt;
      }
      const std::string_view name = text.substr(i + 1, close - i - 1);
      std::optional<Slot> slot;
      for (Slot s : {Slot::kInstruction, Slot::kQuery, Slot::kDocument}) {
        if (name == SlotName(s)) slot = s;
      }
      if (!slot.has_value()) {
        *error = "unknown slot {" + std::string(name.substr(0, 64)) +
                 "} (the slots are {instruction}, {query} and {document}; write '{{' for a literal brace)";
        return std::nullopt;
      }
      if (seen[static_cast<int>(*slot)]) {
        *error = "the slot {" + std::string(name) + "} appears more than once";
        return std::nullopt;
      }
      seen[static_cast<int>(*slot)] = true;
      if (!literal.empty()) t.parts_.push_back(Part{std::nullopt, std::move(literal)});
      literal.clear();
      t.parts_.push_back(Part{slot, {}});
      i = close + 1;
    }
    if (!literal.empty()) t.parts_.push_back(Part{std::nullopt, std::move(literal)});
    for (Slot s : {Slot::kQuery, Slot::kDocument}) {
      if (!seen[static_cast<int>(s)]) {
        *error = "the template lacks the slot {" + std::string(SlotName(s)) + "} (required)";
        return std::nullopt;
      }
    }
    t.has_instruction_ = seen[static_cast<int>(Slot::kInstruction)];
    return t;
  }

  const std::string& source() const { return source_; }
  const std::vector<Part>& parts() const { return parts_; }
  bool has_instruction() const { return has_instruction_; }

  Rendered Render(std::string_view instruction, std::string_view query, std::string_view document) const {
    Rendered r;
    r.text.reserve(source_.size() + instruction.size() + query.size() + document.size());
    for (const Part& p : parts_) {
      if (!p.slot.has_value()) {
        r.text.append(p.text);
        continue;
      }
      const std::string_view value = *p.slot == Slot::kInstruction ? instruction
                                     : *p.slot == Slot::kQuery     ? query
                                                                   : document;
      std::pair<size_t, size_t>& range = *p.slot == Slot::kInstruction ? r.instruction
                                         : *p.slot == Slot::kQuery     ? r.query
                                                                       : r.document;
      range = {r.text.size(), r.text.size() + value.size()};
      r.text.append(value);
    }
    return r;
  }

  // The rendered text before / after the {document} slot.
  std::string Head(std::string_view instruction, std::string_view query) const { return Side(true, instruction, query); }
  std::string Tail(std::string_view instruction, std::string_view query) const { return Side(false, instruction, query); }

 private:
  std::string Side(bool head, std::string_view instruction, std::string_view query) const {
    std::string out;
    bool before = true;
    for (const Part& p : parts_) {
      if (p.slot == Slot::kDocument) {
        before = false;
        continue;
      }
      if (before != head) continue;
      if (!p.slot.has_value()) {
        out.append(p.text);
      } else {
        out.append(*p.slot == Slot::kInstruction ? instruction : query);
      }
    }
    return out;
  }

  std::string source_;
  std::vector<Part> parts_;
  bool has_instruction_ = false;
};

}  // namespace tide
