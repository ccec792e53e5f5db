#include "tokenizer/prompt_encoder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tide::tokenizer {

absl::Status CheckPromptTemplate(const Tokenizer& tokenizer, const PromptTemplate& prompt,
                                 std::string_view default_instruction, size_t max_length) {
  const std::string& text = prompt.source();
  std::vector<int64_t> ids;
  for (size_t open = text.find("<|"); open != std::string::npos; open = text.find("<|", open + 2)) {
    const size_t close = text.find("|>", open + 2);
    if (close == std::string::npos) break;
    const std::string_view name(text.data() + open, close + 2 - open);
    if (name.find_first_of(" \n{}") != std::string_view::npos) continue;  // not a token's spelling
    if (absl::Status s = tokenizer.Tokenize(name, &ids); !s.ok()) return s;
    const std::optional<int64_t> id = tokenizer.TokenToId(name);
    if (ids.size() != 1 || !id.has_value() || ids[0] != *id) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the prompt_template spells the special token ", std::string(name), " but the tokenizer has no such token (it becomes ",
          ids.size(), " ordinary tokens): the template was written for another tokenizer"));
    }
  }
  absl::StatusOr<PromptEncoder> frame = PromptEncoder::Create(tokenizer, prompt, default_instruction, "", max_length);
  if (!frame.ok()) return frame.status();
  if (frame->room() == 0) return frame->NoRoom(frame->frame_tokens());
  return absl::OkStatus();
}

absl::StatusOr<PromptEncoder> PromptEncoder::Create(const Tokenizer& tokenizer, const PromptTemplate& prompt,
                                                    std::string_view instruction, std::string_view query,
                                                    size_t max_length) {
  PromptEncoder e(tokenizer, max_length);
  e.head_ = prompt.Head(instruction, query);
  e.tail_ = prompt.Tail(instruction, query);
  if (absl::Status s = tokenizer.Tokenize(e.head_, &e.head_ids_); !s.ok()) return s;
  if (absl::Status s = tokenizer.Tokenize(e.tail_, &e.tail_ids_); !s.ok()) return s;
  std::vector<int64_t> ids;
  if (prompt.has_instruction()) {
    if (absl::Status s = tokenizer.Tokenize(instruction, &ids); !s.ok()) return s;
    e.instruction_tokens_ = ids.size();
  }
  if (absl::Status s = tokenizer.Tokenize(query, &ids); !s.ok()) return s;
  e.query_tokens_ = ids.size();
  // Alone, the head may end in a token the document's first one absorbs (": " + "text"), so a
  // frame exactly max_length long may still leave one token: Encode decides that case.
  if (e.frame_tokens() > max_length) return e.NoRoom(e.frame_tokens());
  return e;
}

absl::Status PromptEncoder::NoRoom(size_t frame) const {
  const bool instruction_longer = instruction_tokens_ > query_tokens_;
  const size_t template_tokens =
      frame > instruction_tokens_ + query_tokens_ ? frame - instruction_tokens_ - query_tokens_ : 0;
  return absl::FailedPreconditionError(absl::StrCat(
      "the prompt leaves no room for the document: the ", instruction_longer ? "instruction" : "query", " is too long (",
      "template ", template_tokens, " + instruction ", instruction_tokens_, " + query ", query_tokens_, " = ", frame,
      " tokens; the model's max_sequence_length is ", max_length_, " and the document needs at least 1)"));
}

absl::Status PromptEncoder::Encode(std::string_view document, TruncationDirection direction, Encoding* out,
                                   std::pair<size_t, size_t>* document_tokens) const {
  out->clear();
  std::string text;
  text.reserve(head_.size() + document.size() + tail_.size());
  text.append(head_).append(document).append(tail_);
  std::vector<int64_t> ids;
  if (absl::Status s = tokenizer_->Tokenize(text, &ids); !s.ok()) return s;
  const size_t n = ids.size();
  // The frame: what the whole prompt shares with the head's start and the tail's end.
  size_t head = 0;
  while (head < n && head < head_ids_.size() && ids[head] == head_ids_[head]) ++head;
  size_t tail = 0;
  while (tail < n - head && tail < tail_ids_.size() && ids[n - 1 - tail] == tail_ids_[tail_ids_.size() - 1 - tail]) {
    ++tail;
  }
  size_t doc_begin = head, doc_end = n - tail;
  out->untruncated_length = n;
  if (n > max_length_) {
    if (head + tail >= max_length_) return NoRoom(head + tail);
    const size_t keep = max_length_ - head - tail;
    if (direction == TruncationDirection::kLeft) {
      ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(head),
                ids.begin() + static_cast<std::ptrdiff_t>(doc_end - keep));
    } else {
      ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(head + keep),
                ids.begin() + static_cast<std::ptrdiff_t>(doc_end));
    }
    doc_end = head + keep;
  }
  out->ids = std::move(ids);
  out->type_ids.assign(out->ids.size(), 0);
  out->attention_mask.assign(out->ids.size(), 1);
  if (document_tokens != nullptr) *document_tokens = {doc_begin, doc_end};
  return absl::OkStatus();
}

}  // namespace tide::tokenizer
