#include "tokenizer/unigram.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/unicode.h"
#include "tokenizer/word_cache.h"

namespace tide::tokenizer {
namespace {

constexpr double kUnkPenalty = 10.0;

// Byte length of the character starting at s[pos]; 1 for a byte that cannot start a complete one.
}  // namespace

void PieceTrie::Build(const std::vector<std::string_view>& keys, const std::vector<int32_t>& values) {
  std::fill(std::begin(root_), std::end(root_), -1);
  nodes_.clear();
  labels_.clear();
  targets_.clear();
  std::vector<uint32_t> order;
  order.reserve(keys.size());
  for (uint32_t i = 0; i < keys.size(); ++i) {
    if (!keys[i].empty()) order.push_back(i);  // an empty key can never match (as in HF)
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return keys[a] < keys[b]; });
  // Builds the node for keys order[lo, hi) that share their first `depth` bytes.
  auto build = [&](auto&& self, size_t lo, size_t hi, size_t depth) -> uint32_t {
    const uint32_t index = static_cast<uint32_t>(nodes_.size());
    nodes_.emplace_back();
    size_t i = lo;
    while (i < hi && keys[order[i]].size() == depth) nodes_[index].value = values[order[i++]];
    std::vector<std::pair<size_t, size_t>> groups;
    while (i < hi) {
      const char c = keys[order[i]][depth];
      size_t j = i + 1;
      while (j < hi && keys[order[j]][depth] == c) ++j;
      groups.emplace_back(i, j);
      i = j;
    }
    const uint32_t first = static_cast<uint32_t>(labels_.size());
    nodes_[index].first_edge = first;
    nodes_[index].num_edges = static_cast<uint32_t>(groups.size());
    labels_.resize(first + groups.size());
    targets_.resize(first + groups.size());
    for (size_t g = 0; g < groups.size(); ++g) {
      labels_[first + g] = static_cast<uint8_t>(keys[order[groups[g].first]][depth]);
      const uint32_t child = self(self, groups[g].first, groups[g].second, depth + 1);
      targets_[first + g] = child;
    }
    return index;
  };
  size_t i = 0;
  while (i < order.size()) {
    const char c = keys[order[i]][0];
    size_t j = i + 1;
    while (j < order.size() && keys[order[j]][0] == c) ++j;
    root_[static_cast<unsigned char>(c)] = static_cast<int32_t>(build(build, i, j, 1));
    i = j;
  }
  dense_.clear();
  for (Node& node : nodes_) {
    if (node.num_edges < kDenseMinEdges) continue;
    node.dense = static_cast<int32_t>(dense_.size() / 256);
    dense_.resize(dense_.size() + 256, -1);
    for (uint32_t e = node.first_edge; e < node.first_edge + node.num_edges; ++e) {
      dense_[static_cast<size_t>(node.dense) * 256 + labels_[e]] = static_cast<int32_t>(targets_[e]);
    }
  }
}

absl::StatusOr<std::unique_ptr<UnigramModel>> UnigramModel::Create(Options options) {
  if (options.vocab.empty()) return absl::InvalidArgumentError("model Unigram: empty vocab");
  if (options.vocab.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError("model Unigram: vocab too large");
  }
  if (!options.unk_id.has_value()) {
    return absl::UnimplementedError(
        "model Unigram: unk_id null is not supported (HF fails on any unknown character)");
  }
  if (*options.unk_id < 0 || static_cast<size_t>(*options.unk_id) >= options.vocab.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model Unigram: unk_id ", *options.unk_id, " is not in the vocab"));
  }
  std::unique_ptr<UnigramModel> m(new UnigramModel());
  const size_t n = options.vocab.size();
  m->pieces_.reserve(n);
  m->scores_.reserve(n);
  m->piece_to_id_.reserve(n);
  double min_score = std::numeric_limits<double>::infinity();
  for (size_t id = 0; id < n; ++id) {
    auto& [piece, score] = options.vocab[id];
    m->pieces_.push_back(std::move(piece));
    m->scores_.push_back(score);
    m->piece_to_id_.insert_or_assign(m->pieces_.back(), static_cast<int32_t>(id));
    min_score = std::min(min_score, score);
  }
  std::vector<std::string_view> keys(m->pieces_.begin(), m->pieces_.end());
  std::vector<int32_t> values(n);
  for (size_t id = 0; id < n; ++id) values[id] = m->piece_to_id_.find(absl::string_view(keys[id].data(), keys[id].size()))->second;
  m->trie_.Build(keys, values);
  m->unk_id_ = static_cast<int32_t>(*options.unk_id);
  m->unk_score_ = min_score - kUnkPenalty;
  m->byte_fallback_ = options.byte_fallback;
  m->cache_owner_ = WordCache::NewOwnerId();
  m->all_bytes_ = true;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = m->piece_to_id_.find(absl::string_view(name));
    m->byte_ids_[b] = it == m->piece_to_id_.end() ? -1 : it->second;
    if (m->byte_ids_[b] < 0) m->all_bytes_ = false;
  }
  return m;
}

void UnigramModel::AppendUnknown(std::string_view text, std::vector<int64_t>* ids) const {
  auto it = piece_to_id_.find(absl::string_view(text.data(), text.size()));
  if (it != piece_to_id_.end()) {
    ids->push_back(it->second);
    return;
  }
  if (byte_fallback_) {
    bool all = all_bytes_;
    if (!all) {
      all = true;
      for (unsigned char b : text) all = all && byte_ids_[b] >= 0;
    }
    if (all) {
      for (unsigned char b : text) ids->push_back(byte_ids_[b]);
      return;
    }
  }
  ids->push_back(unk_id_);
}

void UnigramModel::Tokenize(std::string_view piece, std::vector<int64_t>* ids) const {
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

void UnigramModel::TokenizeUncached(std::string_view piece, std::vector<int64_t>* ids) const {
  struct Node {
    double score;
    int32_t start;  // -1: not reached yet
    int32_t id;
  };
  struct Step {
    int32_t start;
    int32_t end;
    int32_t id;
  };
  thread_local std::vector<Node> best;
  thread_local std::vector<Step> path;
  const size_t n = piece.size();
  if (n == 0) return;
  best.assign(n + 1, Node{0.0, -1, -1});
  for (size_t start = 0; start < n;) {
    const double base = best[start].score;
    const size_t mblen = unicode::CharLength(piece, start);
    bool has_single_node = false;
    trie_.CommonPrefixSearch(piece.substr(start), [&](size_t length, int32_t id) {
      Node& target = best[start + length];
      const double candidate = scores_[id] + base;
      if (target.start < 0 || candidate > target.score) {
        target = Node{candidate, static_cast<int32_t>(start), id};
      }
      if (length == mblen) has_single_node = true;
    });
    if (!has_single_node) {
      Node& target = best[start + mblen];
      const double candidate = unk_score_ + base;
      if (target.start < 0 || candidate > target.score) {
        target = Node{candidate, static_cast<int32_t>(start), unk_id_};
      }
    }
    start += mblen;
  }
  path.clear();
  for (size_t end = n; end > 0;) {
    const Node& node = best[end];
    path.push_back(Step{node.start, static_cast<int32_t>(end), node.id});
    end = static_cast<size_t>(node.start);
  }
  for (size_t i = path.size(); i > 0;) {
    --i;
    if (path[i].id != unk_id_) {
      ids->push_back(path[i].id);
      continue;
    }
    const int32_t begin = path[i].start;
    while (i > 0 && path[i - 1].id == unk_id_) --i;
    AppendUnknown(piece.substr(begin, path[i].end - begin), ids);
  }
}

std::optional<int64_t> UnigramModel::TokenToId(std::string_view token) const {
  auto it = piece_to_id_.find(absl::string_view(token.data(), token.size()));
  if (it == piece_to_id_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> UnigramModel::IdToToken(int64_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) return std::nullopt;
  return pieces_[id];
}

absl::StatusOr<std::unique_ptr<Model>> MakeUnigramModel(const nlohmann::json& json) {
  UnigramModel::Options options;
  auto vocab = json.find("vocab");
  if (vocab == json.end() || !vocab->is_array()) {
    return absl::InvalidArgumentError("model Unigram: \"vocab\" must be an array");
  }
  options.vocab.reserve(vocab->size());
  for (const auto& entry : *vocab) {
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_number()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model Unigram: vocab entry ", options.vocab.size(),
                       " must be [piece, score]"));
    }
    options.vocab.emplace_back(entry[0].get<std::string>(), entry[1].get<double>());
  }
  auto unk = json.find("unk_id");
  if (unk != json.end() && !unk->is_null()) {
    if (!unk->is_number_integer()) {
      return absl::InvalidArgumentError("model Unigram: \"unk_id\" must be an integer");
    }
    options.unk_id = unk->get<int64_t>();
  }
  auto bf = json.find("byte_fallback");
  if (bf != json.end() && !bf->is_null()) {
    if (!bf->is_boolean()) {
      return absl::InvalidArgumentError("model Unigram: \"byte_fallback\" must be a bool");
    }
    options.byte_fallback = bf->get<bool>();
  }
  auto made = UnigramModel::Create(std::move(options));
  if (!made.ok()) return made.status();
  return std::unique_ptr<Model>(*std::move(made));
}

}  // namespace tide::tokenizer
