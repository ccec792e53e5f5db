// The four stages of a HuggingFace tokenizer pipeline, as tide implements them, and the factory
// functions that build each component from its tokenizer.json object.
//
// tide only needs ids (no offsets), so text flows as plain UTF-8 std::string:
//   Normalizer     rewrites a string in place            (HF `normalizer`)
//   PreTokenizer   splits pieces into smaller pieces      (HF `pre_tokenizer`)
//   Model          turns one piece into token ids         (HF `model`)
//   PostProcessor  adds special tokens and type ids       (HF `post_processor`)
// All components are immutable after creation and safe to call from many threads.
// Factories return INVALID_ARGUMENT for malformed JSON and UNIMPLEMENTED for options tide does not
// support; the message names the component (e.g. "normalizer Precompiled: ..."). The caller adds
// the file name.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tide::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void Normalize(std::string* text) const = 0;
};

// A piece of the pre-tokenized text. Pieces keep their order; a model tokenizes each one alone.
using Pieces = std::vector<std::string>;

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` with the split (and possibly rewritten) pieces; `scratch` is a reusable buffer.
  virtual void PreTokenize(Pieces* pieces, Pieces* scratch) const = 0;
  // Optional fast path for pre-tokenizers that only split text and never rewrite it: appends the
  // byte ranges [first, second) of the pieces of `text` to `spans` (in order, non-empty) and
  // returns true. The default returns false, and callers fall back to PreTokenize.
  virtual bool Split(std::string_view text,
                     std::vector<std::pair<uint32_t, uint32_t>>* spans) const {
    return false;
  }
};

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of one pre-tokenized piece to `ids`.
  virtual void Tokenize(std::string_view piece, std::vector<int64_t>* ids) const = 0;
  virtual std::optional<int64_t> TokenToId(std::string_view token) const = 0;
  virtual std::optional<std::string> IdToToken(int64_t id) const = 0;
  virtual size_t vocab_size() const = 0;
};

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual size_t AddedTokens(bool is_pair) const = 0;
  // Writes ids/type_ids/attention_mask for `a` (and `b` when not null) with special tokens.
  virtual void Process(const std::vector<int64_t>& a, const std::vector<int64_t>* b,
                       std::vector<int64_t>* ids, std::vector<int64_t>* type_ids) const = 0;
  // The same without special tokens (add_special_tokens = false): concatenates `a` and `b` with
  // the type ids the processor gives each sequence. HF's default: 0 for `a`, 1 for `b`.
  virtual void ProcessWithoutSpecialTokens(const std::vector<int64_t>& a,
                                           const std::vector<int64_t>* b,
                                           std::vector<int64_t>* ids,
                                           std::vector<int64_t>* type_ids) const {
    ids->assign(a.begin(), a.end());
    type_ids->assign(a.size(), 0);
    if (b != nullptr) {
      ids->insert(ids->end(), b->begin(), b->end());
      type_ids->insert(type_ids->end(), b->size(), 1);
    }
  }
};

// ---- factories: `json` is the component object from tokenizer.json ("type" selects it) -------
// Owned by the framework (tokenizer.cc and the WordPiece-family files):
absl::StatusOr<std::unique_ptr<Normalizer>> MakeNormalizer(const nlohmann::json& json);
absl::StatusOr<std::unique_ptr<PreTokenizer>> MakePreTokenizer(const nlohmann::json& json);
absl::StatusOr<std::unique_ptr<Model>> MakeModel(const nlohmann::json& json);
absl::StatusOr<std::unique_ptr<PostProcessor>> MakePostProcessor(const nlohmann::json& json,
                                                                 const Model& model);

// Owned by the SentencePiece/BPE-family files and called by the dispatchers above:
absl::StatusOr<std::unique_ptr<Normalizer>> MakePrecompiledNormalizer(const nlohmann::json& json);
absl::StatusOr<std::unique_ptr<PreTokenizer>> MakeMetaspacePreTokenizer(const nlohmann::json& json);
absl::StatusOr<std::unique_ptr<PreTokenizer>> MakeSplitPreTokenizer(const nlohmann::json& json);
absl::StatusOr<std::unique_ptr<PreTokenizer>> MakeByteLevelPreTokenizer(const nlohmann::json& json);
absl::StatusOr<std::unique_ptr<Model>> MakeUnigramModel(const nlohmann::json& json);
absl::StatusOr<std::unique_ptr<Model>> MakeBpeModel(const nlohmann::json& json);

}  // namespace tide::tokenizer
