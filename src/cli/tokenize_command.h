// `tide tokenize`: encodes JSON lines with a tokenizer.json (or vocab.txt / model folder).
//
//   tide tokenize --tokenizer PATH [--max-length N] < in.jsonl > out.jsonl
// Input lines: {"text": str} or {"text": str, "text_pair": str}.
// Output lines: {"input_ids": [...], "token_type_ids": [...], "attention_mask": [...]}; a line
// that cannot be encoded yields {"error": "..."} and the command exits 1 after the last line.
// Flags have environment twins: TIDE_TOKENIZER, TIDE_MAX_LENGTH.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <string>

namespace CLI {
class App;
}

namespace tide::cli {

void RegisterTokenizeCommand(CLI::App* app);

struct TokenizeCommandOptions {
  std::string tokenizer;  // tokenizer.json, vocab.txt or a model folder
  size_t max_length = 0;  // 0: the tokenizer.json truncation block, if any
};
// The command itself, on streams: returns 0, 1 (some line failed) or 2 (tokenizer not loadable).
int RunTokenizeCommand(const TokenizeCommandOptions& options, std::istream& in, std::ostream& out,
                       std::ostream& err);

}  // namespace tide::cli
