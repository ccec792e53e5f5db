// tide::serving long documents — a document longer than what fits beside the query, scored whole:
// split into overlapping windows that are scored as ordinary rows (so they batch with everything
// else), then folded back into one score per document (the best window's, or their mean).
//
// Contract:
//  - SplitLongDocuments leaves a document that fits beside the query (query + document + special
//    tokens <= max_sequence_length) as one window holding the whole text: short documents are
//    encoded exactly as with `truncate`. A longer one is cut at whitespace between words (never
//    inside a word, so never inside the word pieces of one word) into windows of at most
//    `window` document tokens, each starting `stride` tokens (rounded up to the next word) after
//    the previous one, the last one ending with the document. Token counts are the tokenizer's
//    own, word by word. A single word longer than a window makes a window of its own (the pair is
//    then truncated like any other). Windows are views into `documents`.
//  - A model with a prompt_template: what fits is what the prompt's frame (template, instruction,
//    query; serving/scoring.h MakePromptEncoder) leaves, and each window is encoded inside the
//    template like a whole document.
//  - The window size is chunk_tokens, or when 0 what fits beside the query; the stride
//    chunk_stride, or when 0 half a window. When the query leaves fewer than 8 tokens for the
//    document, documents are not split (truncation applies).
//  - A document that needs more than max_chunks windows: INVALID_INPUT (422) naming the document,
//    the windows it needs and max_chunks_per_document.
//  - FoldWindowScores: a document's score is the max (kChunkMax) or mean (kChunkMean) of its
//    windows' scores (after the activation, or the raw logits for raw scores).
//  - Pure functions of an immutable model; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "domain/long_documents_mode.h"
#include "serving/served_model.h"

namespace tide::serving {

struct ChunkOptions {
  LongDocuments mode = LongDocuments::kTruncate;
  size_t chunk_tokens = 0;  // 0: what fits beside the query
  size_t chunk_stride = 0;  // 0: half a window
  size_t max_chunks = 16;
  // The request's instruction (a model with a prompt_template); unset: the model's default.
  std::optional<std::string> instruction;
};

// The model's chunking parameters with `mode`.
ChunkOptions ChunkOptionsFor(const ServedModel& model, LongDocuments mode);

struct DocumentWindows {
  std::vector<std::string_view> windows;  // the texts scored, in document order
  std::vector<size_t> owner;              // owner[w]: the document window w belongs to
  bool split = false;                     // some document made more than one window
};

absl::Status SplitLongDocuments(const ServedModel& model, std::string_view query,
                                std::span<const std::string_view> documents, const ChunkOptions& options,
                                DocumentWindows* out);

// One score per document from the windows' scores.
std::vector<float> FoldWindowScores(LongDocuments mode, std::span<const size_t> owner,
                                    std::span<const float> window_scores, size_t documents);

}  // namespace tide::serving
