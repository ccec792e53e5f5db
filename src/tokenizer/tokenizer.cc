// The HF pipeline: added tokens -> normalizer -> pre-tokenizer -> model -> truncation ->
// post-processor -> padding, and the factories that dispatch tokenizer.json components.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/components.h"
#include "tokenizer/metaspace.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/post_processors.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/unicode.h"
#include "tokenizer/wordpiece.h"

namespace tide::tokenizer {

using json = nlohmann::json;

// ---- component dispatch -----------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<Normalizer>> MakeNormalizer(const json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("normalizer: must be an object");
  const std::string type = j.value("type", "");
  if (type == "Precompiled") {
    return MakePrecompiledNormalizer(j);
  }
  return MakeWordPieceFamilyNormalizer(j);
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> MakePreTokenizer(const json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("pre_tokenizer: must be an object");
  const std::string type = j.value("type", "");
  if (type == "Metaspace" || type == "Split" || type == "ByteLevel") {
    if (type == "Metaspace") return MakeMetaspacePreTokenizer(j);
    if (type == "Split") return MakeSplitPreTokenizer(j);
    return MakeByteLevelPreTokenizer(j);
  }
  return MakeWordPieceFamilyPreTokenizer(j);
}

namespace {
// The old tokenizer.json format has no model "type"; HF picks the variant whose fields fit.
std::string ModelType(const json& j) {
  if (auto it = j.find("type"); it != j.end() && it->is_string()) return *it;
  auto vocab = j.find("vocab");
  if (vocab != j.end() && vocab->is_array()) return "Unigram";
  if (j.contains("merges")) return "BPE";
  if (j.contains("continuing_subword_prefix") || j.contains("max_input_chars_per_word")) {
    return "WordPiece";
  }
  if (vocab != j.end() && vocab->is_object()) return "WordLevel";
  return "";
}
}  // namespace

absl::StatusOr<std::unique_ptr<Model>> MakeModel(const json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("model: must be an object");
  const std::string type = ModelType(j);
  if (type == "WordPiece") return MakeWordPieceModelFromJson(j);
  if (type == "Unigram" || type == "BPE") {
    json typed = j;
    typed["type"] = type;
    if (type == "Unigram") return MakeUnigramModel(typed);
    return MakeBpeModel(typed);
  }
  if (type.empty()) return absl::InvalidArgumentError("model: cannot tell its type");
  return absl::UnimplementedError(absl::StrCat("model ", type, ": not supported by tide"));
}

namespace {

struct TruncationParams {
  size_t max_length = 0;
  TruncationStrategy strategy = TruncationStrategy::kLongestFirst;
  TruncationDirection direction = TruncationDirection::kRight;
};

struct PaddingParams {
  std::optional<size_t> fixed_length;  // unset: BatchLongest
  bool left = false;
  size_t pad_to_multiple_of = 0;
  int64_t pad_id = 0;
  int64_t pad_type_id = 0;
};

// Per-thread buffers of the hot path; reused across calls so steady state does not allocate.
struct Scratch {
  std::string normalized;
  std::vector<TextSegment> raw_segments, normalized_segments;
  std::vector<std::pair<uint32_t, uint32_t>> spans;
  Pieces pieces, pieces_tmp;
  std::vector<int64_t> ids_a, ids_b, trunc_a, trunc_b;
};
Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

class PipelineTokenizer final : public Tokenizer {
 public:
  PipelineTokenizer(std::unique_ptr<Normalizer> normalizer, std::unique_ptr<PreTokenizer> pre,
                    std::unique_ptr<Model> model, std::unique_ptr<PostProcessor> post,
                    AddedVocabulary added, std::optional<TruncationParams> truncation,
                    std::optional<PaddingParams> padding)
      : normalizer_(std::move(normalizer)),
        pre_tokenizer_(std::move(pre)),
        model_(std::move(model)),
        post_processor_(std::move(post)),
        added_(std::move(added)),
        truncation_(truncation),
        padding_(padding) {
    metaspace_ = dynamic_cast<const MetaspacePreTokenizer*>(pre_tokenizer_.get());
    if (padding_) {
      pad_id_ = padding_->pad_id;
    } else if (auto id = TokenToId("[PAD]")) {
      pad_id_ = *id;
    } else if (auto id2 = TokenToId("<pad>")) {
      pad_id_ = *id2;
    }
  }

  absl::Status Encode(std::string_view text, std::optional<std::string_view> pair,
                      const EncodeOptions& options, Encoding* out) const override {
    Scratch& s = ThreadScratch();
    const size_t stop_at = EarlyStop(options);
    if (auto st = TokenizeSequence(text, &s.ids_a, stop_at); !st.ok()) return st;
    if (pair.has_value()) {
      if (auto st = TokenizeSequence(*pair, &s.ids_b, stop_at); !st.ok()) return st;
    }
    if (auto st = Finish(s.ids_a, pair.has_value() ? &s.ids_b : nullptr, options, out); !st.ok()) {
      return st;
    }
    PadBatch(options, std::span<Encoding>(out, 1));
    return absl::OkStatus();
  }

  absl::Status EncodePairs(std::string_view query, std::span<const std::string_view> docs,
                           const EncodeOptions& options,
                           std::vector<Encoding>* out) const override {
    Scratch& s = ThreadScratch();
    out->resize(docs.size());
    const size_t stop_at = EarlyStop(options);
    if (auto st = TokenizeSequence(query, &s.ids_a, stop_at); !st.ok()) return st;
    for (size_t i = 0; i < docs.size(); ++i) {
      if (auto st = TokenizeSequence(docs[i], &s.ids_b, stop_at); !st.ok()) return st;
      if (auto st = Finish(s.ids_a, &s.ids_b, options, &(*out)[i]); !st.ok()) return st;
    }
    PadBatch(options, std::span<Encoding>(*out));
    return absl::OkStatus();
  }

  absl::Status Tokenize(std::string_view text, std::vector<int64_t>* ids) const override {
    return TokenizeSequence(text, ids, kNoStop);
  }

  // Overrides Tokenizer::IsSpecialToken where the header declares it (no `override` so this
  // file also builds against the header without it).
  bool IsSpecialToken(int64_t id) const {
    for (const AddedToken& t : added_.tokens()) {
      if (t.id == id && t.special) return true;
    }
    return false;
  }

  std::optional<int64_t> TokenToId(std::string_view token) const override {
    if (auto id = added_.TokenToId(token)) return id;
    return model_->TokenToId(token);
  }
  std::optional<std::string> IdToToken(int64_t id) const override {
    if (auto t = added_.IdToToken(id)) return t;
    return model_->IdToToken(id);
  }
  size_t vocab_size() const override {
    size_t n = model_->vocab_size();
    for (const auto& t : added_.tokens()) {
      if (!model_->TokenToId(t.content).has_value()) n = std::max(n, static_cast<size_t>(t.id) + 1);
    }
    return n;
  }
  int64_t pad_id() const override { return pad_id_; }
  size_t num_special_tokens(bool pair) const override {
    return post_processor_->AddedTokens(pair);
  }
  std::optional<size_t> default_max_length() const override {
    if (truncation_) return truncation_->max_length;
    return std::nullopt;
  }

 private:
  static constexpr size_t kNoStop = std::numeric_limits<size_t>::max();

  // HF (since 0.23) stops tokenizing a sequence once a piece brings it to max_length tokens when
  // truncating on the right; the clipped lengths then decide LongestFirst's split, so tide stops
  // at the same piece (measured against the reference). It also saves work on long documents.
  size_t EarlyStop(const EncodeOptions& o) const {
    auto params = ResolveTruncation(o);
    if (!params || params->direction != TruncationDirection::kRight) return kNoStop;
    return params->max_length;
  }

  // Ids of one sequence without special tokens (HF: added vocabulary + normalizer + pre-tokenizer
  // + model); stops after the piece that brings it to `stop_at` ids.
  absl::Status TokenizeSequence(std::string_view text, std::vector<int64_t>* ids,
                                size_t stop_at) const {
    ids->clear();
    if (!unicode::IsValidUtf8(text)) {
      return absl::InvalidArgumentError("tokenizer: input text is not valid UTF-8");
    }
    Scratch& s = ThreadScratch();
    if (!added_.has_raw()) {
      TokenizeNormalizable(text, ids, stop_at, /*at_text_start=*/true);
      return absl::OkStatus();
    }
    s.raw_segments.clear();
    added_.SplitRaw(text, &s.raw_segments);
    for (const TextSegment& seg : s.raw_segments) {
      if (ids->size() >= stop_at) break;
      if (seg.id >= 0) {
        ids->push_back(seg.id);
      } else {
        TokenizeNormalizable(text.substr(seg.begin, seg.end - seg.begin), ids, stop_at, seg.begin == 0);
      }
    }
    return absl::OkStatus();
  }

  // `at_text_start`: `piece` begins at offset 0 of the input (Metaspace's prepend_scheme "first"
  // prefixes only that section, as HF does).
  void TokenizeNormalizable(std::string_view piece, std::vector<int64_t>* ids,
                            size_t stop_at, bool at_text_start) const {
    if (piece.empty()) return;
    Scratch& s = ThreadScratch();
    s.normalized.assign(piece.data(), piece.size());
    if (normalizer_ != nullptr) normalizer_->Normalize(&s.normalized);
    const std::string_view norm = s.normalized;
    if (!added_.has_normalized()) {
      PreTokenizeAndModel(norm, ids, stop_at, at_text_start);
      return;
    }
    s.normalized_segments.clear();
    added_.SplitNormalized(norm, &s.normalized_segments);
    for (const TextSegment& seg : s.normalized_segments) {
      if (ids->size() >= stop_at) break;
      if (seg.id >= 0) {
        ids->push_back(seg.id);
      } else {
        PreTokenizeAndModel(norm.substr(seg.begin, seg.end - seg.begin), ids, stop_at,
                            at_text_start && seg.begin == 0);
      }
    }
  }

  void PreTokenizeAndModel(std::string_view text, std::vector<int64_t>* ids,
                           size_t stop_at, bool at_text_start) const {
    if (text.empty()) return;
    if (pre_tokenizer_ == nullptr) {
      model_->Tokenize(text, ids);
      return;
    }
    Scratch& s = ThreadScratch();
    s.spans.clear();
    if (pre_tokenizer_->Split(text, &s.spans)) {
      for (auto [b, e] : s.spans) {
        if (ids->size() >= stop_at) return;
        model_->Tokenize(text.substr(b, e - b), ids);
      }
      return;
    }
    s.pieces.clear();
    s.pieces.emplace_back(text);
    if (metaspace_ != nullptr && !at_text_start) {
      metaspace_->PreTokenizeSections(&s.pieces, &s.pieces_tmp, /*first_section_starts_text=*/false);
    } else {
      pre_tokenizer_->PreTokenize(&s.pieces, &s.pieces_tmp);
    }
    for (const std::string& p : s.pieces) {
      if (ids->size() >= stop_at) return;
      if (!p.empty()) model_->Tokenize(p, ids);
    }
  }

  std::optional<TruncationParams> ResolveTruncation(const EncodeOptions& o) const {
    if (!o.truncate) return std::nullopt;
    if (!o.max_length.has_value() && !truncation_.has_value()) return std::nullopt;
    TruncationParams p = truncation_.value_or(TruncationParams{});
    if (o.max_length) p.max_length = *o.max_length;
    if (o.strategy) p.strategy = *o.strategy;
    if (o.direction) p.direction = *o.direction;
    return p;
  }

  // Truncation (HF truncate_encodings), post-processing and the attention mask.
  absl::Status Finish(const std::vector<int64_t>& a, const std::vector<int64_t>* b,
                      const EncodeOptions& o, Encoding* out) const {
    const bool is_pair = b != nullptr;
    const size_t added = o.add_special_tokens ? post_processor_->AddedTokens(is_pair) : 0;
    size_t na = a.size(), nb = is_pair ? b->size() : 0;
    out->untruncated_length = na + nb + added;
    const std::vector<int64_t>* ta = &a;
    const std::vector<int64_t>* tb = b;
    if (auto params = ResolveTruncation(o)) {
      if (params->max_length < added) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tokenizer: max_length ", params->max_length, " is shorter than the ", added,
            " special tokens"));
      }
      const size_t max_length = params->max_length - added;
      if (na + nb > max_length) {
        const size_t to_remove = na + nb - max_length;
        switch (params->strategy) {
          case TruncationStrategy::kLongestFirst:
            if (is_pair) {
              // HF's LongestFirst for pairs (lengths already clipped by EarlyStop): the
              // shorter side keeps its length when the longer can take the rest, else both get
              // half, the longer one the odd token.
              size_t n1 = na, n2 = nb;
              const bool swap = n1 > n2;
              if (swap) std::swap(n1, n2);
              n2 = n1 > max_length ? n1 : std::max(n1, max_length - n1);
              if (n1 + n2 > max_length) {
                n1 = max_length / 2;
                n2 = n1 + max_length % 2;
              }
              if (swap) std::swap(n1, n2);
              na = std::min(na, n1);
              nb = std::min(nb, n2);
            } else {
              na = max_length;
            }
            break;
          case TruncationStrategy::kOnlyFirst:
          case TruncationStrategy::kOnlySecond: {
            const bool first = params->strategy == TruncationStrategy::kOnlyFirst;
            if (!first && !is_pair) {
              return absl::InvalidArgumentError(
                  "tokenizer: truncation OnlySecond needs a second sequence");
            }
            size_t& target = first ? na : nb;
            if (target > to_remove) {
              target -= to_remove;
            } else {
              return absl::InvalidArgumentError(
                  "tokenizer: sequence to truncate too short to respect the provided max_length");
            }
            break;
          }
        }
        Scratch& s = ThreadScratch();
        const bool left = params->direction == TruncationDirection::kLeft;
        auto cut = [left](const std::vector<int64_t>& src, size_t n, std::vector<int64_t>* dst) {
          if (left) {
            dst->assign(src.end() - static_cast<std::ptrdiff_t>(n), src.end());
          } else {
            dst->assign(src.begin(), src.begin() + static_cast<std::ptrdiff_t>(n));
          }
        };
        if (na < a.size()) {
          cut(a, na, &s.trunc_a);
          ta = &s.trunc_a;
        }
        if (is_pair && nb < b->size()) {
          cut(*b, nb, &s.trunc_b);
          tb = &s.trunc_b;
        }
      }
    }
    if (o.add_special_tokens) {
      post_processor_->Process(*ta, tb, &out->ids, &out->type_ids);
    } else {
      post_processor_->ProcessWithoutSpecialTokens(*ta, tb, &out->ids, &out->type_ids);
    }
    out->attention_mask.assign(out->ids.size(), 1);
    return absl::OkStatus();
  }

  // HF pad_encodings over one call's encodings.
  void PadBatch(const EncodeOptions& o, std::span<Encoding> encodings) const {
    PaddingParams p;
    size_t target = 0;
    if (o.pad_to_max_length.has_value()) {
      if (!*o.pad_to_max_length) return;
      auto trunc = ResolveTruncation(o);
      size_t max_length = o.max_length.value_or(trunc ? trunc->max_length : 0);
      if (max_length == 0) return;
      p = padding_.value_or(PaddingParams{});
      if (!padding_) p.pad_id = pad_id_;
      target = max_length;
    } else if (padding_) {
      p = *padding_;
      if (p.fixed_length) {
        target = *p.fixed_length;
      } else {
        for (const Encoding& e : encodings) target = std::max(target, e.size());
      }
    } else {
      return;
    }
    if (p.pad_to_multiple_of > 0 && target % p.pad_to_multiple_of != 0) {
      target += p.pad_to_multiple_of - target % p.pad_to_multiple_of;
    }
    for (Encoding& e : encodings) {
      if (e.size() >= target) continue;
      const size_t n = target - e.size();
      if (p.left) {
        e.ids.insert(e.ids.begin(), n, p.pad_id);
        e.type_ids.insert(e.type_ids.begin(), n, p.pad_type_id);
        e.attention_mask.insert(e.attention_mask.begin(), n, 0);
      } else {
        e.ids.insert(e.ids.end(), n, p.pad_id);
        e.type_ids.insert(e.type_ids.end(), n, p.pad_type_id);
        e.attention_mask.insert(e.attention_mask.end(), n, 0);
      }
    }
  }

  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  // pre_tokenizer_ when it is a Metaspace (its "first" scheme needs to know where a section starts).
  const class MetaspacePreTokenizer* metaspace_ = nullptr;
  std::unique_ptr<Model> model_;
  std::unique_ptr<PostProcessor> post_processor_;
  AddedVocabulary added_;
  std::optional<TruncationParams> truncation_;
  std::optional<PaddingParams> padding_;
  int64_t pad_id_ = 0;
};

absl::Status WithSource(const absl::Status& s, std::string_view source) {
  return absl::Status(s.code(), absl::StrCat(std::string(source), ": ", s.message()));
}

absl::StatusOr<std::optional<TruncationParams>> ParseTruncation(const json& j) {
  if (j.is_null()) return std::optional<TruncationParams>();
  if (!j.is_object()) return absl::InvalidArgumentError("truncation: must be an object or null");
  TruncationParams p;
  auto ml = j.find("max_length");
  if (ml == j.end() || !ml->is_number_unsigned()) {
    return absl::InvalidArgumentError("truncation: 'max_length' must be a non-negative integer");
  }
  p.max_length = ml->get<size_t>();
  const std::string strategy = j.value("strategy", "LongestFirst");
  if (strategy == "LongestFirst") {
    p.strategy = TruncationStrategy::kLongestFirst;
  } else if (strategy == "OnlyFirst") {
    p.strategy = TruncationStrategy::kOnlyFirst;
  } else if (strategy == "OnlySecond") {
    p.strategy = TruncationStrategy::kOnlySecond;
  } else {
    return absl::UnimplementedError(absl::StrCat("truncation: strategy '", strategy, "' not supported"));
  }
  const std::string direction = j.value("direction", "Right");
  if (direction == "Right") {
    p.direction = TruncationDirection::kRight;
  } else if (direction == "Left") {
    p.direction = TruncationDirection::kLeft;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("truncation: direction '", direction, "'"));
  }
  return std::optional<TruncationParams>(p);
}

absl::StatusOr<std::optional<PaddingParams>> ParsePadding(const json& j) {
  if (j.is_null()) return std::optional<PaddingParams>();
  if (!j.is_object()) return absl::InvalidArgumentError("padding: must be an object or null");
  PaddingParams p;
  auto strategy = j.find("strategy");
  if (strategy != j.end() && strategy->is_object()) {
    auto fixed = strategy->find("Fixed");
    if (fixed == strategy->end() || !fixed->is_number_unsigned()) {
      return absl::InvalidArgumentError("padding: strategy must be BatchLongest or {Fixed: n}");
    }
    p.fixed_length = fixed->get<size_t>();
  } else if (strategy != j.end() && !(strategy->is_string() && *strategy == "BatchLongest")) {
    return absl::InvalidArgumentError("padding: strategy must be BatchLongest or {Fixed: n}");
  }
  const std::string direction = j.value("direction", "Right");
  if (direction != "Right" && direction != "Left") {
    return absl::InvalidArgumentError(absl::StrCat("padding: direction '", direction, "'"));
  }
  p.left = direction == "Left";
  if (auto m = j.find("pad_to_multiple_of"); m != j.end() && m->is_number_unsigned()) {
    p.pad_to_multiple_of = m->get<size_t>();
  }
  if (auto id = j.find("pad_id"); id != j.end() && id->is_number_integer()) p.pad_id = *id;
  if (auto t = j.find("pad_type_id"); t != j.end() && t->is_number_integer()) p.pad_type_id = *t;
  return std::optional<PaddingParams>(p);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

}  // namespace

namespace {
absl::StatusOr<std::unique_ptr<Tokenizer>> FromJsonImpl(std::string_view text, std::string_view source);
}  // namespace

// nlohmann's typed accessors (value(), get<>()) throw on a field of the wrong JSON type; a hostile
// tokenizer.json must come back as INVALID_ARGUMENT, never as an exception (found by fuzz_tokenizer).
absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(std::string_view text,
                                                               std::string_view source) {
  try {
    return FromJsonImpl(text, source);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(source), ": malformed tokenizer.json: ", e.what()));
  }
}

namespace {
absl::StatusOr<std::unique_ptr<Tokenizer>> FromJsonImpl(std::string_view text, std::string_view source) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(source), ": not a JSON object"));
  }
  auto component = [&](const char* key) -> const json& {
    static const json kNull;
    auto it = j.find(key);
    return it == j.end() ? kNull : *it;
  };
  std::unique_ptr<Normalizer> normalizer;
  if (!component("normalizer").is_null()) {
    auto n = MakeNormalizer(component("normalizer"));
    if (!n.ok()) return WithSource(n.status(), source);
    normalizer = *std::move(n);
  }
  std::unique_ptr<PreTokenizer> pre;
  if (!component("pre_tokenizer").is_null()) {
    auto p = MakePreTokenizer(component("pre_tokenizer"));
    if (!p.ok()) return WithSource(p.status(), source);
    pre = *std::move(p);
  }
  if (component("model").is_null()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(source), ": model is missing"));
  }
  auto model = MakeModel(component("model"));
  if (!model.ok()) return WithSource(model.status(), source);
  auto post = MakePostProcessor(component("post_processor"), **model);
  if (!post.ok()) return WithSource(post.status(), source);
  auto tokens = AddedVocabulary::ParseJson(component("added_tokens"));
  if (!tokens.ok()) return WithSource(tokens.status(), source);
  auto added = AddedVocabulary::Create(*std::move(tokens), normalizer.get());
  if (!added.ok()) return WithSource(added.status(), source);
  auto truncation = ParseTruncation(component("truncation"));
  if (!truncation.ok()) return WithSource(truncation.status(), source);
  auto padding = ParsePadding(component("padding"));
  if (!padding.ok()) return WithSource(padding.status(), source);
  return std::unique_ptr<Tokenizer>(new PipelineTokenizer(
      std::move(normalizer), std::move(pre), *std::move(model), *std::move(post),
      *std::move(added), *truncation, *padding));
}
}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromVocabTxt(const std::string& path,
                                                                   bool lowercase) {
  auto vocab = ReadVocabTxt(path);
  if (!vocab.ok()) return vocab.status();
  WordPieceOptions wp;
  wp.vocab = *std::move(vocab);
  auto model = MakeWordPieceModel(std::move(wp));
  if (!model.ok()) return WithSource(model.status(), path);
  auto cls = (*model)->TokenToId("[CLS]");
  auto sep = (*model)->TokenToId("[SEP]");
  if (!cls || !sep) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": vocab lacks [CLS] or [SEP]"));
  }
  // The layout HF's BertTokenizerFast gives a vocab.txt: BertNormalizer, BertPreTokenizer,
  // WordPiece, [CLS] A [SEP] B [SEP], and the five special tokens matched before normalization.
  std::vector<AddedToken> specials;
  for (const char* t : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) {
    if (auto id = (*model)->TokenToId(t)) {
      AddedToken tok;
      tok.content = t;
      tok.id = *id;
      tok.normalized = false;
      tok.special = true;
      specials.push_back(std::move(tok));
    }
  }
  BertNormalizerOptions no;
  no.lowercase = lowercase;
  auto normalizer = MakeBertNormalizer(no);
  auto added = AddedVocabulary::Create(std::move(specials), normalizer.get());
  if (!added.ok()) return WithSource(added.status(), path);
  auto pre = MakePreTokenizer(json{{"type", "BertPreTokenizer"}});
  auto post = MakePostProcessor(
      json{{"type", "BertProcessing"}, {"cls", {"[CLS]", *cls}}, {"sep", {"[SEP]", *sep}}}, **model);
  if (!pre.ok() || !post.ok()) return absl::InternalError("tokenizer: BERT components failed");
  return std::unique_ptr<Tokenizer>(new PipelineTokenizer(
      std::move(normalizer), *std::move(pre), *std::move(model), *std::move(post),
      *std::move(added), std::nullopt, std::nullopt));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    // A HuggingFace model folder: prefer tokenizer.json, else vocab.txt.
    std::filesystem::path dir(path);
    if (std::filesystem::exists(dir / "tokenizer.json", ec)) return FromFile((dir / "tokenizer.json").string());
    if (std::filesystem::exists(dir / "vocab.txt", ec)) return FromVocabTxt((dir / "vocab.txt").string());
    return absl::NotFoundError(absl::StrCat(path, ": no tokenizer.json or vocab.txt in folder"));
  }
  if (absl::EndsWith(path, ".txt")) return FromVocabTxt(path);
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return FromJson(*text, path);
}

}  // namespace tide::tokenizer
