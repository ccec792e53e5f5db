// Post-processors (HF `processors`): BertProcessing, RobertaProcessing, TemplateProcessing,
// ByteLevel (identity for ids) and Sequence, plus the default used when tokenizer.json has none.
//
// Contract: built by MakePostProcessor (components.h); immutable and thread-safe; Process writes
// into caller-owned vectors (no allocation once they have capacity). Errors: INVALID_ARGUMENT for
// malformed objects or special tokens missing from the vocabulary, UNIMPLEMENTED for unknown
// types, naming the component.
#pragma once

#include <memory>

#include "tokenizer/components.h"

namespace tide::tokenizer {

// What HF does without a post_processor: no special tokens, type id 0 for A and 1 for B.
std::unique_ptr<PostProcessor> MakeDefaultPostProcessor();

}  // namespace tide::tokenizer
