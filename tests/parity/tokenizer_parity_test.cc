// Parity of tide's tokenizer with HuggingFace's Rust tokenizers (the reference, through its Node
// binding: tests/parity/reference.js) for every tokenizer.json under ../shared/assets/tokenizers,
// the vocab.txt files, and synthetic tokenizer.json variants that exercise the components the
// assets do not use. Any difference fails with the tokenizer, the text and the first differing
// position. Skips when ../shared/assets, node or the npm module is absent.
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "corpus.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared_assets.h"
#include "tokenizer/tokenizer.h"

namespace tide::tokenizer {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string SourceDir() { return tide::testing::SourceRoot().string(); }
constexpr std::string_view kTokenizersDir = "tokenizers";
fs::path AssetsDir() { return tide::testing::SharedAssetPath(kTokenizersDir); }

// Why the reference cannot run here, or "" when it can.
std::string ReferenceUnavailable() {
  if (!tide::testing::SharedAsset(kTokenizersDir)) return tide::testing::MissingSharedAsset(kTokenizersDir);
  if (std::system("node --version > /dev/null 2>&1") != 0) return "node is not installed";
  if (!fs::exists(fs::path(SourceDir()) / "third_party/node/node_modules/tokenizers")) {
    return "third_party/node/node_modules/tokenizers is absent (run scripts/bootstrap.sh)";
  }
  return "";
}

struct Request {
  std::string category;
  std::string text;
  std::optional<std::string> pair;
  std::optional<size_t> max_length;
  std::string strategy = "LongestFirst";
  std::string direction = "Right";
  bool add_special_tokens = true;
  int group = -1;  // requests sharing a query for the EncodePairs check
};

std::vector<Request> BuildRequests() {
  std::vector<Request> reqs;
  const auto texts = parity::GenerateTexts(20261129, 24);
  for (const auto& t : texts) reqs.push_back({t.category, t.text});
  // Pairs of corpus texts.
  for (size_t i = 0; i + 1 < texts.size(); i += 3) {
    Request r{"pair:" + texts[i].category + "+" + texts[i + 1].category, texts[i].text};
    r.pair = texts[i + 1].text;
    reqs.push_back(r);
  }
  // Without special tokens.
  for (size_t i = 0; i < texts.size(); i += 17) {
    Request r{"no_special:" + texts[i].category, texts[i].text};
    r.add_special_tokens = false;
    if (i % 2 == 0) r.pair = texts[(i + 5) % texts.size()].text;
    reqs.push_back(r);
  }
  // Truncated pairs at 512 and 16: one or both sides overflow; grouped by query so the
  // EncodePairs hot path is checked on the same inputs.
  int group = 0;
  for (size_t max_length : {size_t{512}, size_t{16}}) {
    for (int q = 0; q < 6; ++q, ++group) {
      const bool long_query = q % 3 == 2;
      std::string query = long_query ? parity::GenerateDocument(1000 + q, max_length == 16 ? 40 : 600)
                                     : parity::GenerateQuery(2000 + q, 3 + 2 * q);
      for (int d = 0; d < 5; ++d) {
        int words = d == 0 ? 3 : d == 1 ? 8 : d == 2 ? 300 : d == 3 ? 700 : 1200;
        Request r{"truncate" + std::to_string(max_length), query};
        r.pair = parity::GenerateDocument(3000 + 10 * q + d, words);
        r.max_length = max_length;
        r.group = group;
        reqs.push_back(r);
      }
    }
  }
  // Other strategies and the left direction.
  for (int i = 0; i < 8; ++i) {
    Request r{"strategy", parity::GenerateQuery(4000 + i, 6)};
    r.pair = parity::GenerateDocument(5000 + i, 60 + 40 * i);
    r.max_length = i < 4 ? 32 : 16;
    r.strategy = i % 4 == 0 ? "OnlyFirst" : i % 4 == 1 ? "OnlySecond" : "LongestFirst";
    r.direction = i % 2 ? "Left" : "Right";
    reqs.push_back(r);
  }
  for (int i = 0; i < 4; ++i) {
    Request r{"single_truncate", parity::GenerateDocument(6000 + i, 100)};
    r.max_length = 20 + i;
    r.direction = i % 2 ? "Left" : "Right";
    reqs.push_back(r);
  }
  return reqs;
}

json RequestJson(const Request& r) {
  json j{{"text", r.text}};
  if (r.pair) j["text_pair"] = *r.pair;
  if (r.max_length) {
    j["max_length"] = *r.max_length;
    j["strategy"] = r.strategy;
    j["direction"] = r.direction;
  }
  if (!r.add_special_tokens) j["add_special_tokens"] = false;
  return j;
}

EncodeOptions OptionsFor(const Request& r) {
  EncodeOptions o;
  o.add_special_tokens = r.add_special_tokens;
  if (r.max_length) {
    o.max_length = r.max_length;
    o.strategy = r.strategy == "OnlyFirst"    ? TruncationStrategy::kOnlyFirst
                 : r.strategy == "OnlySecond" ? TruncationStrategy::kOnlySecond
                                              : TruncationStrategy::kLongestFirst;
    o.direction = r.direction == "Left" ? TruncationDirection::kLeft : TruncationDirection::kRight;
  }
  return o;
}

// Runs the reference over `reqs`; returns one JSON object per request.
std::vector<json> RunReference(const fs::path& tokenizer_json, const std::vector<Request>& reqs) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("tide_parity_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path in = dir / "in.jsonl", out = dir / "out.jsonl", err = dir / "err.txt";
  {
    std::ofstream f(in, std::ios::binary);
    for (const auto& r : reqs) f << RequestJson(r).dump(-1, ' ', false, json::error_handler_t::strict) << "\n";
  }
  std::string cmd = "node '" + SourceDir() + "/tests/parity/reference.js' '" +
                    tokenizer_json.string() + "' < '" + in.string() + "' > '" + out.string() +
                    "' 2> '" + err.string() + "'";
  int rc = std::system(cmd.c_str());
  std::vector<json> results;
  std::ifstream f(out, std::ios::binary);
  std::string line;
  while (std::getline(f, line)) results.push_back(json::parse(line));
  if (rc != 0 || results.size() != reqs.size()) {
    std::ifstream e(err);
    std::stringstream ss;
    ss << e.rdbuf();
    ADD_FAILURE() << "reference failed (rc " << rc << ", " << results.size() << "/" << reqs.size()
                  << " lines): " << ss.str();
    results.clear();
  }
  return results;
}

std::string Describe(const Request& r) {
  json j = RequestJson(r);
  std::string s = j.dump(-1, ' ', true, json::error_handler_t::replace);
  if (s.size() > 600) s = s.substr(0, 600) + "...(" + std::to_string(s.size()) + " bytes)";
  return "[" + r.category + "] " + s;
}

// "" when equal, else where the first difference is.
std::string Diff(const std::vector<int64_t>& want, const std::vector<int64_t>& got) {
  size_t n = std::min(want.size(), got.size());
  for (size_t i = 0; i < n; ++i) {
    if (want[i] != got[i]) {
      return "position " + std::to_string(i) + ": reference " + std::to_string(want[i]) +
             ", tide " + std::to_string(got[i]);
    }
  }
  if (want.size() != got.size()) {
    return "length: reference " + std::to_string(want.size()) + ", tide " + std::to_string(got.size());
  }
  return "";
}

struct ParityStats {
  int compared = 0;
  int mismatches = 0;
};

// Compares tide with the reference for every request; reports up to 15 mismatches in detail.
ParityStats Compare(const std::string& name, const Tokenizer& tok, const std::vector<Request>& reqs,
                    const std::vector<json>& ref) {
  ParityStats stats;
  auto report = [&](const Request& r, const std::string& what) {
    if (++stats.mismatches <= 15) {
      ADD_FAILURE() << name << ": " << what << "\n  input " << Describe(r);
    }
  };
  Encoding enc;
  for (size_t i = 0; i < reqs.size() && i < ref.size(); ++i) {
    const Request& r = reqs[i];
    const json& want = ref[i];
    std::optional<std::string_view> pair;
    if (r.pair) pair = *r.pair;
    absl::Status st = tok.Encode(r.text, pair, OptionsFor(r), &enc);
    ++stats.compared;
    if (want.contains("error")) {
      if (st.ok()) report(r, "reference rejects (" + want["error"].get<std::string>() + "), tide accepts");
      continue;
    }
    if (!st.ok()) {
      report(r, "tide fails: " + std::string(st.message()));
      continue;
    }
    for (const auto& [field, got] : {std::pair{"input_ids", &enc.ids},
                                     std::pair{"token_type_ids", &enc.type_ids},
                                     std::pair{"attention_mask", &enc.attention_mask}}) {
      std::string d = Diff(want[field].get<std::vector<int64_t>>(), *got);
      if (!d.empty()) {
        report(r, std::string(field) + " differ at " + d);
        break;
      }
    }
  }
  // The hot path: EncodePairs over each query group, unpadded, against the reference's unpadded
  // prefix (the reference pads each pair alone when tokenizer.json asks for padding).
  std::map<int, std::vector<size_t>> groups;
  for (size_t i = 0; i < reqs.size() && i < ref.size(); ++i) {
    if (reqs[i].group >= 0 && !ref[i].contains("error")) groups[reqs[i].group].push_back(i);
  }
  std::vector<Encoding> batch;
  for (const auto& [g, idx] : groups) {
    std::vector<std::string_view> docs;
    for (size_t i : idx) docs.push_back(*reqs[i].pair);
    EncodeOptions o = OptionsFor(reqs[idx[0]]);
    o.pad_to_max_length = false;
    absl::Status st = tok.EncodePairs(reqs[idx[0]].text, docs, o, &batch);
    if (!st.ok()) {
      report(reqs[idx[0]], "EncodePairs fails: " + std::string(st.message()));
      continue;
    }
    for (size_t k = 0; k < idx.size(); ++k) {
      const json& want = ref[idx[k]];
      const auto padded = want["input_ids"].get<std::vector<int64_t>>();
      const auto mask = want["attention_mask"].get<std::vector<int64_t>>();
      std::vector<int64_t> ids;  // the reference without its padding (left or right)
      for (size_t p = 0; p < padded.size(); ++p) {
        if (mask[p] != 0) ids.push_back(padded[p]);
      }
      std::string d = Diff(ids, batch[k].ids);
      if (!d.empty()) report(reqs[idx[k]], "EncodePairs input_ids differ at " + d);
    }
  }
  return stats;
}

void RunParity(const std::string& name, const fs::path& reference_json, const Tokenizer& tok) {
  const std::vector<Request> reqs = BuildRequests();
  const std::vector<json> ref = RunReference(reference_json, reqs);
  if (ref.empty()) return;
  ParityStats stats = Compare(name, tok, reqs, ref);
  EXPECT_EQ(stats.mismatches, 0) << name << ": " << stats.mismatches << " of " << stats.compared
                                 << " encodings differ from the reference";
  std::printf("[parity] %s: %d/%d identical\n", name.c_str(), stats.compared - stats.mismatches,
              stats.compared);
}

// ---- every tokenizer.json of the assets ------------------------------------------------------

const std::vector<std::string> kAssetTokenizers = {"bert-base-uncased", "all-minilm-l6-v2",
                                                   "t5-small-unigram", "roberta-base-bpe", "qwen3"};

class AssetParity : public ::testing::TestWithParam<std::string> {};

TEST_P(AssetParity, MatchesReference) {
  if (auto why = ReferenceUnavailable(); !why.empty()) GTEST_SKIP() << why;
  const fs::path path = AssetsDir() / GetParam() / "tokenizer.json";
  ASSERT_TRUE(fs::exists(path)) << path;
  auto tok = Tokenizer::FromFile(path.string());
  if (!tok.ok() && tok.status().code() == absl::StatusCode::kUnimplemented) {
    GTEST_SKIP() << GetParam() << " uses a component not built into this tide: "
                 << tok.status().message();
  }
  ASSERT_TRUE(tok.ok()) << tok.status();
  RunParity(GetParam(), path, **tok);
}

INSTANTIATE_TEST_SUITE_P(Assets, AssetParity, ::testing::ValuesIn(kAssetTokenizers),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

TEST(AssetParity, EveryAssetTokenizerIsCovered) {
  TIDE_SKIP_WITHOUT_SHARED_ASSET(kTokenizersDir);
  std::set<std::string> known(kAssetTokenizers.begin(), kAssetTokenizers.end());
  for (const auto& entry : fs::directory_iterator(AssetsDir())) {
    if (fs::exists(entry.path() / "tokenizer.json")) {
      EXPECT_TRUE(known.count(entry.path().filename().string()))
          << entry.path() << " has a tokenizer.json the parity test does not cover";
    }
  }
}

// ---- vocab.txt ---------------------------------------------------------------------------------

json LoadJson(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}

fs::path WriteTemp(const std::string& name, const json& j) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("tide_parity_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path p = dir / name;
  std::ofstream(p) << j.dump();
  return p;
}

TEST(VocabTxtParity, UncasedMatchesTokenizerJson) {
  if (auto why = ReferenceUnavailable(); !why.empty()) GTEST_SKIP() << why;
  auto tok = Tokenizer::FromVocabTxt((AssetsDir() / "bert-base-uncased" / "vocab.txt").string(), true);
  ASSERT_TRUE(tok.ok()) << tok.status();
  RunParity("bert-base-uncased/vocab.txt", AssetsDir() / "bert-base-uncased" / "tokenizer.json", **tok);
}

// bert-base-cased has only a vocab.txt: the reference is the tokenizer.json HF's
// BertTokenizerFast(do_lower_case=False) builds from it, assembled here from the uncased layout.
TEST(VocabTxtParity, CasedMatchesReference) {
  if (auto why = ReferenceUnavailable(); !why.empty()) GTEST_SKIP() << why;
  const fs::path vocab_path = AssetsDir() / "bert-base-cased" / "vocab.txt";
  auto tok = Tokenizer::FromVocabTxt(vocab_path.string(), false);
  ASSERT_TRUE(tok.ok()) << tok.status();
  json j = LoadJson(AssetsDir() / "bert-base-uncased" / "tokenizer.json");
  json vocab = json::object();
  std::ifstream f(vocab_path);
  std::string line;
  for (int id = 0; std::getline(f, line); ++id) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    vocab[line] = id;
  }
  j["model"]["vocab"] = vocab;
  j["normalizer"]["lowercase"] = false;
  for (auto& t : j["added_tokens"]) t["id"] = vocab[t["content"].get<std::string>()];
  auto& specials = j["post_processor"]["special_tokens"];
  specials["[CLS]"]["ids"] = json::array({vocab["[CLS]"]});
  specials["[SEP]"]["ids"] = json::array({vocab["[SEP]"]});
  RunParity("bert-base-cased/vocab.txt", WriteTemp("bert-base-cased.json", j), **tok);
}

// ---- synthetic variants: the bert-base-uncased vocabulary with other components ---------------

struct Variant {
  const char* name;
  const char* patch;  // JSON object merged into tokenizer.json
};

const Variant kVariants[] = {
    {"nfd_lowercase_stripaccents_whitespace",
     R"({"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "Lowercase"},
         {"type": "StripAccents"}, {"type": "Strip", "strip_left": true, "strip_right": true}]},
         "pre_tokenizer": {"type": "Whitespace"}})"},
    {"nfkc_replace_whitespacesplit_roberta",
     R"({"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"},
         {"type": "Replace", "pattern": {"Regex": "[0-9]+"}, "content": "#"},
         {"type": "Replace", "pattern": {"String": "``"}, "content": "\""}, {"type": "Lowercase"}]},
         "pre_tokenizer": {"type": "WhitespaceSplit"},
         "post_processor": {"type": "RobertaProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101],
                            "trim_offsets": true, "add_prefix_space": false}})"},
    {"punctuation_digits_bertprocessing_left_padding",
     R"({"normalizer": {"type": "NFKD"},
         "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
            {"type": "Punctuation", "behavior": "MergedWithPrevious"},
            {"type": "Digits", "individual_digits": true}]},
         "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]},
         "padding": {"strategy": {"Fixed": 48}, "direction": "Left", "pad_to_multiple_of": null,
                     "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"}})"},
    {"bert_cased_strip_accents_nfc_contiguous",
     R"({"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"},
         {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": false,
          "strip_accents": true, "lowercase": false}, {"type": "Prepend", "prepend": "x"}]},
         "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "BertPreTokenizer"},
            {"type": "Punctuation", "behavior": "Contiguous"}, {"type": "Digits", "individual_digits": false}]},
         "truncation": {"direction": "Left", "max_length": 40, "strategy": "OnlySecond", "stride": 0}})"},
    {"added_tokens_normalized_lstrip_rstrip_single_word",
     R"({"added_tokens": [
          {"id": 0, "content": "[PAD]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
          {"id": 100, "content": "[UNK]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
          {"id": 101, "content": "[CLS]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
          {"id": 102, "content": "[SEP]", "single_word": false, "lstrip": true, "rstrip": true, "normalized": false, "special": true},
          {"id": 103, "content": "[MASK]", "single_word": true, "lstrip": true, "rstrip": false, "normalized": false, "special": true},
          {"id": 30522, "content": "<S>", "single_word": false, "lstrip": false, "rstrip": true, "normalized": true, "special": false},
          {"id": 30523, "content": "Panda", "single_word": true, "lstrip": false, "rstrip": false, "normalized": true, "special": false},
          {"id": 30524, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
         "pre_tokenizer": {"type": "Whitespace"}})"},
};

class VariantParity : public ::testing::TestWithParam<Variant> {};

TEST_P(VariantParity, MatchesReference) {
  if (auto why = ReferenceUnavailable(); !why.empty()) GTEST_SKIP() << why;
  json j = LoadJson(AssetsDir() / "bert-base-uncased" / "tokenizer.json");
  j.merge_patch(json::parse(GetParam().patch));
  const fs::path path = WriteTemp(std::string(GetParam().name) + ".json", j);
  auto tok = Tokenizer::FromFile(path.string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  RunParity(GetParam().name, path, **tok);
}

INSTANTIATE_TEST_SUITE_P(Bert, VariantParity, ::testing::ValuesIn(kVariants),
                         [](const auto& info) { return std::string(info.param.name); });


// ---- Metaspace prepend schemes around added tokens (the t5 vocabulary) -------------------------
// HF prefixes "▁" only to the section at offset 0 with prepend_scheme "first"; sections after an
// added token get none. The corpus has no added tokens, so these texts put some in.

class MetaspaceSchemeParity : public ::testing::TestWithParam<std::string> {};

TEST_P(MetaspaceSchemeParity, MatchesReferenceAroundAddedTokens) {
  if (auto why = ReferenceUnavailable(); !why.empty()) GTEST_SKIP() << why;
  json j = LoadJson(AssetsDir() / "t5-small-unigram" / "tokenizer.json");
  j["pre_tokenizer"] = json{{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", GetParam()},
                            {"split", true}};
  const fs::path path = WriteTemp("t5-metaspace-" + GetParam() + ".json", j);
  auto tok = Tokenizer::FromFile(path.string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  std::vector<Request> reqs;
  for (const char* text : {"hello<extra_id_0>world", "hello <extra_id_0> world again", "<extra_id_0>start",
                           "a<extra_id_1>b<extra_id_2> c", "  spaced <extra_id_3>", "no added tokens here"}) {
    reqs.push_back(Request{"metaspace", text});
    Request pair{"metaspace_pair", "query<extra_id_0>x"};
    pair.pair = text;
    reqs.push_back(pair);
  }
  const std::vector<json> ref = RunReference(path, reqs);
  ASSERT_EQ(ref.size(), reqs.size());
  ParityStats stats = Compare("t5 metaspace " + GetParam(), **tok, reqs, ref);
  EXPECT_EQ(stats.mismatches, 0);
}

INSTANTIATE_TEST_SUITE_P(T5, MetaspaceSchemeParity, ::testing::Values("first", "always", "never"));

}  // namespace
}  // namespace tide::tokenizer
