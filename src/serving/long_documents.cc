#include "serving/long_documents.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/error.h"
#include "serving/scoring.h"

namespace tide::serving {

namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

struct Word {
  size_t begin = 0;  // bytes in the document
  size_t end = 0;
  size_t tokens = 0;
};

// The whitespace-separated words of `text` with their token counts.
absl::Status Words(const tokenizer::Tokenizer& tokenizer, std::string_view text, std::vector<Word>* words) {
  words->clear();
  std::vector<int64_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && IsSpace(text[i])) ++i;
    if (i == text.size()) break;
    const size_t begin = i;
    while (i < text.size() && !IsSpace(text[i])) ++i;
    if (absl::Status s = tokenizer.Tokenize(text.substr(begin, i - begin), &ids); !s.ok()) return s;
    words->push_back(Word{begin, i, ids.size()});
  }
  return absl::OkStatus();
}

}  // namespace

ChunkOptions ChunkOptionsFor(const ServedModel& model, LongDocuments mode) {
  const config::TideParameters& p = model.parameters();
  ChunkOptions o;
  o.mode = mode;
  o.chunk_tokens = static_cast<size_t>(std::max<int64_t>(p.chunk_tokens, 0));
  o.chunk_stride = static_cast<size_t>(std::max<int64_t>(p.chunk_stride, 0));
  o.max_chunks = static_cast<size_t>(std::max<int64_t>(p.max_chunks_per_document, 1));
  return o;
}

absl::Status SplitLongDocuments(const ServedModel& model, std::string_view query,
                                std::span<const std::string_view> documents, const ChunkOptions& options,
                                DocumentWindows* out) {
  out->windows.clear();
  out->owner.clear();
  out->split = false;
  const tokenizer::Tokenizer& tokenizer = model.tokenizer();
  std::vector<int64_t> ids;
  size_t room = 0;
  if (model.parameters().prompt_template.has_value()) {
    // The document's room inside the prompt (the frame alone too long: the encoder's 422).
    auto encoder = MakePromptEncoder(model, options.instruction, query);
    if (!encoder.ok()) return encoder.status();
    room = encoder->room();
  } else {
    if (absl::Status s = tokenizer.Tokenize(query, &ids); !s.ok()) return s;
    const size_t used = ids.size() + tokenizer.num_special_tokens(/*pair=*/true);
    const size_t max_length = model.max_sequence_length();
    room = max_length > used ? max_length - used : 0;
  }
  constexpr size_t kMinimumRoom = 8;
  std::vector<Word> words;
  for (size_t d = 0; d < documents.size(); ++d) {
    const std::string_view doc = documents[d];
    if (options.mode == LongDocuments::kTruncate || room < kMinimumRoom) {
      out->windows.push_back(doc);
      out->owner.push_back(d);
      continue;
    }
    if (absl::Status s = tokenizer.Tokenize(doc, &ids); !s.ok()) return s;
    if (ids.size() <= room) {  // fits: untouched
      out->windows.push_back(doc);
      out->owner.push_back(d);
      continue;
    }
    const size_t window = options.chunk_tokens > 0 ? std::min(options.chunk_tokens, room) : room;
    const size_t stride = options.chunk_stride > 0 ? std::min(options.chunk_stride, window) : std::max<size_t>(window / 2, 1);
    if (absl::Status s = Words(tokenizer, doc, &words); !s.ok()) return s;
    // starts[i]: tokens before word i.
    std::vector<size_t> starts(words.size() + 1, 0);
    for (size_t i = 0; i < words.size(); ++i) starts[i + 1] = starts[i] + words[i].tokens;
    const size_t first_window = out->windows.size();
    size_t first = 0;
    while (first < words.size()) {
      size_t last = first + 1;  // one past the window's last word; at least one word
      while (last < words.size() && starts[last + 1] - starts[first] <= window) ++last;
      if (out->windows.size() - first_window == options.max_chunks) {
        // Count what it would need, for the message.
        size_t needed = options.max_chunks;
        for (size_t f = first; f < words.size();) {
          ++needed;
          size_t l = f + 1;
          while (l < words.size() && starts[l + 1] - starts[f] <= window) ++l;
          if (l == words.size()) break;
          size_t next = f + 1;
          while (next < words.size() && starts[next] < starts[f] + stride) ++next;
          f = next;
        }
        return errors::InvalidInput(absl::StrCat(
            "texts[", d, "] is ", starts.back(), " tokens and needs ", needed, " windows of ", window,
            " tokens (stride ", stride, "); the model's max_chunks_per_document is ", options.max_chunks));
      }
      out->windows.push_back(doc.substr(words[first].begin, words[last - 1].end - words[first].begin));
      out->owner.push_back(d);
      if (last == words.size()) break;
      size_t next = first + 1;
      while (next < words.size() && starts[next] < starts[first] + stride) ++next;
      first = next;
    }
    if (out->windows.size() - first_window > 1) out->split = true;
  }
  return absl::OkStatus();
}

std::vector<float> FoldWindowScores(LongDocuments mode, std::span<const size_t> owner,
                                    std::span<const float> window_scores, size_t documents) {
  std::vector<float> scores(documents, 0.0f);
  std::vector<size_t> counts(documents, 0);
  for (size_t w = 0; w < owner.size(); ++w) {
    const size_t d = owner[w];
    if (counts[d] == 0 || mode != LongDocuments::kChunkMax) {
      scores[d] = counts[d] == 0 ? window_scores[w] : scores[d] + window_scores[w];
    } else {
      scores[d] = std::max(scores[d], window_scores[w]);
    }
    ++counts[d];
  }
  if (mode == LongDocuments::kChunkMean) {
    for (size_t d = 0; d < documents; ++d) {
      if (counts[d] > 0) scores[d] /= static_cast<float>(counts[d]);
    }
  }
  return scores;
}

}  // namespace tide::serving
