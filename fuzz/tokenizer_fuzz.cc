// libFuzzer target for the tokenizer: untrusted input text and untrusted tokenizer.json.
//   first byte even: the rest is text (split at the first 0xFF byte into text and pair) encoded
//                    by a built-in tokenizer.json that uses many components, with truncation
//                    settings taken from the first byte;
//   first byte odd:  the rest is a tokenizer.json; when it loads, a few fixed texts are encoded.
// Invariants checked: valid UTF-8 input never fails to encode (except OnlyFirst/OnlySecond
// truncation errors), the three output vectors have equal lengths, truncation respects
// max_length, and EncodePairs agrees with Encode.
// Build: cmake -S . -B build-fuzz -G Ninja -DTIDE_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++
// Run:   build-fuzz/fuzz/fuzz_tokenizer -max_total_time=60 fuzz/corpus/tokenizer
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace {

using tide::tokenizer::Encoding;
using tide::tokenizer::EncodeOptions;
using tide::tokenizer::Tokenizer;

constexpr std::string_view kBuiltin = R"({
  "version": "1.0", "truncation": null, "padding": null,
  "added_tokens": [
    {"id": 0, "content": "[PAD]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 1, "content": "[UNK]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 2, "content": "[CLS]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 3, "content": "[SEP]", "single_word": false, "lstrip": true, "rstrip": true, "normalized": false, "special": true},
    {"id": 4, "content": "[MASK]", "single_word": true, "lstrip": true, "rstrip": false, "normalized": false, "special": true},
    {"id": 14, "content": "cat", "single_word": true, "lstrip": false, "rstrip": false, "normalized": true, "special": false}],
  "normalizer": {"type": "Sequence", "normalizers": [
    {"type": "NFKC"}, {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "},
    {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
    {"type": "Strip", "strip_left": true, "strip_right": true}]},
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "BertPreTokenizer"}, {"type": "Digits", "individual_digits": true},
    {"type": "Punctuation", "behavior": "MergedWithNext"}]},
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
    "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
    "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]}, "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
  "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 12,
    "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "a": 5, "##b": 6, "b": 7, "##a": 8,
              "1": 9, "2": 10, "!": 11, "##!": 12, "中": 13, "cat": 14, "é": 15, "##é": 16}}
})";

const Tokenizer& Builtin() {
  static const Tokenizer* tok = [] {
    auto t = Tokenizer::FromJson(kBuiltin, "builtin");
    if (!t.ok()) std::abort();
    return t->release();
  }();
  return *tok;
}

void Check(bool condition) {
  if (!condition) std::abort();
}

void CheckEncoding(const Encoding& e, const EncodeOptions& o) {
  Check(e.ids.size() == e.type_ids.size() && e.ids.size() == e.attention_mask.size());
  if (o.max_length && o.truncate) {
    // Padding (pad_to_multiple_of) may exceed max_length, as in HF; real tokens may not.
    size_t real = 0;
    for (int64_t m : e.attention_mask) real += m != 0;
    Check(real <= *o.max_length);
  }
}

void FuzzText(uint8_t control, std::string_view data) {
  const Tokenizer& tok = Builtin();
  size_t cut = data.find('\xff');
  std::string_view text = data.substr(0, cut);
  std::optional<std::string_view> pair;
  if (cut != std::string_view::npos) pair = data.substr(cut + 1);
  EncodeOptions o;
  if (control & 0x02) o.max_length = 3 + (control >> 4);
  if (control & 0x04) o.strategy = tide::tokenizer::TruncationStrategy::kOnlySecond;
  if (control & 0x08) o.direction = tide::tokenizer::TruncationDirection::kLeft;
  Encoding e;
  absl::Status s = tok.Encode(text, pair, o, &e);
  if (!s.ok()) {
    // Invalid UTF-8 and impossible OnlySecond truncations are the only errors.
    Check(s.code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  CheckEncoding(e, o);
  if (pair.has_value()) {
    std::vector<Encoding> batch;
    std::string_view docs[2] = {*pair, *pair};
    Check(tok.EncodePairs(text, docs, o, &batch).ok());
    Check(batch.size() == 2 && batch[0].ids == e.ids && batch[1].ids == e.ids);
  }
  std::vector<int64_t> ids;
  Check(tok.Tokenize(text, &ids).ok());
}

void FuzzJson(std::string_view json) {
  auto tok = Tokenizer::FromJson(json, "fuzz.json");
  if (!tok.ok()) return;
  EncodeOptions o;
  Encoding e;
  for (std::string_view text : {"", "Hello, world! 12", "caf\xc3\xa9 \xe4\xb8\xad [SEP] x"}) {
    if ((*tok)->Encode(text, std::string_view("b a"), o, &e).ok()) CheckEncoding(e, o);
  }
  o.max_length = 8;
  if ((*tok)->Encode("a b a b a b a b a b", std::nullopt, o, &e).ok()) CheckEncoding(e, o);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    FuzzText(data[0], rest);
  } else {
    FuzzJson(rest);
  }
  return 0;
}
