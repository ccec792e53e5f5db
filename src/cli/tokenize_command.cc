#include "cli/tokenize_command.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "CLI/CLI.hpp"
#include "nlohmann/json.hpp"
#include "tokenizer/tokenizer.h"

namespace tide::cli {
namespace {

using json = nlohmann::json;

std::string ErrorLine(const std::string& message) {
  return json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

int RunTokenizeCommand(const TokenizeCommandOptions& flags, std::istream& in, std::ostream& out,
                       std::ostream& err) {
  auto tok = tokenizer::Tokenizer::FromFile(flags.tokenizer);
  if (!tok.ok()) {
    err << "tide tokenize: " << tok.status().message() << "\n";
    return 2;
  }
  tokenizer::EncodeOptions options;
  if (flags.max_length > 0) options.max_length = flags.max_length;
  tokenizer::Encoding enc;
  bool any_error = false;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json req = json::parse(line, nullptr, /*allow_exceptions=*/false);
    auto text = req.is_object() ? req.find("text") : json::iterator();
    if (!req.is_object() || text == req.end() || !text->is_string()) {
      out << ErrorLine("each line must be a JSON object with a string \"text\"") << "\n";
      any_error = true;
      continue;
    }
    std::optional<std::string> pair;
    if (auto p = req.find("text_pair"); p != req.end() && !p->is_null()) {
      if (!p->is_string()) {
        out << ErrorLine("\"text_pair\" must be a string") << "\n";
        any_error = true;
        continue;
      }
      pair = p->get<std::string>();
    }
    const std::string& t = text->get_ref<const std::string&>();
    absl::Status st = (*tok)->Encode(
        t, pair ? std::optional<std::string_view>(*pair) : std::nullopt, options, &enc);
    if (!st.ok()) {
      out << ErrorLine(std::string(st.message())) << "\n";
      any_error = true;
      continue;
    }
    out << nlohmann::ordered_json{{"input_ids", enc.ids},
                                  {"token_type_ids", enc.type_ids},
                                  {"attention_mask", enc.attention_mask}}
               .dump()
        << "\n";
  }
  out.flush();
  return any_error ? 1 : 0;
}

void RegisterTokenizeCommand(CLI::App* app) {
  auto flags = std::make_shared<TokenizeCommandOptions>();
  CLI::App* cmd = app->add_subcommand(
      "tokenize", "Tokenize JSON lines {\"text\", \"text_pair\"?} from stdin into JSON lines of ids");
  cmd->add_option("--tokenizer", flags->tokenizer, "tokenizer.json, vocab.txt or model folder")
      ->required()
      ->envname("TIDE_TOKENIZER");
  cmd->add_option("--max-length", flags->max_length,
                  "truncate to this many tokens, special tokens included (0: tokenizer.json's)")
      ->envname("TIDE_MAX_LENGTH");
  cmd->callback([flags]() {
    std::ios::sync_with_stdio(false);
    int rc = RunTokenizeCommand(*flags, std::cin, std::cout, std::cerr);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace tide::cli
