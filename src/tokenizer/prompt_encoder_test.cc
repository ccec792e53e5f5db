// PromptTemplate (domain/prompt_template.h) and PromptEncoder: parsing and its errors, rendering,
// document-only truncation and the no-room error with a small WordPiece fake; and the real Qwen3
// tokenizer against the Qwen3-Reranker model card's reference (prefix + middle truncated to
// max_length - prefix - suffix + suffix), computed by HF's tokenizers (tests/parity/reference.js).
// The Qwen3 cases skip when ../shared/assets, node or third_party/node is absent.
#include "tokenizer/prompt_encoder.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "domain/prompt_template.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared_assets.h"
#include "tokenizer/testing/small_bert_tokenizer.h"

namespace tide::tokenizer {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;

PromptTemplate MustParse(std::string_view text) {
  std::string error;
  auto t = PromptTemplate::Parse(text, &error);
  EXPECT_TRUE(t.has_value()) << error;
  return t.value_or(PromptTemplate());
}

std::string ParseError(std::string_view text) {
  std::string error;
  auto t = PromptTemplate::Parse(text, &error);
  EXPECT_FALSE(t.has_value()) << text;
  return error;
}

TEST(PromptTemplateTest, ParsesSlotsAndEscapes) {
  const PromptTemplate t = MustParse("{{x}} {instruction}|{query}|{document}}}");
  EXPECT_TRUE(t.has_instruction());
  const PromptTemplate::Rendered r = t.Render("I", "QQ", "DDD");
  EXPECT_EQ(r.text, "{x} I|QQ|DDD}");
  EXPECT_EQ(r.text.substr(r.instruction.first, r.instruction.second - r.instruction.first), "I");
  EXPECT_EQ(r.text.substr(r.query.first, r.query.second - r.query.first), "QQ");
  EXPECT_EQ(r.text.substr(r.document.first, r.document.second - r.document.first), "DDD");
  EXPECT_EQ(t.Head("I", "QQ"), "{x} I|QQ|");
  EXPECT_EQ(t.Tail("I", "QQ"), "}");
  EXPECT_FALSE(MustParse("{document} after {query}").has_instruction());
  EXPECT_EQ(MustParse("{document} after {query}").Head("", "q"), "");
  EXPECT_EQ(MustParse("{document} after {query}").Tail("", "q"), " after q");
}

TEST(PromptTemplateTest, ErrorsNameTheProblem) {
  EXPECT_THAT(ParseError("{query}"), HasSubstr("lacks the slot {document}"));
  EXPECT_THAT(ParseError("{document}"), HasSubstr("lacks the slot {query}"));
  EXPECT_THAT(ParseError("{query}{document}{doc}"), HasSubstr("unknown slot {doc}"));
  EXPECT_THAT(ParseError("{query}{document}{query}"), HasSubstr("{query} appears more than once"));
  EXPECT_THAT(ParseError("{query}{document}{"), HasSubstr("unclosed '{' at byte 17"));
  EXPECT_THAT(ParseError("{query}}{document}"), HasSubstr("lone '}'"));
  EXPECT_THAT(ParseError("{query}{document}{instruction}{instruction}"), HasSubstr("{instruction} appears more"));
}

class FakePromptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tok_ = testing::SmallBertTokenizer({"instruct", "query", "doc", "end", ":", "a", "b", "c", "d", "e", "f",
                                        "long", "question", "x"});
    ASSERT_NE(tok_, nullptr);
  }
  std::vector<int64_t> Ids(std::string_view text) {
    std::vector<int64_t> ids;
    EXPECT_TRUE(tok_->Tokenize(text, &ids).ok());
    return ids;
  }
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(FakePromptTest, NoSpecialTokensAndDocumentOnlyTruncation) {
  const PromptTemplate t = MustParse("instruct: {instruction} query: {query} doc: {document} end");
  auto enc = PromptEncoder::Create(*tok_, t, "x", "question", 16);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->frame_tokens(), Ids("instruct: x query: question doc:").size() + Ids("end").size());
  Encoding e;
  std::pair<size_t, size_t> doc;
  ASSERT_TRUE(enc->Encode("a b c", TruncationDirection::kRight, &e, &doc).ok());
  EXPECT_EQ(e.ids, Ids("instruct: x query: question doc: a b c end"));  // no [CLS] / [SEP]
  EXPECT_FALSE(e.truncated());
  EXPECT_EQ(doc, std::make_pair(size_t{8}, size_t{11}));
  EXPECT_EQ(e.type_ids, std::vector<int64_t>(e.ids.size(), 0));
  EXPECT_EQ(e.attention_mask, std::vector<int64_t>(e.ids.size(), 1));

  // 9 frame tokens + 7 of the document's 9: the end is cut (right) or the start (left); the
  // frame, the query and the closing "end" stay whole.
  ASSERT_TRUE(enc->Encode("a b c d e f a b c", TruncationDirection::kRight, &e, &doc).ok());
  EXPECT_EQ(e.ids, Ids("instruct: x query: question doc: a b c d e f a end"));
  EXPECT_TRUE(e.truncated());
  EXPECT_EQ(e.untruncated_length, 18u);
  EXPECT_EQ(doc, std::make_pair(size_t{8}, size_t{15}));
  ASSERT_TRUE(enc->Encode("a b c d e f a b c", TruncationDirection::kLeft, &e).ok());
  EXPECT_EQ(e.ids, Ids("instruct: x query: question doc: c d e f a b c end"));
  EXPECT_EQ(e.ids.size(), 16u);
}

TEST_F(FakePromptTest, FrameWithoutRoomNamesThePartAndTheCounts) {
  const PromptTemplate t = MustParse("instruct: {instruction} query: {query} doc: {document} end");
  auto long_instruction = PromptEncoder::Create(*tok_, t, "long long long long long long", "question", 12);
  ASSERT_FALSE(long_instruction.ok());
  EXPECT_EQ(long_instruction.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(long_instruction.status().message()),
              HasSubstr("the instruction is too long (template 7 + instruction 6 + query 1 = 14 tokens; the "
                        "model's max_sequence_length is 12"));
  auto long_query = PromptEncoder::Create(*tok_, t, "x", "long long long long long", 12);
  ASSERT_FALSE(long_query.ok());
  EXPECT_THAT(std::string(long_query.status().message()), HasSubstr("the query is too long"));
  // Exactly one token of room is enough.
  auto fits = PromptEncoder::Create(*tok_, t, "x", "question", 10);
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(fits->room(), 1u);
  Encoding e;
  ASSERT_TRUE(fits->Encode("a b c", TruncationDirection::kRight, &e).ok());
  EXPECT_EQ(e.ids, Ids("instruct: x query: question doc: a end"));
}

TEST_F(FakePromptTest, LoadCheckRefusesASpelledSpecialTokenTheTokenizerLacks) {
  // The WordPiece test tokenizer has no <|im_start|>: the template was written for another one.
  const PromptTemplate chatml = MustParse("<|im_start|>user\nquery: {query} doc: {document}<|im_end|>");
  absl::Status s = CheckPromptTemplate(*tok_, chatml, "", 64);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("spells the special token <|im_start|> but the tokenizer has no such token"));
  // Braces and spaces between the bars are not a token's spelling; a template without one passes.
  EXPECT_TRUE(CheckPromptTemplate(*tok_, MustParse("query: {query} <| a b |> doc: {document}"), "", 64).ok());
}

TEST_F(FakePromptTest, LoadCheckRefusesAFrameThatLeavesNoRoom) {
  const PromptTemplate t = MustParse("instruct: {instruction} query: {query} doc: {document} end");
  // Frame with the default instruction and an empty query: "instruct: x query: doc:" + "end" = 8.
  EXPECT_TRUE(CheckPromptTemplate(*tok_, t, "x", 9).ok());
  absl::Status full = CheckPromptTemplate(*tok_, t, "x", 8);
  EXPECT_EQ(full.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(full.message()), HasSubstr("leaves no room for the document"));
  absl::Status over = CheckPromptTemplate(*tok_, t, "long long long long long long", 8);
  EXPECT_THAT(std::string(over.message()), HasSubstr("the instruction is too long"));
}

TEST_F(FakePromptTest, TemplateWithoutInstructionIgnoresIt) {
  const PromptTemplate t = MustParse("{query} : {document}");
  auto enc = PromptEncoder::Create(*tok_, t, "ignored", "question", 32);
  ASSERT_TRUE(enc.ok());
  Encoding e;
  ASSERT_TRUE(enc->Encode("", TruncationDirection::kRight, &e).ok());
  EXPECT_EQ(e.ids, Ids("question :"));
}

// ---- Qwen3 against the reference --------------------------------------------------------------

constexpr std::string_view kQwen3 = "tokenizers/qwen3/tokenizer.json";
constexpr char kPrefix[] =
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n";
constexpr char kSuffix[] = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";

std::string Qwen3Template() {
  return std::string(kPrefix) + "<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}" + kSuffix;
}

std::string ReferenceUnavailable() {
  if (!tide::testing::SharedAsset(kQwen3)) return tide::testing::MissingSharedAsset(kQwen3);
  if (std::system("node --version > /dev/null 2>&1") != 0) return "node is not installed";
  if (!fs::exists(tide::testing::SourceRoot() / "third_party/node/node_modules/tokenizers")) {
    return "third_party/node/node_modules/tokenizers is absent (run scripts/bootstrap.sh)";
  }
  return "";
}

// HF's encodings of `lines` (tests/parity/reference.js's request lines); empty on failure.
std::vector<std::vector<int64_t>> Reference(const std::vector<json>& lines) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("tide_prompt_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path in = dir / "in.jsonl", out = dir / "out.jsonl";
  {
    std::ofstream f(in, std::ios::binary);
    for (const json& l : lines) f << l.dump() << "\n";
  }
  const std::string cmd = "node '" + (tide::testing::SourceRoot() / "tests/parity/reference.js").string() + "' '" +
                          tide::testing::SharedAssetPath(kQwen3).string() + "' < '" + in.string() + "' > '" +
                          out.string() + "'";
  const int rc = std::system(cmd.c_str());
  std::vector<std::vector<int64_t>> ids;
  std::ifstream f(out, std::ios::binary);
  std::string line;
  while (std::getline(f, line)) ids.push_back(json::parse(line).at("input_ids").get<std::vector<int64_t>>());
  if (rc != 0 || ids.size() != lines.size()) {
    ADD_FAILURE() << "reference failed: rc " << rc << ", " << ids.size() << "/" << lines.size() << " lines";
    ids.clear();
  }
  return ids;
}

TEST(Qwen3PromptTest, MatchesTheModelCardReference) {
  if (std::string why = ReferenceUnavailable(); !why.empty()) GTEST_SKIP() << why;
  auto tok = Tokenizer::FromFile(tide::testing::SharedAssetPath(kQwen3).string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->num_special_tokens(false), 0u);  // ByteLevel post-processor: no BOS/EOS
  const PromptTemplate t = MustParse(Qwen3Template());
  struct Case {
    std::string instruction, query, document;
    size_t max_length;
  };
  const std::string long_doc = [] {
    std::string s;
    for (int i = 0; i < 60; ++i) s += "The capital of China is Beijing, a city of 21 million people. ";
    return s;
  }();
  const std::vector<Case> cases = {
      {"Given a web search query, retrieve relevant passages that answer the query", "What is the capital of China?",
       "The capital of China is Beijing.", 8192},
      {"Given a web search query, retrieve relevant passages that answer the query", "Explain gravity",
       "Gravity is a force that attracts two bodies towards each other.", 8192},
      {"Find the answer", "  spaces  around\t", " leading space and trailing \n", 8192},
      {"判断相关性", "中国的首都是哪里？", "北京是中华人民共和国的首都。", 8192},
      {"x", "q", "<|im_end|> a special token inside the document <think>", 8192},
      {"Retrieve", "capital", long_doc, 160},
      {"Retrieve", "capital", long_doc, 257},
      {"Retrieve", "capital", "", 8192},
  };
  // One reference run (loading the tokenizer is most of its time): the prefix and the suffix, then
  // each middle truncated to max_length minus their lengths as tide counts them (checked equal).
  std::vector<int64_t> prefix_ids, suffix_ids;
  ASSERT_TRUE((*tok)->Tokenize(kPrefix, &prefix_ids).ok());
  ASSERT_TRUE((*tok)->Tokenize(kSuffix, &suffix_ids).ok());
  const size_t frame = prefix_ids.size() + suffix_ids.size();
  std::vector<json> lines;
  lines.push_back({{"text", kPrefix}, {"add_special_tokens", false}});
  lines.push_back({{"text", kSuffix}, {"add_special_tokens", false}});
  for (const Case& c : cases) {
    const std::string middle = "<Instruct>: " + c.instruction + "\n<Query>: " + c.query + "\n<Document>: " + c.document;
    lines.push_back({{"text", middle}, {"max_length", c.max_length - frame}, {"direction", "Right"}});
  }
  const auto reference = Reference(lines);
  ASSERT_EQ(reference.size(), cases.size() + 2);
  const std::vector<std::vector<int64_t>> prefix_suffix(reference.begin(), reference.begin() + 2);
  EXPECT_EQ(prefix_suffix[0], prefix_ids);
  EXPECT_EQ(prefix_suffix[1], suffix_ids);
  const std::vector<std::vector<int64_t>> middles(reference.begin() + 2, reference.end());
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    std::vector<int64_t> want = prefix_suffix[0];
    want.insert(want.end(), middles[i].begin(), middles[i].end());
    want.insert(want.end(), prefix_suffix[1].begin(), prefix_suffix[1].end());
    auto enc = PromptEncoder::Create(**tok, t, c.instruction, c.query, c.max_length);
    ASSERT_TRUE(enc.ok()) << enc.status();
    Encoding e;
    ASSERT_TRUE(enc->Encode(c.document, TruncationDirection::kRight, &e).ok());
    EXPECT_EQ(e.ids, want) << "case " << i;
    EXPECT_LE(e.ids.size(), c.max_length);
    EXPECT_EQ(e.truncated(), c.max_length < 8192) << "case " << i;
  }
}

TEST(Qwen3PromptTest, LoadCheckAcceptsTheModelCardTemplate) {
  if (!tide::testing::SharedAsset(kQwen3)) GTEST_SKIP() << tide::testing::MissingSharedAsset(kQwen3);
  auto tok = Tokenizer::FromFile(tide::testing::SharedAssetPath(kQwen3).string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  const PromptTemplate t = MustParse(Qwen3Template());
  EXPECT_TRUE(CheckPromptTemplate(**tok, t, "Given a web search query, retrieve relevant passages that answer the query",
                                  8192).ok());
  // A misspelled special token is no token of Qwen3's either.
  absl::Status s = CheckPromptTemplate(**tok, MustParse("<|im_begin|>{query} {document}"), "", 8192);
  EXPECT_THAT(std::string(s.message()), HasSubstr("<|im_begin|>"));
}

// Direction left: the document loses its start; the frame and the document's end are the whole
// prompt's own tokens.
TEST(Qwen3PromptTest, LeftTruncationCutsTheDocumentsStart) {
  if (!tide::testing::SharedAsset(kQwen3)) GTEST_SKIP() << tide::testing::MissingSharedAsset(kQwen3);
  auto tok = Tokenizer::FromFile(tide::testing::SharedAssetPath(kQwen3).string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  const PromptTemplate t = MustParse(Qwen3Template());
  std::string doc;
  for (int i = 0; i < 40; ++i) doc += "word" + std::to_string(i) + " ";
  auto whole = PromptEncoder::Create(**tok, t, "Retrieve", "capital", 8192);
  auto cut = PromptEncoder::Create(**tok, t, "Retrieve", "capital", 120);
  ASSERT_TRUE(whole.ok() && cut.ok());
  Encoding all, left;
  std::pair<size_t, size_t> all_doc, left_doc;
  ASSERT_TRUE(whole->Encode(doc, TruncationDirection::kLeft, &all, &all_doc).ok());
  ASSERT_TRUE(cut->Encode(doc, TruncationDirection::kLeft, &left, &left_doc).ok());
  ASSERT_EQ(left.ids.size(), 120u);
  // Same frame before and after, and the document's last tokens.
  EXPECT_TRUE(std::equal(all.ids.begin(), all.ids.begin() + all_doc.first, left.ids.begin()));
  EXPECT_TRUE(std::equal(all.ids.begin() + all_doc.second, all.ids.end(), left.ids.begin() + left_doc.second));
  const size_t kept = left_doc.second - left_doc.first;
  EXPECT_EQ(kept, 120 - left_doc.first - (left.ids.size() - left_doc.second));
  EXPECT_LE(cut->frame_tokens() - (120 - kept), 1u);  // alone, the head may keep one more token
  EXPECT_TRUE(std::equal(all.ids.begin() + all_doc.second - kept, all.ids.begin() + all_doc.second,
                         left.ids.begin() + left_doc.first));
  // Special tokens written in the template are their added-token ids.
  EXPECT_EQ(left.ids.front(), *(*tok)->TokenToId("<|im_start|>"));
}

}  // namespace
}  // namespace tide::tokenizer
