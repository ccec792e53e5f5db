#include "tokenizer/post_processors.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tide::tokenizer {
namespace {

using json = nlohmann::json;
using Ids = std::vector<int64_t>;

void Append(const Ids& src, int64_t type_id, Ids* ids, Ids* type_ids) {
  ids->insert(ids->end(), src.begin(), src.end());
  type_ids->insert(type_ids->end(), src.size(), type_id);
}

class DefaultPostProcessor final : public PostProcessor {
 public:
  size_t AddedTokens(bool) const override { return 0; }
  void Process(const Ids& a, const Ids* b, Ids* ids, Ids* type_ids) const override {
    ProcessWithoutSpecialTokens(a, b, ids, type_ids);
  }
};

// [CLS] A [SEP] (B [SEP]); type ids 0 for the first part, 1 for B and its [SEP].
class BertProcessing final : public PostProcessor {
 public:
  BertProcessing(int64_t cls, int64_t sep) : cls_(cls), sep_(sep) {}
  size_t AddedTokens(bool is_pair) const override { return is_pair ? 3 : 2; }
  void Process(const Ids& a, const Ids* b, Ids* ids, Ids* type_ids) const override {
    ids->clear();
    type_ids->clear();
    ids->push_back(cls_);
    type_ids->push_back(0);
    Append(a, 0, ids, type_ids);
    ids->push_back(sep_);
    type_ids->push_back(0);
    if (b != nullptr) {
      Append(*b, 1, ids, type_ids);
      ids->push_back(sep_);
      type_ids->push_back(1);
    }
  }

 private:
  int64_t cls_, sep_;
};

// <s> A </s> (</s> B </s>); all type ids 0, with or without special tokens.
class RobertaProcessing final : public PostProcessor {
 public:
  RobertaProcessing(int64_t cls, int64_t sep) : cls_(cls), sep_(sep) {}
  size_t AddedTokens(bool is_pair) const override { return is_pair ? 4 : 2; }
  void Process(const Ids& a, const Ids* b, Ids* ids, Ids* type_ids) const override {
    ids->clear();
    ids->push_back(cls_);
    ids->insert(ids->end(), a.begin(), a.end());
    ids->push_back(sep_);
    if (b != nullptr) {
      ids->push_back(sep_);
      ids->insert(ids->end(), b->begin(), b->end());
      ids->push_back(sep_);
    }
    type_ids->assign(ids->size(), 0);
  }
  void ProcessWithoutSpecialTokens(const Ids& a, const Ids* b, Ids* ids,
                                   Ids* type_ids) const override {
    ids->assign(a.begin(), a.end());
    if (b != nullptr) ids->insert(ids->end(), b->begin(), b->end());
    type_ids->assign(ids->size(), 0);
  }

 private:
  int64_t cls_, sep_;
};

class TemplateProcessing final : public PostProcessor {
 public:
  struct Piece {
    int sequence;            // 0 = A, 1 = B, -1 = special token
    std::vector<int64_t> special_ids;
    int64_t type_id;
  };
  TemplateProcessing(std::vector<Piece> single, std::vector<Piece> pair)
      : single_(std::move(single)), pair_(std::move(pair)) {
    for (const auto& p : single_) single_added_ += p.special_ids.size();
    for (const auto& p : pair_) pair_added_ += p.special_ids.size();
  }
  size_t AddedTokens(bool is_pair) const override { return is_pair ? pair_added_ : single_added_; }
  void Process(const Ids& a, const Ids* b, Ids* ids, Ids* type_ids) const override {
    Run(a, b, true, ids, type_ids);
  }
  void ProcessWithoutSpecialTokens(const Ids& a, const Ids* b, Ids* ids,
                                   Ids* type_ids) const override {
    Run(a, b, false, ids, type_ids);
  }

 private:
  void Run(const Ids& a, const Ids* b, bool specials, Ids* ids, Ids* type_ids) const {
    ids->clear();
    type_ids->clear();
    for (const Piece& p : b != nullptr ? pair_ : single_) {
      if (p.sequence < 0) {
        if (!specials) continue;
        ids->insert(ids->end(), p.special_ids.begin(), p.special_ids.end());
        type_ids->insert(type_ids->end(), p.special_ids.size(), p.type_id);
      } else if (p.sequence == 0) {
        Append(a, p.type_id, ids, type_ids);
      } else if (b != nullptr) {
        Append(*b, p.type_id, ids, type_ids);
      }
    }
  }

  std::vector<Piece> single_, pair_;
  size_t single_added_ = 0, pair_added_ = 0;
};

// A chain of processors of which at most one adds tokens (the others, ByteLevel, only touch
// offsets, which tide does not produce).
class SequencePostProcessor final : public PostProcessor {
 public:
  explicit SequencePostProcessor(std::unique_ptr<PostProcessor> inner) : inner_(std::move(inner)) {}
  size_t AddedTokens(bool is_pair) const override { return inner_->AddedTokens(is_pair); }
  void Process(const Ids& a, const Ids* b, Ids* ids, Ids* type_ids) const override {
    inner_->Process(a, b, ids, type_ids);
  }
  void ProcessWithoutSpecialTokens(const Ids& a, const Ids* b, Ids* ids,
                                   Ids* type_ids) const override {
    inner_->ProcessWithoutSpecialTokens(a, b, ids, type_ids);
  }

 private:
  std::unique_ptr<PostProcessor> inner_;
};

absl::StatusOr<int64_t> TokenPairId(const json& j, const char* key, std::string_view component,
                                    const Model& model) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array() || it->size() != 2 || !(*it)[0].is_string() ||
      !(*it)[1].is_number_integer()) {
    return absl::InvalidArgumentError(
        absl::StrCat("post_processor ", std::string(component), ": '", key, "' must be [token, id]"));
  }
  return (*it)[1].get<int64_t>();
}

absl::StatusOr<std::vector<TemplateProcessing::Piece>> ParseTemplate(
    const json& j, const char* key, const json& special_tokens) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("post_processor TemplateProcessing: '", key, "' must be a list of pieces"));
  }
  std::vector<TemplateProcessing::Piece> pieces;
  for (const auto& item : *it) {
    TemplateProcessing::Piece piece;
    if (auto seq = item.find("Sequence"); seq != item.end() && seq->is_object()) {
      std::string id = seq->value("id", "");
      if (id != "A" && id != "B") {
        return absl::InvalidArgumentError(
            absl::StrCat("post_processor TemplateProcessing: sequence id '", id, "' is not A or B"));
      }
      piece.sequence = id == "A" ? 0 : 1;
      piece.type_id = seq->value("type_id", 0);
    } else if (auto sp = item.find("SpecialToken"); sp != item.end() && sp->is_object()) {
      std::string id = sp->value("id", "");
      auto tok = special_tokens.find(id);
      if (tok == special_tokens.end() || !tok->contains("ids") || !(*tok)["ids"].is_array()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "post_processor TemplateProcessing: special token '", id, "' is not in special_tokens"));
      }
      piece.sequence = -1;
      for (const auto& v : (*tok)["ids"]) {
        if (!v.is_number_integer()) {
          return absl::InvalidArgumentError(
              "post_processor TemplateProcessing: special token ids must be integers");
        }
        piece.special_ids.push_back(v.get<int64_t>());
      }
      piece.type_id = sp->value("type_id", 0);
    } else {
      return absl::InvalidArgumentError(
          "post_processor TemplateProcessing: pieces must be {Sequence} or {SpecialToken}");
    }
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

}  // namespace

std::unique_ptr<PostProcessor> MakeDefaultPostProcessor() {
  return std::make_unique<DefaultPostProcessor>();
}

absl::StatusOr<std::unique_ptr<PostProcessor>> MakePostProcessor(const json& j, const Model& model) {
  if (j.is_null()) return MakeDefaultPostProcessor();
  if (!j.is_object()) return absl::InvalidArgumentError("post_processor: must be an object");
  const std::string type = j.value("type", "");
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    auto cls = TokenPairId(j, "cls", type, model);
    auto sep = TokenPairId(j, "sep", type, model);
    if (!cls.ok()) return cls.status();
    if (!sep.ok()) return sep.status();
    if (type == "BertProcessing") return std::make_unique<BertProcessing>(*cls, *sep);
    return std::make_unique<RobertaProcessing>(*cls, *sep);
  }
  if (type == "TemplateProcessing") {
    json specials = j.value("special_tokens", json::object());
    auto single = ParseTemplate(j, "single", specials);
    if (!single.ok()) return single.status();
    auto pair = ParseTemplate(j, "pair", specials);
    if (!pair.ok()) return pair.status();
    return std::make_unique<TemplateProcessing>(*std::move(single), *std::move(pair));
  }
  if (type == "ByteLevel") return MakeDefaultPostProcessor();
  if (type == "Sequence") {
    auto it = j.find("processors");
    if (it == j.end() || !it->is_array()) {
      return absl::InvalidArgumentError("post_processor Sequence: 'processors' must be an array");
    }
    std::unique_ptr<PostProcessor> inner;
    for (const auto& child : *it) {
      if (child.value("type", "") == "ByteLevel") continue;
      if (inner != nullptr) {
        return absl::UnimplementedError(
            "post_processor Sequence: more than one token-adding processor is not supported");
      }
      auto made = MakePostProcessor(child, model);
      if (!made.ok()) return made.status();
      inner = *std::move(made);
    }
    if (inner == nullptr) return MakeDefaultPostProcessor();
    return std::make_unique<SequencePostProcessor>(std::move(inner));
  }
  if (type.empty()) return absl::InvalidArgumentError("post_processor: missing 'type'");
  return absl::UnimplementedError(absl::StrCat("post_processor ", type, ": not supported by tide"));
}

}  // namespace tide::tokenizer
