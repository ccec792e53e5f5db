// A model with a prompt_template (decoder-only rerankers) in serving, over the fake backend and the
// small WordPiece test tokenizer: its pairs are encoded as the prompt (no [CLS]/[SEP]), only the
// document is cut, the instruction is resolved (request's, else the default; 422 naming it when the
// model cannot take one or needs one), the frame without room is 422, long documents are windowed
// inside the template, and the score cache keys on the instruction.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "serving/long_documents.h"
#include "serving/scoring.h"
#include "serving/scoring_pipeline.h"
#include "serving/testing/fake_backend.h"

namespace tide::serving {
namespace {

using ::testing::HasSubstr;
using testing::BackendControl;
using testing::kHang;
using testing::ModelSpec;
using testing::Served;

// Words a..f are ids 4..9; the template's markers are vocabulary words too.
constexpr char kTemplate[] = "a {instruction} b {query} c {document} d";

ModelSpec PromptSpec(bool with_default = true, const char* prompt = kTemplate) {
  ModelSpec spec;
  std::string error;
  spec.parameters.prompt_template = PromptTemplate::Parse(prompt, &error);
  EXPECT_TRUE(spec.parameters.prompt_template.has_value()) << error;
  if (with_default) spec.parameters.default_instruction = "f";
  return spec;
}

std::vector<int64_t> Ids(const ServedModel& model, std::string_view text) {
  std::vector<int64_t> ids;
  EXPECT_TRUE(model.tokenizer().Tokenize(text, &ids).ok());
  return ids;
}

TEST(PromptScoring, PairsAreThePromptAndOnlyTheDocumentIsCut) {
  auto model = Served(PromptSpec(), std::make_shared<BackendControl>());
  const std::vector<std::string_view> docs = {"e e", "b c d e f b c d e f b c d e f"};
  std::vector<tokenizer::Encoding> rows;
  ASSERT_TRUE(TokenizePairs(*model, "a", docs, PairOptions{}, &rows).ok());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].ids, Ids(*model, "a f b a c e e d"));  // default instruction, no [CLS]/[SEP]
  // max_sequence_length 16: 6 frame tokens, 10 of the document's 15 (its end cut; "d" closes it).
  EXPECT_EQ(rows[1].ids, Ids(*model, "a f b a c b c d e f b c d e f d"));
  EXPECT_TRUE(rows[1].truncated());
  PairOptions left;
  left.direction = tokenizer::TruncationDirection::kLeft;
  left.instruction = "e";
  ASSERT_TRUE(TokenizePairs(*model, "a", docs, left, &rows).ok());
  EXPECT_EQ(rows[1].ids, Ids(*model, "a e b a c b c d e f b c d e f d"));
  EXPECT_EQ(rows[1].ids.size(), 16u);
  // truncate false refuses the cut one.
  PairOptions strict;
  strict.truncate = false;
  const absl::Status refused = TokenizePairs(*model, "a", docs, strict, &rows);
  EXPECT_EQ(KindOf(refused), ErrorKind::kInvalidInput) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("texts[1]"));
  // Cohere's max_tokens_per_doc: the document cut to it inside the template.
  PairOptions cohere;
  cohere.max_tokens_per_doc = 2;
  ASSERT_TRUE(TokenizePairs(*model, "a", docs, cohere, &rows).ok());
  EXPECT_EQ(rows[1].ids, Ids(*model, "a f b a c b c d"));
}

TEST(PromptScoring, InstructionsTheModelCannotTakeOrLacksAre422NamingIt) {
  auto bert = Served(ModelSpec{}, std::make_shared<BackendControl>());
  auto with_default = Served(PromptSpec(), std::make_shared<BackendControl>());
  auto without_default = Served(PromptSpec(false), std::make_shared<BackendControl>());
  auto no_slot = Served(PromptSpec(false, "{query} c {document}"), std::make_shared<BackendControl>());
  const std::optional<std::string> none, given = std::string("e");
  EXPECT_EQ(*ResolveInstruction(*with_default, none), "f");
  EXPECT_EQ(*ResolveInstruction(*with_default, given), "e");
  EXPECT_EQ(*ResolveInstruction(*without_default, given), "e");
  EXPECT_EQ(*ResolveInstruction(*bert, none), "");
  EXPECT_EQ(*ResolveInstruction(*no_slot, none), "");
  for (const auto& [model, instruction, words] :
       std::vector<std::tuple<ServedModel*, std::optional<std::string>, std::string>>{
           {bert.get(), given, "has no prompt_template"},
           {no_slot.get(), given, "has no {instruction} slot"},
           {without_default.get(), none, "is required"}}) {
    auto r = ResolveInstruction(*model, instruction);
    ASSERT_FALSE(r.ok()) << words;
    EXPECT_EQ(KindOf(r.status()), ErrorKind::kInvalidInput);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("'instruction'"));
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(words));
    PairOptions o;
    o.instruction = instruction;
    std::vector<tokenizer::Encoding> rows;
    const std::vector<std::string_view> docs = {"b"};
    EXPECT_EQ(TokenizePairs(*model, "a", docs, o, &rows).message(), r.status().message());
  }
}

TEST(PromptScoring, AFrameWithoutRoomIs422NamingThePart) {
  auto model = Served(PromptSpec(), std::make_shared<BackendControl>());
  PairOptions o;
  o.instruction = "e e e e e e e e e e e e e e";
  std::vector<tokenizer::Encoding> rows;
  const std::vector<std::string_view> docs = {"b"};
  const absl::Status s = TokenizePairs(*model, "a", docs, o, &rows);
  EXPECT_EQ(KindOf(s), ErrorKind::kInvalidInput) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("the instruction is too long"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("instruction 14 + query 1 = 19 tokens"));
  DocumentWindows w;
  ChunkOptions chunk = ChunkOptionsFor(*model, LongDocuments::kChunkMax);
  chunk.instruction = o.instruction;
  EXPECT_EQ(KindOf(SplitLongDocuments(*model, "a", docs, chunk, &w)), ErrorKind::kInvalidInput);
}

TEST(PromptScoring, LongDocumentsAreWindowedInsideTheTemplate) {
  auto model = Served(PromptSpec(), std::make_shared<BackendControl>());
  // 16 - 6 frame tokens = 10 per window (9 with the instruction "e e": one more frame token).
  std::string doc = "b";
  for (int i = 1; i < 20; ++i) doc += " c";
  const std::vector<std::string_view> docs = {doc};
  DocumentWindows w;
  ASSERT_TRUE(SplitLongDocuments(*model, "a", docs, ChunkOptionsFor(*model, LongDocuments::kChunkMax), &w).ok());
  ASSERT_GT(w.windows.size(), 1u);
  EXPECT_EQ(w.windows[0], "b c c c c c c c c c");
  ChunkOptions longer = ChunkOptionsFor(*model, LongDocuments::kChunkMax);
  longer.instruction = "e e";
  ASSERT_TRUE(SplitLongDocuments(*model, "a", docs, longer, &w).ok());
  EXPECT_EQ(w.windows[0], "b c c c c c c c c");
  // Every window fits the prompt whole.
  std::vector<tokenizer::Encoding> rows;
  PairOptions o;
  o.instruction = "e e";
  ASSERT_TRUE(TokenizePairs(*model, "a", w.windows, o, &rows).ok());
  for (const tokenizer::Encoding& e : rows) EXPECT_FALSE(e.truncated());
}

// The instruction is part of the score cache's key: a pair scored under one instruction is not
// the answer under another (the fake backend scores +5 for rows holding "e", -5 otherwise).
TEST(PromptScoring, TheScoreCacheKeysOnTheInstruction) {
  auto metrics = ServingMetrics::Create();
  ASSERT_TRUE(metrics.ok());
  auto control = std::make_shared<BackendControl>();
  control->decisive_token = 8;  // "e"
  std::shared_ptr<ServedModel> model(Served(PromptSpec(), control));
  ScoringPipelineOptions options;
  options.score_cache_bytes = 1 << 20;
  ScoringPipeline pipeline(metrics->get(), [](const Call&, size_t) { return absl::OkStatus(); }, nullptr, options);
  FakeClock clock;
  auto call = std::make_shared<Call>(&clock, RowTask::Admission{}, clock.Now(), std::chrono::milliseconds(0), false,
                                     false);
  auto rerank = [&](std::optional<std::string> instruction) {
    absl::StatusOr<RerankScores> out = absl::UnknownError("no answer");
    absl::Notification done;
    PairOptions o;
    o.instruction = instruction;
    const std::vector<std::string_view> docs = {"b"};
    pipeline.Rerank(call, model, "a", docs, o, /*raw_scores=*/true, [&](absl::StatusOr<RerankScores> s) {
      out = std::move(s);
      done.Notify();
    });
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(kHang));
    return out;
  };
  auto plain = rerank(std::nullopt);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->scores[0], -5.0f);
  auto decisive = rerank(std::string("e"));
  ASSERT_TRUE(decisive.ok()) << decisive.status();
  EXPECT_EQ(decisive->cache_hits, 0u);
  EXPECT_EQ(decisive->scores[0], 5.0f);
  auto again = rerank(std::string("e"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->cache_hits, 1u);
  EXPECT_EQ(again->scores[0], 5.0f);
  // Refused before the quota and the cache: an instruction to a model that takes none.
  auto bert = std::shared_ptr<ServedModel>(Served(ModelSpec{}, std::make_shared<BackendControl>()));
  absl::Notification done;
  PairOptions o;
  o.instruction = "e";
  const std::vector<std::string_view> docs = {"b"};
  pipeline.Rerank(call, bert, "a", docs, o, true, [&](absl::StatusOr<RerankScores> s) {
    EXPECT_EQ(KindOf(s.status()), ErrorKind::kInvalidInput);
    done.Notify();
  });
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(kHang));
}

}  // namespace
}  // namespace tide::serving
