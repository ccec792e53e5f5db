#include "tokenizer/byte_level.h"

#include <array>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "tokenizer/unicode.h"

namespace tide::tokenizer {
namespace {

std::array<std::string, 256> BuildTable() {
  std::array<std::string, 256> table;
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    unicode::Append(printable ? char32_t(b) : next++, &table[b]);
  }
  return table;
}

}  // namespace

const std::string& ByteLevelChar(unsigned char byte) {
  static const std::array<std::string, 256> table = BuildTable();
  return table[byte];
}

void AppendByteLevel(std::string_view bytes, std::string* out) {
  for (unsigned char b : bytes) out->append(ByteLevelChar(b));
}

absl::StatusOr<std::unique_ptr<ByteLevelPreTokenizer>> ByteLevelPreTokenizer::Create(
    const Options& options) {
  std::unique_ptr<ByteLevelPreTokenizer> p(new ByteLevelPreTokenizer(options));
  if (options.use_regex) {
    auto regex = Regex::Compile(kGpt2SplitPattern);
    if (!regex.ok()) return regex.status();
    p->regex_ = *std::move(regex);
  }
  return p;
}

void ByteLevelPreTokenizer::PreTokenize(Pieces* pieces, Pieces* scratch) const {
  thread_local std::string prefixed;
  thread_local std::vector<std::pair<size_t, size_t>> matches;
  scratch->clear();
  for (const std::string& piece : *pieces) {
    if (piece.empty()) continue;  // HF never prepends to an empty split
    std::string_view text = piece;
    if (options_.add_prefix_space && piece[0] != ' ') {
      prefixed.assign(1, ' ');
      prefixed.append(piece);
      text = prefixed;
    }
    if (regex_ == nullptr) {
      scratch->emplace_back();
      AppendByteLevel(text, &scratch->back());
      continue;
    }
    matches.clear();
    regex_->FindAll(text, &matches);
    // Isolated: matches and the gaps between them are pieces; empty ones are dropped.
    size_t prev = 0;
    auto emit = [&](size_t begin, size_t end) {
      if (end <= begin) return;
      scratch->emplace_back();
      std::string& out = scratch->back();
      out.reserve(2 * (end - begin));
      AppendByteLevel(text.substr(begin, end - begin), &out);
    };
    for (const auto& [s, e] : matches) {
      emit(prev, s);
      emit(s, e);
      prev = e;
    }
    emit(prev, text.size());
  }
  pieces->swap(*scratch);
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> MakeByteLevelPreTokenizer(const nlohmann::json& json) {
  ByteLevelPreTokenizer::Options options;
  for (auto [name, field] : {std::pair{"add_prefix_space", &options.add_prefix_space},
                             std::pair{"use_regex", &options.use_regex},
                             std::pair{"trim_offsets", &options.trim_offsets}}) {
    auto it = json.find(name);
    if (it == json.end() || it->is_null()) continue;
    if (!it->is_boolean()) {
      return absl::InvalidArgumentError(
          std::string("pre_tokenizer ByteLevel: \"") + name + "\" must be a bool");
    }
    *field = it->get<bool>();
  }
  auto made = ByteLevelPreTokenizer::Create(options);
  if (!made.ok()) return made.status();
  return std::unique_ptr<PreTokenizer>(*std::move(made));
}

}  // namespace tide::tokenizer
