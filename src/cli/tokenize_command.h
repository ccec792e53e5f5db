// `tide tokenize`: encodes JSON lines with a tokenizer.json (or vocab.txt / model folder).
//
//   tide tokenize --tokenizer PATH [--max-length N] < in.jsonl > out.jsonl
// Input lines: {"text": str} or {"text": str, "text_pair": str}.
// Output lines: {"input_ids": [...], "token_type_ids": [...], "attention_mask": [...]}; a line
// that cannot be encoded yields {"error": "..."} and the command exits 1 after the last line.
// Flags have environment twins: TIDE_TOKENIZER, TIDE_MAX_LENGTH.
#pragma once

namespace CLI {
class App;
}

namespace tide::cli {

void RegisterTokenizeCommand(CLI::App* app);

}  // namespace tide::cli
