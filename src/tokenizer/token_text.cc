#include "tokenizer/token_text.h"

#include <array>

#include "tokenizer/byte_level.h"

namespace tide::tokenizer {
namespace {

constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // U+2581

// Code point (UTF-8) -> byte of GPT-2's byte-level table, or -1.
int ByteLevelByte(std::string_view utf8_char) {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    for (int b = 0; b < 256; ++b) t[b] = ByteLevelChar(static_cast<unsigned char>(b));
    return t;
  }();
  for (int b = 0; b < 256; ++b) {
    if (table[b] == utf8_char) return b;
  }
  return -1;
}

size_t Utf8Length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;
}

// Whether the piece is written in GPT-2's byte-level alphabet with a mark only it uses: a
// U+0100..U+0143 code point (Ġ for a space, Ċ for a newline, ...).
bool LooksByteLevel(std::string_view piece) {
  for (size_t i = 0; i + 1 < piece.size(); ++i) {
    const unsigned char a = piece[i], b = piece[i + 1];
    if ((a == 0xC4 && b >= 0x80) || (a == 0xC5 && b <= 0x83)) return true;
  }
  return false;
}

std::string FromByteLevel(std::string_view piece) {
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    const size_t n = std::min(Utf8Length(static_cast<unsigned char>(piece[i])), piece.size() - i);
    const int b = ByteLevelByte(piece.substr(i, n));
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
    } else {
      out.append(piece.substr(i, n));
    }
    i += n;
  }
  return out;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// Whether `text` spells `word` at `at` (ASCII letters without case).
bool MatchesAt(std::string_view text, size_t at, std::string_view word) {
  if (word.empty() || at + word.size() > text.size()) return false;
  for (size_t i = 0; i < word.size(); ++i) {
    if (Lower(text[at + i]) != Lower(word[i])) return false;
  }
  return true;
}

std::string_view TrimLeadingSpace(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  return s;
}

void ReplaceAll(std::string* s, std::string_view from, std::string_view to) {
  for (size_t at = s->find(from); at != std::string::npos; at = s->find(from, at + to.size())) {
    s->replace(at, from.size(), to);
  }
}

}  // namespace

std::string PieceText(std::string_view piece) {
  if (piece.size() > 2 && piece.substr(0, 2) == "##") return std::string(piece.substr(2));
  if (LooksByteLevel(piece)) return FromByteLevel(piece);
  std::string out(piece);
  ReplaceAll(&out, kMetaspace, " ");
  return out;
}

std::string Decode(const Tokenizer& tokenizer, std::span<const int64_t> ids, bool skip_special_tokens) {
  std::string out;
  bool wordpiece = false;  // pieces without a space mark: words joined by spaces
  for (int64_t id : ids) {
    if (skip_special_tokens && tokenizer.IsSpecialToken(id)) continue;
    const std::optional<std::string> piece = tokenizer.IdToToken(id);
    if (!piece.has_value()) continue;
    if (piece->size() > 2 && piece->substr(0, 2) == "##") {
      out += piece->substr(2);
      wordpiece = true;
    } else if (LooksByteLevel(*piece) || piece->find(kMetaspace) != std::string::npos) {
      out += PieceText(*piece);
    } else {
      if (!out.empty()) out += ' ';
      out += *piece;
      wordpiece = true;
    }
  }
  if (wordpiece) {
    // HF's WordPiece decoder cleanup (clean_up_tokenization_spaces).
    for (const auto& [from, to] : std::initializer_list<std::pair<std::string_view, std::string_view>>{
             {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
             {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}}) {
      ReplaceAll(&out, from, to);
    }
  }
  // SentencePiece and byte-level text starts with the space of its first word.
  if (!out.empty() && out.front() == ' ' && !wordpiece) out.erase(0, 1);
  return out;
}

std::vector<TokenSpan> AlignTokens(std::string_view text, std::span<const std::string> pieces,
                                   const std::vector<bool>& special) {
  std::vector<TokenSpan> spans(pieces.size());
  size_t cursor = 0;
  std::vector<size_t> pending;  // unaligned pieces since the last aligned one
  auto settle = [&](size_t gap_end) {
    if (pending.size() == 1) {
      size_t start = cursor;
      while (start < gap_end && IsSpace(text[start])) ++start;
      size_t stop = gap_end;
      while (stop > start && IsSpace(text[stop - 1])) --stop;
      if (stop > start) spans[pending[0]] = std::make_pair(start, stop);
    }
    pending.clear();
  };
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (i < special.size() && special[i]) {
      // Spelled by the text right here (after spaces, exactly): the tokenizer found it there. Else
      // the tokenizer added it and it has no place in the text.
      size_t at = cursor;
      while (at < text.size() && IsSpace(text[at])) ++at;
      if (pending.empty() && !pieces[i].empty() && text.substr(at).starts_with(pieces[i])) {
        spans[i] = std::make_pair(at, at + pieces[i].size());
        cursor = at + pieces[i].size();
      } else if (!pending.empty()) {
        // After an unaligned piece, a spelled special token ends the gap (as a word would).
        const size_t found = text.find(pieces[i], at);
        if (found != std::string_view::npos && !pieces[i].empty()) {
          settle(found);
          spans[i] = std::make_pair(found, found + pieces[i].size());
          cursor = found + pieces[i].size();
        }
      }
      continue;
    }
    const std::string piece_text = PieceText(pieces[i]);
    const std::string_view word = TrimLeadingSpace(piece_text);
    if (word.empty()) continue;
    size_t at = cursor;
    while (at < text.size() && IsSpace(text[at])) ++at;
    if (pending.empty() && MatchesAt(text, at, word)) {
      spans[i] = std::make_pair(at, at + word.size());
      cursor = at + word.size();
      continue;
    }
    if (!pending.empty()) {
      // After an unaligned piece: the next place the text spells this one ends the gap.
      size_t found = std::string_view::npos;
      for (size_t p = at; p + word.size() <= text.size(); ++p) {
        if (MatchesAt(text, p, word)) {
          found = p;
          break;
        }
      }
      if (found != std::string_view::npos) {
        settle(found);
        spans[i] = std::make_pair(found, found + word.size());
        cursor = found + word.size();
        continue;
      }
    }
    pending.push_back(i);
  }
  settle(text.size());
  return spans;
}

}  // namespace tide::tokenizer
