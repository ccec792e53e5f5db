// tide::serving::PrepareSharedPromptPrefix — a decoder reranker version's shared prompt prefix,
// found, computed and checked once at load (model parameter shared_prompt_prefix).
//
// Contract:
//  - SharedPromptIds: the tokens every prompt of `prompt` with `instruction` starts with — the
//    common first tokens of two renderings whose queries and documents share no text, less the
//    last of them (a token that meets the query could join the query's first characters
//    differently). Any template works: what is shared is measured, not assumed; a request that
//    brings its own instruction has prompts that may start otherwise, and the backend then runs
//    its batch whole (runtime/prompt_prefix.h).
//  - PrepareSharedPromptPrefix opens one backend of `ort` (the fused graph, with prefix inputs:
//    optimize/prompt_prefix.h), computes the prefix (OrtBackend::ComputePromptPrefix) and checks it:
//    the two renderings, right-padded into one batch, must score the same after the prefix as
//    whole (max |difference| <= 1e-4 x max(1, max |logit|)) and must have run after it. Never
//    fails: `prefix` is null with `reason` set when there is nothing to share (fewer than 2
//    tokens, a graph without prefix inputs) or anything went wrong (`check_failed`: an error to
//    log). Blocks for one session open and three runs; thread-compatible.
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

struct SharedPromptPrefix {
  std::shared_ptr<const runtime::PromptPrefix> prefix;  // null: every batch runs whole
  std::string reason;            // why there is none
  bool check_failed = false;     // an error (a failed run, a mismatch), not a model without one
  size_t probe_tokens = 0;       // the longer probe prompt's length
  double max_abs_diff = 0, tolerance = 0;
};

SharedPromptPrefix PrepareSharedPromptPrefix(const runtime::OrtOptions& ort, const tokenizer::Tokenizer& tokenizer,
                                             const PromptTemplate& prompt, std::string_view instruction,
                                             size_t max_length);

}  // namespace tide::serving
