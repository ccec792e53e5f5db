#include "tokenizer/post_processors.h"

#include <vector>

#include "gtest/gtest.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/wordpiece.h"

namespace tide::tokenizer {
namespace {

using json = nlohmann::json;
using Ids = std::vector<int64_t>;

std::unique_ptr<Model> TinyModel() {
  WordPieceOptions o;
  o.vocab = {"[UNK]", "[CLS]", "[SEP]"};
  return *MakeWordPieceModel(std::move(o));
}

struct Out {
  Ids ids, type_ids;
};

Out Apply(const json& config, const Ids& a, const Ids* b, bool specials = true) {
  auto model = TinyModel();
  auto p = MakePostProcessor(config, *model);
  EXPECT_TRUE(p.ok()) << p.status();
  Out out;
  if (!p.ok()) return out;
  if (specials) {
    (*p)->Process(a, b, &out.ids, &out.type_ids);
  } else {
    (*p)->ProcessWithoutSpecialTokens(a, b, &out.ids, &out.type_ids);
  }
  return out;
}

TEST(PostProcessorTest, Bert) {
  json bert = {{"type", "BertProcessing"}, {"sep", {"[SEP]", 2}}, {"cls", {"[CLS]", 1}}};
  Ids a = {10, 11}, b = {20};
  Out single = Apply(bert, a, nullptr);
  EXPECT_EQ(single.ids, (Ids{1, 10, 11, 2}));
  Out pair = Apply(bert, a, &b);
  EXPECT_EQ(pair.ids, (Ids{1, 10, 11, 2, 20, 2}));
  EXPECT_EQ(pair.type_ids, (Ids{0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(Apply(bert, a, &b, false).type_ids, (Ids{0, 0, 1}));
}

TEST(PostProcessorTest, RobertaAllTypeIdsZero) {
  json roberta = {{"type", "RobertaProcessing"}, {"sep", {"</s>", 2}}, {"cls", {"<s>", 0}},
                  {"trim_offsets", true}, {"add_prefix_space", true}};
  Ids a = {10}, b = {20, 21};
  Out pair = Apply(roberta, a, &b);
  EXPECT_EQ(pair.ids, (Ids{0, 10, 2, 2, 20, 21, 2}));
  EXPECT_EQ(pair.type_ids, (Ids(7, 0)));
  EXPECT_EQ(Apply(roberta, a, &b, false).type_ids, (Ids{0, 0, 0}));
}

TEST(PostProcessorTest, TemplateWithMultiIdSpecialTokens) {
  json tmpl = {
      {"type", "TemplateProcessing"},
      {"single", {{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}, {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}}},
      {"pair",
       {{{"SpecialToken", {{"id", "<x>"}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "B"}, {"type_id", 1}}}},
        {{"SpecialToken", {{"id", "</s>"}, {"type_id", 1}}}}}},
      {"special_tokens",
       {{"</s>", {{"id", "</s>"}, {"ids", {1}}, {"tokens", {"</s>"}}}},
        {"<x>", {{"id", "<x>"}, {"ids", {7, 8}}, {"tokens", {"<", "x>"}}}}}}};
  Ids a = {10}, b = {20};
  EXPECT_EQ(Apply(tmpl, a, nullptr).ids, (Ids{10, 1}));
  Out pair = Apply(tmpl, a, &b);
  EXPECT_EQ(pair.ids, (Ids{7, 8, 10, 20, 1}));
  EXPECT_EQ(pair.type_ids, (Ids{0, 0, 0, 1, 1}));
  auto model = TinyModel();
  EXPECT_EQ((*MakePostProcessor(tmpl, *model))->AddedTokens(true), 3u);
  json broken = tmpl;
  broken["special_tokens"].erase("<x>");
  EXPECT_FALSE(MakePostProcessor(broken, *model).ok());
}

TEST(PostProcessorTest, DefaultSequenceAndByteLevel) {
  Ids a = {10}, b = {20};
  EXPECT_EQ(Apply(nullptr, a, &b).type_ids, (Ids{0, 1}));
  EXPECT_EQ(Apply({{"type", "ByteLevel"}, {"trim_offsets", true}}, a, &b).ids, (Ids{10, 20}));
  json seq = {{"type", "Sequence"},
              {"processors",
               {{{"type", "ByteLevel"}}, {{"type", "BertProcessing"}, {"sep", {"[SEP]", 2}}, {"cls", {"[CLS]", 1}}}}}};
  EXPECT_EQ(Apply(seq, a, nullptr).ids, (Ids{1, 10, 2}));
  auto model = TinyModel();
  auto unknown = MakePostProcessor({{"type", "Mystery"}}, *model);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kUnimplemented);
}

TEST(AddedVocabularyTest, LeftmostLongestAndFlags) {
  std::vector<AddedToken> tokens(4);
  tokens[0] = {"[SEP]", 3, false, true, true, false, true};
  tokens[1] = {"[SEP][SEP]", 9, false, false, false, false, true};
  tokens[2] = {"cat", 5, /*single_word=*/true, false, false, false, false};
  tokens[3] = {"dog", 6, false, false, false, /*normalized=*/true, false};
  auto v = AddedVocabulary::Create(tokens, nullptr);
  ASSERT_TRUE(v.ok()) << v.status();
  auto split = [&](std::string_view text, bool raw) {
    std::vector<TextSegment> out;
    if (raw) {
      v->SplitRaw(text, &out);
    } else {
      v->SplitNormalized(text, &out);
    }
    std::vector<std::pair<std::string, int64_t>> r;
    for (auto s : out) r.emplace_back(std::string(text.substr(s.begin, s.end - s.begin)), s.id);
    return r;
  };
  using R = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_EQ(split("a[SEP][SEP]b", true), (R{{"a", -1}, {"[SEP][SEP]", 9}, {"b", -1}}));
  // lstrip/rstrip swallow the surrounding whitespace.
  EXPECT_EQ(split("a  [SEP]  b", true), (R{{"a", -1}, {"  [SEP]  ", 3}, {"b", -1}}));
  // single_word: not inside a word.
  EXPECT_EQ(split("cats cat", true), (R{{"cats ", -1}, {"cat", 5}}));
  EXPECT_EQ(split("hotdog", false), (R{{"hot", -1}, {"dog", 6}}));
  EXPECT_EQ(split("hotdog", true), (R{{"hotdog", -1}}));
  EXPECT_EQ(v->TokenToId("dog"), 6);
}

}  // namespace
}  // namespace tide::tokenizer
