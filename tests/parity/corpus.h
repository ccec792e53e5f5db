// Deterministic text corpus for tokenizer parity tests and benchmarks. Every category the
// tokenizer issue lists is generated from a fixed seed (no third-party text): ASCII, accents and
// combining marks, CJK, Thai, Arabic, emoji and ZWJ sequences, control and zero-width characters,
// NBSP and other Unicode spaces, words longer than 100 characters, URLs, numbers, empty and
// whitespace-only strings, mixed scripts, and the special-token strings of common tokenizers.
//
// Contract: pure functions of the seed; thread-safe; output is valid UTF-8.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tide::tokenizer::parity {

struct CorpusText {
  std::string category;  // e.g. "emoji", "long_word"
  std::string text;
};

// About `per_category` texts for each category (empty/whitespace categories have fewer).
std::vector<CorpusText> GenerateTexts(uint64_t seed, int per_category);

// A document of roughly `words` words mixing all categories (for truncation and benchmarks).
std::string GenerateDocument(uint64_t seed, int words);

// A query-like short text of a few words.
std::string GenerateQuery(uint64_t seed, int words);

}  // namespace tide::tokenizer::parity
