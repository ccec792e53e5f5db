// tide::loadgen workload — realistic rerank requests: one query and N documents whose token
// counts follow TokenDistributions, made of whole-word vocabulary entries so that a text of N
// words is N tokens for the served model's tokenizer.
//
// Contract:
//  - Vocabulary::FromTokenizer keeps entries that are a plain lowercase ASCII word (after a
//    leading "▁" or "Ġ" word-start marker), are not special and not "##" continuations, and that
//    the tokenizer itself encodes as exactly one token after a space; kFailedPrecondition when
//    fewer than 100 such words exist. Vocabulary::BuiltIn is a fixed English list (for when no
//    tokenizer is given; token counts are then only approximate).
//  - WorkloadGenerator is deterministic: the same Options (seed included) and vocabulary give
//    the same sequence of requests. Not thread-safe (it owns its random generator).
//  - Document token counts are capped at max_document_tokens (0: no cap) — the model truncates
//    beyond its max length anyway, and the cap keeps the client's own work bounded.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loadgen/token_distribution.h"

namespace tide::tokenizer {
class Tokenizer;
}

namespace tide::loadgen {

struct Vocabulary {
  std::vector<std::string> words;
  std::string source;  // "tokenizer (N words)" or "built-in word list"

  static absl::StatusOr<Vocabulary> FromTokenizer(const tokenizer::Tokenizer& tokenizer);
  static Vocabulary BuiltIn();
};

struct RerankWorkload {
  std::string query;
  std::vector<std::string> documents;
  int query_tokens = 0;                // words drawn (= tokens with a tokenizer vocabulary)
  std::vector<int> document_tokens;    // one per document
};

struct WorkloadOptions {
  size_t documents = 16;  // documents per request
  TokenDistribution query_tokens = TokenDistribution::SciFact(TextKind::kQuery);
  TokenDistribution document_tokens = TokenDistribution::SciFact(TextKind::kDocument);
  int max_document_tokens = 512;  // cap per document; 0 = no cap
  uint64_t seed = 42;
};

class WorkloadGenerator {
 public:
  // kInvalidArgument for documents == 0 or an empty vocabulary.
  static absl::StatusOr<std::unique_ptr<WorkloadGenerator>> Create(const WorkloadOptions& options,
                                                                    Vocabulary vocabulary);
  RerankWorkload Next();
  const Vocabulary& vocabulary() const { return vocabulary_; }

 private:
  WorkloadGenerator(const WorkloadOptions& options, Vocabulary vocabulary)
      : options_(options), vocabulary_(std::move(vocabulary)), rng_(options.seed) {}
  std::string Text(int words);

  WorkloadOptions options_;
  Vocabulary vocabulary_;
  std::mt19937_64 rng_;
};

}  // namespace tide::loadgen
