#include "loadgen/workload.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "tokenizer/tokenizer.h"

namespace tide::loadgen {
namespace {

bool IsLowerAsciiWord(std::string_view s) {
  if (s.size() < 2) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 'a' && c <= 'z'; });
}

// Common English words; used only when no tokenizer is given.
constexpr const char* kBuiltInWords[] = {
    "the", "of", "and", "to", "in", "is", "was", "for", "that", "with", "as", "on", "by", "are",
    "from", "at", "this", "be", "an", "which", "or", "were", "have", "has", "not", "but", "also",
    "cell", "cells", "protein", "gene", "expression", "patients", "study", "results", "analysis",
    "human", "levels", "increased", "associated", "activity", "effect", "effects", "disease",
    "treatment", "clinical", "response", "role", "mice", "data", "function", "model", "risk",
    "cancer", "blood", "high", "low", "significant", "specific", "factor", "factors", "growth",
    "tissue", "during", "between", "after", "both", "these", "than", "may", "can", "more", "most",
    "other", "such", "into", "its", "their", "we", "found", "show", "shown", "using", "used",
    "type", "types", "mechanism", "signaling", "pathway", "binding", "receptor", "immune", "virus",
    "infection", "brain", "heart", "liver", "age", "women", "children", "years", "time", "rate",
    "population", "control", "group", "groups", "trial", "dose", "drug", "therapy", "outcome",
    "evidence", "mutations", "genome", "sequence", "structure", "membrane", "molecular", "early",
    "late", "new", "known", "loss", "reduced", "induced", "mediated", "dependent", "independent",
    "role", "normal", "mouse", "model", "vivo", "vitro", "tumor", "stem", "development", "process"};

}  // namespace

absl::StatusOr<Vocabulary> Vocabulary::FromTokenizer(const tokenizer::Tokenizer& tok) {
  std::vector<int64_t> base_ids, ids;
  if (absl::Status s = tok.Tokenize("the", &base_ids); !s.ok()) return s;
  Vocabulary v;
  for (size_t id = 0; id < tok.vocab_size(); ++id) {
    if (tok.IsSpecialToken(static_cast<int64_t>(id))) continue;
    std::optional<std::string> token = tok.IdToToken(static_cast<int64_t>(id));
    if (!token) continue;
    std::string_view word = *token;
    if (word.starts_with("\xE2\x96\x81")) word.remove_prefix(3);      // ▁ (SentencePiece)
    else if (word.starts_with("\xC4\xA0")) word.remove_prefix(2);     // Ġ (byte-level BPE)
    if (!IsLowerAsciiWord(word)) continue;
    // The tokenizer decides: the word must add exactly one token after a space.
    if (!tok.Tokenize(absl::StrCat("the ", std::string(word)), &ids).ok()) continue;
    if (ids.size() != base_ids.size() + 1) continue;
    v.words.emplace_back(word);
  }
  std::sort(v.words.begin(), v.words.end());
  v.words.erase(std::unique(v.words.begin(), v.words.end()), v.words.end());
  if (v.words.size() < 100)
    return absl::FailedPreconditionError(absl::StrCat(
        "the tokenizer has only ", v.words.size(), " single-token lowercase words (need 100)"));
  v.source = absl::StrCat("tokenizer vocabulary (", v.words.size(), " single-token words)");
  return v;
}

Vocabulary Vocabulary::BuiltIn() {
  Vocabulary v;
  for (const char* w : kBuiltInWords) v.words.emplace_back(w);
  v.source = absl::StrCat("built-in word list (", v.words.size(),
                          " words; token counts approximate)");
  return v;
}

absl::StatusOr<std::unique_ptr<WorkloadGenerator>> WorkloadGenerator::Create(
    const WorkloadOptions& options, Vocabulary vocabulary) {
  if (options.documents == 0) return absl::InvalidArgumentError("documents must be at least 1");
  if (vocabulary.words.empty()) return absl::InvalidArgumentError("empty vocabulary");
  if (options.max_document_tokens < 0)
    return absl::InvalidArgumentError("max_document_tokens must not be negative");
  return std::unique_ptr<WorkloadGenerator>(new WorkloadGenerator(options, std::move(vocabulary)));
}

std::string WorkloadGenerator::Text(int words) {
  std::string text;
  text.reserve(static_cast<size_t>(words) * 8);
  const auto n = static_cast<uint64_t>(vocabulary_.words.size());
  for (int i = 0; i < words; ++i) {
    if (i > 0) text.push_back(' ');
    text += vocabulary_.words[rng_() % n];
  }
  return text;
}

RerankWorkload WorkloadGenerator::Next() {
  RerankWorkload w;
  w.query_tokens = options_.query_tokens.Sample(rng_);
  w.query = Text(w.query_tokens);
  w.documents.reserve(options_.documents);
  w.document_tokens.reserve(options_.documents);
  for (size_t i = 0; i < options_.documents; ++i) {
    int tokens = options_.document_tokens.Sample(rng_);
    if (options_.max_document_tokens > 0) tokens = std::min(tokens, options_.max_document_tokens);
    w.document_tokens.push_back(tokens);
    w.documents.push_back(Text(tokens));
  }
  return w;
}

}  // namespace tide::loadgen
