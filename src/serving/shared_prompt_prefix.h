// tide::serving::PrepareSharedPromptPrefix — a decoder reranker version's shared prompt prefix,
// found, computed and checked once at load (model parameter shared_prompt_prefix).
//
// Contract:
//  - SharedPromptIds: the tokens every prompt of `prompt` with `instruction` starts with — the
//    common first tokens of two renderings whose queries and documents share no text, less the
//    last of them (a token that meets the query could join the query's first characters
//    differently). Any template works: what is shared is measured, not assumed; a request that
//    brings its own instruction has prompts that may start otherwise, and the backend then runs
//    its batch whole (runtime/prompt_prefix.h) unless InstructionFreePromptIds covers it.
//  - InstructionFreePromptIds: the same with two different instructions: the prompt's first tokens
//    before the instruction (Qwen3-Reranker: the system message and the user turn's opening),
//    which a request with its own instruction still starts with.
//  - PrepareSharedPromptPrefix opens one backend of `ort` (the fused graph, with prefix inputs:
//    optimize/prompt_prefix.h), computes the prefix (OrtBackend::ComputePromptPrefix) and, when the
//    template has an instruction before the shared part ends, the instruction-free one as its
//    `shorter` (fewer tokens), and checks both: two renderings with the default instruction, and
//    two with other instructions, each right-padded into one batch, must score the same after the
//    prefix as whole (max |difference| <= 1e-4 x max(1, max |logit|)) and must have run after the
//    prefix meant for them. Never fails: `prefix` is null with `reason` set when there is nothing
//    to share (fewer than 2 tokens, a graph without prefix inputs) or anything went wrong
//    (`check_failed`: an error to log). Blocks for one session open and up to six runs;
//    thread-compatible.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "domain/prompt_template.h"
#include "runtime/ort_backend.h"
#include "runtime/prompt_prefix.h"
#include "tokenizer/tokenizer.h"

namespace tide::serving {

absl::StatusOr<std::vector<int64_t>> SharedPromptIds(const tokenizer::Tokenizer& tokenizer, const PromptTemplate& prompt,
                                                     std::string_view instruction, size_t max_length);
absl::StatusOr<std::vector<int64_t>> InstructionFreePromptIds(const tokenizer::Tokenizer& tokenizer,
                                                              const PromptTemplate& prompt, size_t max_length);

struct SharedPromptPrefix {
  std::shared_ptr<const runtime::PromptPrefix> prefix;  // null: every batch runs whole
  std::string reason;            // why there is none
  bool check_failed = false;     // an error (a failed run, a mismatch), not a model without one
  size_t probe_tokens = 0;       // the longest probe prompt's length
  size_t shorter_tokens = 0;     // prefix->shorter's length (0: none)
  double max_abs_diff = 0, tolerance = 0;
};

SharedPromptPrefix PrepareSharedPromptPrefix(const runtime::OrtOptions& ort, const tokenizer::Tokenizer& tokenizer,
                                             const PromptTemplate& prompt, std::string_view instruction,
                                             size_t max_length);

}  // namespace tide::serving
