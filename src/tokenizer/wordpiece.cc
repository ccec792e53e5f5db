#include "tokenizer/wordpiece.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/unicode.h"

namespace tide::tokenizer {
namespace {

using json = nlohmann::json;

class WordPieceModel final : public Model {
 public:
  explicit WordPieceModel(WordPieceOptions o) : options_(std::move(o)) {
    const std::string& prefix = options_.continuing_subword_prefix;
    for (size_t id = 0; id < options_.vocab.size(); ++id) {
      const std::string& token = options_.vocab[id];
      if (token.empty()) continue;  // a hole in the id space
      // A token listed twice (vocab.txt) keeps its last id, like HF's HashMap::insert.
      vocab_.insert_or_assign(std::string_view(token), static_cast<int64_t>(id));
      max_token_bytes_ = std::max(max_token_bytes_, token.size());
      if (!prefix.empty() && token.size() > prefix.size() && token.compare(0, prefix.size(), prefix) == 0) {
        continuation_.insert_or_assign(std::string_view(token).substr(prefix.size()),
                                        static_cast<int64_t>(id));
      }
    }
  }

  absl::Status Init() {
    auto it = vocab_.find(options_.unk_token);
    if (it == vocab_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("model WordPiece: unk_token '",
                                                     options_.unk_token, "' is not in the vocab"));
    }
    unk_id_ = it->second;
    return absl::OkStatus();
  }

  void Tokenize(std::string_view word, std::vector<int64_t>* ids) const override {
    if (word.empty()) return;
    // Character count check (max_input_chars_per_word counts chars, not bytes).
    if (word.size() > options_.max_input_chars_per_word) {
      size_t chars = 0;
      for (unsigned char c : word) chars += (c & 0xC0) != 0x80;
      if (chars > options_.max_input_chars_per_word) {
        ids->push_back(unk_id_);
        return;
      }
    }
    const size_t first = ids->size();
    const bool empty_prefix = options_.continuing_subword_prefix.empty();
    size_t start = 0;
    while (start < word.size()) {
      size_t end = word.size();
      // No vocab entry is longer than max_token_bytes_: start below it, on a char boundary.
      if (end - start > max_token_bytes_) {
        end = start + max_token_bytes_;
        while (end > start && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80) --end;
      }
      int64_t found = -1;
      const auto& table = (start == 0 || empty_prefix) ? vocab_ : continuation_;
      while (end > start) {
        std::string_view sub = word.substr(start, end - start);
        auto it = table.find(sub);
        if (it != table.end()) {
          found = it->second;
          break;
        }
        end -= unicode::LastCharLength(sub);
      }
      if (found < 0) {
        ids->resize(first);
        ids->push_back(unk_id_);
        return;
      }
      ids->push_back(found);
      start = end;
    }
  }

  std::optional<int64_t> TokenToId(std::string_view token) const override {
    auto it = vocab_.find(token);
    if (it == vocab_.end()) return std::nullopt;
    return it->second;
  }
  std::optional<std::string> IdToToken(int64_t id) const override {
    if (id < 0 || static_cast<size_t>(id) >= options_.vocab.size()) return std::nullopt;
    return options_.vocab[id];
  }
  size_t vocab_size() const override { return vocab_.size(); }

 private:
  WordPieceOptions options_;
  struct ViewHash {
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  // Keys are views into options_.vocab, which never changes after construction.
  absl::flat_hash_map<std::string_view, int64_t, ViewHash> vocab_;
  // Continuation tokens keyed by their text without the prefix.
  absl::flat_hash_map<std::string_view, int64_t, ViewHash> continuation_;
  size_t max_token_bytes_ = 0;
  int64_t unk_id_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> MakeWordPieceModel(WordPieceOptions options) {
  auto model = std::make_unique<WordPieceModel>(std::move(options));
  if (auto s = model->Init(); !s.ok()) return s;
  return std::unique_ptr<Model>(std::move(model));
}

absl::StatusOr<std::unique_ptr<Model>> MakeWordPieceModelFromJson(const json& j) {
  WordPieceOptions o;
  auto vocab = j.find("vocab");
  if (vocab == j.end() || !vocab->is_object()) {
    return absl::InvalidArgumentError("model WordPiece: 'vocab' must be an object token -> id");
  }
  size_t max_id = 0;
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_unsigned() && !it.value().is_number_integer()) {
      return absl::InvalidArgumentError("model WordPiece: vocab ids must be integers");
    }
    int64_t id = it.value().get<int64_t>();
    if (id < 0 || id > (int64_t{1} << 24)) {
      return absl::InvalidArgumentError(absl::StrCat("model WordPiece: vocab id ", id, " out of range"));
    }
    max_id = std::max(max_id, static_cast<size_t>(id));
  }
  o.vocab.assign(vocab->empty() ? 0 : max_id + 1, std::string());
  std::vector<bool> seen(o.vocab.size(), false);
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    size_t id = it.value().get<size_t>();
    if (seen[id]) {
      return absl::InvalidArgumentError(absl::StrCat("model WordPiece: id ", id, " used twice"));
    }
    seen[id] = true;
    o.vocab[id] = it.key();
  }
  if (auto it = j.find("unk_token"); it != j.end() && it->is_string()) o.unk_token = *it;
  if (auto it = j.find("continuing_subword_prefix"); it != j.end() && it->is_string()) {
    o.continuing_subword_prefix = *it;
  }
  if (auto it = j.find("max_input_chars_per_word"); it != j.end() && it->is_number_unsigned()) {
    o.max_input_chars_per_word = *it;
  }
  return MakeWordPieceModel(std::move(o));
}

absl::StatusOr<std::vector<std::string>> ReadVocabTxt(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read vocab file ", path));
  std::vector<std::string> vocab;
  std::string line;
  while (std::getline(in, line)) {
    // HF's WordPiece::read_file trims trailing whitespace (the line end) of each line.
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n' || line.back() == ' ' ||
                             line.back() == '\t')) {
      line.pop_back();
    }
    vocab.push_back(line);
  }
  if (vocab.empty()) return absl::InvalidArgumentError(absl::StrCat("empty vocab file ", path));
  return vocab;
}

}  // namespace tide::tokenizer
