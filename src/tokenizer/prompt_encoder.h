// tide::tokenizer::PromptEncoder — a decoder-only reranker's input: the model's PromptTemplate
// (domain/prompt_template.h) rendered with an instruction, a query and a document, tokenized as
// one text, the document's tokens cut so that the prompt fits the model.
//
// Contract:
//  - The prompt is the whole sequence: no post-processor special tokens are added around it (a
//    template writes its own, as text, which the added vocabulary resolves to their ids). Token
//    type ids are all 0, the attention mask all 1.
//  - Ids are those of the rendered text tokenized whole (never slot values in isolation, which
//    would change the tokens where a value meets the template, e.g. ": " + "text" under a
//    byte-level regex). The document's tokens are found by comparing with the frame's: the
//    head (text before {document}) and the tail (text after) tokenized alone; the tokens the
//    whole prompt shares with the head's start and the tail's end are the frame, the rest the
//    document's. A token that spans the frame and the document counts as the document's.
//  - Truncation cuts only the document: from its end (direction right) or its start (left), to
//    max_length minus the frame. So for Qwen3-Reranker's template the ids equal its model card's
//    (prefix + middle truncated to max_length - prefix - suffix + suffix) for direction right.
//    Encoding::untruncated_length is the whole prompt's length (truncated() says it was cut).
//  - Create fails with FAILED_PRECONDITION when the frame (template + instruction + query) is
//    longer than max_length (at exactly max_length, Encode refuses a document it leaves no room); the message names the longer of the
//    instruction and the query and every token count. Encode fails the same way when a
//    document's boundary leaves none. Tokenizer errors pass through.
//  - An encoder is made per (instruction, query) and reused for every document of a request;
//    immutable after Create; thread-safe; the tokenizer and the template must outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "domain/prompt_template.h"
#include "domain/truncation_direction.h"
#include "tokenizer/tokenizer.h"

namespace tide::tokenizer {

// A model's template checked against its tokenizer when the model loads:
//  - every special token the template spells in the ChatML form `<|name|>` (Qwen's <|im_start|>,
//    <|im_end|>, <|endoftext|>) must tokenize as one token of the tokenizer: a template written for
//    another tokenizer would otherwise be tokenized as plain text, silently. FAILED_PRECONDITION
//    naming the token and what it became.
//  - the frame with `default_instruction` (empty when none) and an empty query must leave the
//    document at least one token of `max_length`, else no request could be answered.
absl::Status CheckPromptTemplate(const Tokenizer& tokenizer, const PromptTemplate& prompt,
                                 std::string_view default_instruction, size_t max_length);

class PromptEncoder {
 public:
  static absl::StatusOr<PromptEncoder> Create(const Tokenizer& tokenizer, const PromptTemplate& prompt,
                                              std::string_view instruction, std::string_view query,
                                              size_t max_length);

  // The prompt around `document`, its document tokens cut to fit max_length from the end
  // `direction` names. `document_tokens`, when set, receives the document's [begin, end) token
  // range in `out` (after the cut).
  absl::Status Encode(std::string_view document, TruncationDirection direction, Encoding* out,
                      std::pair<size_t, size_t>* document_tokens = nullptr) const;

  // The rendered prompt's text (what /tokenize shows tokens of).
  std::string Render(std::string_view document) const { return head_ + std::string(document) + tail_; }

  // Tokens of the frame (head and tail tokenized alone) and what max_length leaves the document:
  // within a prompt the frame can be a token shorter (the head's trailing space joins the
  // document's first word), so room() errs by at most that token on the safe side.
  size_t frame_tokens() const { return head_ids_.size() + tail_ids_.size(); }
  size_t room() const { return max_length_ > frame_tokens() ? max_length_ - frame_tokens() : 0; }
  size_t max_length() const { return max_length_; }

 private:
  friend absl::Status CheckPromptTemplate(const Tokenizer&, const PromptTemplate&, std::string_view, size_t);
  PromptEncoder(const Tokenizer& tokenizer, size_t max_length) : tokenizer_(&tokenizer), max_length_(max_length) {}
  absl::Status NoRoom(size_t frame) const;

  const Tokenizer* tokenizer_;
  size_t max_length_;
  std::string head_, tail_;
  std::vector<int64_t> head_ids_, tail_ids_;
  size_t instruction_tokens_ = 0, query_tokens_ = 0;
};

}  // namespace tide::tokenizer
