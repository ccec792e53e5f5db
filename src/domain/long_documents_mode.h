// tide::LongDocuments (the domain vocabulary; the algorithm is serving/long_documents.h) — what a reranker does with a document longer than what fits beside the
// query in the model's max_sequence_length: cut it (`truncate`, HF's and TEI's behaviour), or score
// overlapping windows of it and keep the best window's score (`chunk_max`) or their mean
// (`chunk_mean`). A model parameter (`long_documents`) and a per-request override share these
// names. Header-only, constexpr, thread-safe.
#pragma once

#include <optional>
#include <string_view>

namespace tide {

enum class LongDocuments { kTruncate, kChunkMax, kChunkMean };

constexpr std::string_view LongDocumentsName(LongDocuments mode) {
  switch (mode) {
    case LongDocuments::kTruncate: return "truncate";
    case LongDocuments::kChunkMax: return "chunk_max";
    case LongDocuments::kChunkMean: return "chunk_mean";
  }
  return "truncate";
}

constexpr std::optional<LongDocuments> ParseLongDocuments(std::string_view name) {
  for (LongDocuments mode : {LongDocuments::kTruncate, LongDocuments::kChunkMax, LongDocuments::kChunkMean}) {
    if (LongDocumentsName(mode) == name) return mode;
  }
  return std::nullopt;
}

static_assert(ParseLongDocuments("chunk_mean") == LongDocuments::kChunkMean);
static_assert(!ParseLongDocuments("chunk").has_value());

}  // namespace tide
