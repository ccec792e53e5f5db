#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/unicode.h"
#include "tokenizer/word_cache.h"

namespace tide::tokenizer {
namespace {

struct Symbol {
  uint32_t id;
  int32_t prev;
  int32_t next;
  uint32_t len;  // bytes; 0 = merged into its left neighbour
};

struct QueuedMerge {
  uint32_t rank;
  uint32_t pos;
  uint32_t new_id;
  // std::push_heap builds a max-heap: the "largest" is the lowest rank, then the leftmost.
  bool operator<(const QueuedMerge& o) const {
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::Create(Options options) {
  if (options.dropout.has_value() && *options.dropout != 0.0) {
    return absl::UnimplementedError(
        "model BPE: dropout is random (no reproducible ids); only null or 0 is supported");
  }
  std::unique_ptr<BpeModel> m(new BpeModel());
  m->vocab_.reserve(options.vocab.size());
  for (auto& [token, id] : options.vocab) {
    if (id < 0 || id > std::numeric_limits<uint32_t>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model BPE: id ", id, " of \"", token, "\" is out of range"));
    }
    m->vocab_r_.insert_or_assign(static_cast<uint32_t>(id), token);
    m->vocab_.insert_or_assign(std::move(token), static_cast<uint32_t>(id));
  }
  const size_t prefix_len = options.continuing_subword_prefix.size();
  m->merges_.reserve(options.merges.size());
  for (size_t rank = 0; rank < options.merges.size(); ++rank) {
    const auto& [a, b] = options.merges[rank];
    auto ia = m->vocab_.find(a);
    auto ib = m->vocab_.find(b);
    if (ia == m->vocab_.end() || ib == m->vocab_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("model BPE: merge ", rank, " (\"", a,
                                                     "\", \"", b, "\") uses a token not in the vocab"));
    }
    if (b.size() < prefix_len) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model BPE: merge ", rank, " right side \"", b, "\" is shorter than the subword prefix"));
    }
    const std::string merged = a + b.substr(prefix_len);
    auto in = m->vocab_.find(merged);
    if (in == m->vocab_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("model BPE: merge ", rank, " produces \"",
                                                     merged, "\" which is not in the vocab"));
    }
    // A repeated pair keeps its last rank, as HF's map collection does.
    m->merges_.insert_or_assign(PairKey(ia->second, ib->second),
                                Merge{static_cast<uint32_t>(rank), in->second});
  }
  if (options.unk_token.has_value()) {
    auto it = m->vocab_.find(*options.unk_token);
    if (it == m->vocab_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model BPE: unk_token \"", *options.unk_token, "\" is not in the vocab"));
    }
    m->unk_id_ = it->second;
  }
  m->prefix_ = std::move(options.continuing_subword_prefix);
  m->suffix_ = std::move(options.end_of_word_suffix);
  m->fuse_unk_ = options.fuse_unk;
  m->byte_fallback_ = options.byte_fallback;
  m->ignore_merges_ = options.ignore_merges;
  m->cache_owner_ = WordCache::NewOwnerId();
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = m->vocab_.find(absl::string_view(name));
    m->byte_ids_[b] = it == m->vocab_.end() ? -1 : int64_t{it->second};
  }
  return m;
}

void BpeModel::Tokenize(std::string_view piece, std::vector<int64_t>* ids) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    auto it = vocab_.find(absl::string_view(piece.data(), piece.size()));
    if (it != vocab_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  if (!WordCache::Cacheable(piece)) {
    TokenizeUncached(piece, ids);
    return;
  }
  WordCache& cache = WordCache::ForThread(cache_owner_);
  if (cache.Lookup(piece, ids)) return;
  const size_t before = ids->size();
  TokenizeUncached(piece, ids);
  cache.Insert(piece, ids->data() + before, ids->size() - before);
}

void BpeModel::TokenizeUncached(std::string_view piece, std::vector<int64_t>* ids) const {
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<QueuedMerge> queue;
  thread_local std::string affixed;
  symbols.clear();
  auto add = [&](uint32_t id, uint32_t len) {
    const int32_t n = static_cast<int32_t>(symbols.size());
    if (n > 0) symbols.back().next = n;
    symbols.push_back(Symbol{id, n - 1, -1, len});
  };

  // Split into characters, as HF's BPE::merge_word does.
  bool have_unk = false;
  uint32_t unk_len = 0;
  for (size_t i = 0; i < piece.size();) {
    const size_t len = unicode::CharLength(piece, i);
    const bool is_first = i == 0;
    const bool is_last = i + len >= piece.size();
    std::string_view s = piece.substr(i, len);
    if ((!is_first && !prefix_.empty()) || (is_last && !suffix_.empty())) {
      affixed.clear();
      if (!is_first) affixed.append(prefix_);
      affixed.append(s);
      if (is_last) affixed.append(suffix_);
      s = affixed;
    }
    i += len;
    auto it = vocab_.find(absl::string_view(s.data(), s.size()));
    if (it != vocab_.end()) {
      if (have_unk) {
        add(*unk_id_, unk_len);
        have_unk = false;
      }
      add(it->second, static_cast<uint32_t>(len));
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char b : s) all = all && byte_ids_[b] >= 0;
      if (all) {
        // HF adds these without flushing a pending unknown (it lands after them).
        for (unsigned char b : s) add(static_cast<uint32_t>(byte_ids_[b]), 1);
        continue;
      }
    }
    if (unk_id_.has_value()) {
      if (have_unk && fuse_unk_) {
        unk_len += static_cast<uint32_t>(len);
      } else {
        if (have_unk) add(*unk_id_, unk_len);
        have_unk = true;
        unk_len = static_cast<uint32_t>(len);
      }
    }
  }
  if (have_unk) add(*unk_id_, unk_len);

  // Merge by rank (HF's Word::merge_all without dropout).
  queue.clear();
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    auto it = merges_.find(PairKey(symbols[i].id, symbols[i + 1].id));
    if (it != merges_.end()) {
      queue.push_back(QueuedMerge{it->second.rank, static_cast<uint32_t>(i), it->second.new_id});
    }
  }
  std::make_heap(queue.begin(), queue.end());
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end());
    const QueuedMerge top = queue.back();
    queue.pop_back();
    Symbol& left = symbols[top.pos];
    if (left.len == 0 || left.next == -1) continue;
    const size_t next_pos = static_cast<size_t>(left.next);
    const Symbol right = symbols[next_pos];
    auto current = merges_.find(PairKey(left.id, right.id));
    if (current == merges_.end() || current->second.new_id != top.new_id) continue;  // stale
    left.id = top.new_id;
    left.len += right.len;
    left.next = right.next;
    symbols[next_pos].len = 0;
    if (right.next >= 0 && static_cast<size_t>(right.next) < symbols.size()) {
      symbols[right.next].prev = static_cast<int32_t>(top.pos);
    }
    if (left.prev >= 0) {
      auto it = merges_.find(PairKey(symbols[left.prev].id, left.id));
      if (it != merges_.end()) {
        queue.push_back(
            QueuedMerge{it->second.rank, static_cast<uint32_t>(left.prev), it->second.new_id});
        std::push_heap(queue.begin(), queue.end());
      }
    }
    if (left.next >= 0 && static_cast<size_t>(left.next) < symbols.size()) {
      auto it = merges_.find(PairKey(left.id, symbols[left.next].id));
      if (it != merges_.end()) {
        queue.push_back(QueuedMerge{it->second.rank, top.pos, it->second.new_id});
        std::push_heap(queue.begin(), queue.end());
      }
    }
  }
  for (const Symbol& s : symbols) {
    if (s.len != 0) ids->push_back(s.id);
  }
}

std::optional<int64_t> BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(absl::string_view(token.data(), token.size()));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> BpeModel::IdToToken(int64_t id) const {
  if (id < 0 || id > std::numeric_limits<uint32_t>::max()) return std::nullopt;
  auto it = vocab_r_.find(static_cast<uint32_t>(id));
  if (it == vocab_r_.end()) return std::nullopt;
  return it->second;
}

namespace {

absl::Status ReadOptionalString(const nlohmann::json& json, const char* name,
                                std::optional<std::string>* out) {
  auto it = json.find(name);
  if (it == json.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat("model BPE: \"", name, "\" must be a string"));
  }
  *out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status ReadBool(const nlohmann::json& json, const char* name, bool* out) {
  auto it = json.find(name);
  if (it == json.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) {
    return absl::InvalidArgumentError(absl::StrCat("model BPE: \"", name, "\" must be a bool"));
  }
  *out = it->get<bool>();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> MakeBpeModel(const nlohmann::json& json) {
  BpeModel::Options options;
  auto vocab = json.find("vocab");
  if (vocab == json.end() || !vocab->is_object()) {
    return absl::InvalidArgumentError("model BPE: \"vocab\" must be an object {token: id}");
  }
  options.vocab.reserve(vocab->size());
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model BPE: id of \"", it.key(), "\" must be an integer"));
    }
    options.vocab.emplace_back(it.key(), it.value().get<int64_t>());
  }
  auto merges = json.find("merges");
  if (merges != json.end() && !merges->is_null()) {
    if (!merges->is_array()) return absl::InvalidArgumentError("model BPE: \"merges\" must be an array");
    options.merges.reserve(merges->size());
    for (const auto& m : *merges) {
      if (m.is_string()) {
        const std::string& line = m.get_ref<const std::string&>();
        const size_t space = line.find(' ');
        if (space == std::string::npos) {
          return absl::InvalidArgumentError(
              absl::StrCat("model BPE: merge \"", line, "\" is not \"a b\""));
        }
        options.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        options.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      } else {
        return absl::InvalidArgumentError(
            "model BPE: each merge must be \"a b\" or [\"a\", \"b\"]");
      }
    }
  }
  auto dropout = json.find("dropout");
  if (dropout != json.end() && !dropout->is_null()) {
    if (!dropout->is_number()) return absl::InvalidArgumentError("model BPE: \"dropout\" must be a number");
    options.dropout = dropout->get<double>();
  }
  std::optional<std::string> prefix, suffix;
  if (auto s = ReadOptionalString(json, "unk_token", &options.unk_token); !s.ok()) return s;
  if (auto s = ReadOptionalString(json, "continuing_subword_prefix", &prefix); !s.ok()) return s;
  if (auto s = ReadOptionalString(json, "end_of_word_suffix", &suffix); !s.ok()) return s;
  options.continuing_subword_prefix = prefix.value_or("");
  options.end_of_word_suffix = suffix.value_or("");
  if (auto s = ReadBool(json, "fuse_unk", &options.fuse_unk); !s.ok()) return s;
  if (auto s = ReadBool(json, "byte_fallback", &options.byte_fallback); !s.ok()) return s;
  if (auto s = ReadBool(json, "ignore_merges", &options.ignore_merges); !s.ok()) return s;
  auto made = BpeModel::Create(std::move(options));
  if (!made.ok()) return made.status();
  return std::unique_ptr<Model>(*std::move(made));
}

}  // namespace tide::tokenizer
