// Single-thread tokenization throughput of tide on a corpus of (query, document) pairs shaped
// like reranking traffic (queries ~20 tokens, documents ~300; see ../shared/assets/README.md).
//
//   tokenizer_bench --tokenizer PATH [--pairs N] [--seconds S] [--write-corpus FILE]
// Prints one line: "tide <tokens/s> tokens/s (<pairs> pairs, <tokens> tokens per pass)".
// With --write-corpus it also writes the pairs as JSON lines {"text", "text_pair"} for
// bench/tokenizer/reference_bench.js, which times HF's Rust tokenizer on the same pairs.
// bench/tokenizer/run.sh runs both and prints the ratio.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "corpus.h"
#include "nlohmann/json.hpp"
#include "tokenizer/tokenizer.h"

namespace {

struct Flags {
  std::string tokenizer;
  int pairs = 200;
  double seconds = 3.0;
  std::string write_corpus;
};

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--tokenizer") {
      f->tokenizer = v;
    } else if (k == "--pairs") {
      f->pairs = std::atoi(v.c_str());
    } else if (k == "--seconds") {
      f->seconds = std::atof(v.c_str());
    } else if (k == "--write-corpus") {
      f->write_corpus = v;
    } else {
      return false;
    }
  }
  return !f->tokenizer.empty() && f->pairs > 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) {
    std::fprintf(stderr,
                 "usage: tokenizer_bench --tokenizer PATH [--pairs N] [--seconds S] "
                 "[--write-corpus FILE]\n");
    return 2;
  }
  auto tok = tide::tokenizer::Tokenizer::FromFile(flags.tokenizer);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", std::string(tok.status().message()).c_str());
    return 1;
  }
  std::vector<std::pair<std::string, std::string>> pairs;
  for (int i = 0; i < flags.pairs; ++i) {
    // Documents of 60..500 words (about 80..650 tokens), queries of ~15 words.
    pairs.emplace_back(tide::tokenizer::parity::GenerateQuery(100000 + i, 3 + i % 12),
                       tide::tokenizer::parity::GenerateDocument(200000 + i, 60 + (i * 37) % 440));
  }
  if (!flags.write_corpus.empty()) {
    std::ofstream out(flags.write_corpus, std::ios::binary);
    for (const auto& [q, d] : pairs) {
      out << nlohmann::json{{"text", q}, {"text_pair", d}}.dump() << "\n";
    }
  }
  // No truncation or padding: both sides tokenize every pair in full.
  tide::tokenizer::EncodeOptions options;
  options.truncate = false;
  options.pad_to_max_length = false;
  tide::tokenizer::Encoding enc;
  size_t tokens_per_pass = 0;
  auto pass = [&]() -> size_t {
    size_t tokens = 0;
    for (const auto& [q, d] : pairs) {
      if (!(*tok)->Encode(q, std::string_view(d), options, &enc).ok()) std::abort();
      tokens += enc.size();
    }
    return tokens;
  };
  tokens_per_pass = pass();  // warm-up
  pass();
  using Clock = std::chrono::steady_clock;
  size_t tokens = 0;
  int passes = 0;
  auto start = Clock::now();
  double elapsed = 0;
  do {
    tokens += pass();
    ++passes;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < flags.seconds);
  std::printf("tide %.0f tokens/s (%d pairs, %zu tokens per pass, %d passes)\n",
              static_cast<double>(tokens) / elapsed, flags.pairs, tokens_per_pass, passes);
  return 0;
}
