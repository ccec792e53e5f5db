// Long documents scored whole: window boundaries (whole words, word pieces kept together, stride,
// the last window ending with the document), short documents untouched, the window limit, and
// folding; then through the service core with a backend for which one token is decisive.
#include "serving/long_documents.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "api/status_http.h"
#include "gtest/gtest.h"
#include "serving/service_core.h"
#include "serving/testing/fake_backend.h"

namespace tide::serving {
namespace {

using testing::BackendControl;
using testing::kHang;
using testing::ModelSpec;
using testing::Served;

std::string Repeat(const std::vector<std::string>& words, size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.push_back(words[i % words.size()]);
  return absl::StrJoin(out, " ");
}

size_t WordCount(std::string_view text) {
  size_t n = 0;
  bool in_word = false;
  for (char c : text) {
    if (c == ' ') {
      in_word = false;
    } else if (!in_word) {
      in_word = true;
      ++n;
    }
  }
  return n;
}

// max_sequence_length 16 and a 1-token query leave 16 - 1 - 3 = 12 tokens for a document.
TEST(SplitLongDocuments, WindowsOfWholeWordsWithHalfWindowStride) {
  auto model = Served({}, std::make_shared<BackendControl>());
  const std::string short_doc = "b c d";
  const std::string long_doc = Repeat({"b", "c", "d", "e"}, 20);  // 20 tokens
  const std::vector<std::string_view> docs = {short_doc, long_doc};
  DocumentWindows w;
  ASSERT_TRUE(SplitLongDocuments(*model, "a", docs, ChunkOptionsFor(*model, LongDocuments::kChunkMax), &w).ok());
  EXPECT_TRUE(w.split);
  // The short document is one window holding its whole text; the long one starts at tokens 0, 6
  // and 12 (12-token windows, stride 6), the last ending with the document.
  ASSERT_EQ(w.windows.size(), 4u);
  EXPECT_EQ(w.owner, (std::vector<size_t>{0, 1, 1, 1}));
  EXPECT_EQ(w.windows[0], short_doc);
  EXPECT_EQ(WordCount(w.windows[1]), 12u);
  EXPECT_EQ(w.windows[1], long_doc.substr(0, w.windows[1].size()));
  EXPECT_EQ(w.windows[2], std::string_view(long_doc).substr(12, w.windows[2].size()));  // word 6
  EXPECT_EQ(WordCount(w.windows[3]), 8u);
  EXPECT_TRUE(long_doc.ends_with(w.windows[3]));

  // Truncate mode, or nothing long: no split at all.
  ASSERT_TRUE(SplitLongDocuments(*model, "a", docs, ChunkOptionsFor(*model, LongDocuments::kTruncate), &w).ok());
  EXPECT_FALSE(w.split);
  EXPECT_EQ(w.windows.size(), 2u);
}

TEST(SplitLongDocuments, NeverCutsInsideTheWordPiecesOfOneWord) {
  ModelSpec spec;
  spec.vocabulary = {"a", "b", "##x", "##y"};
  auto model = Served(spec, std::make_shared<BackendControl>());
  const std::string doc = Repeat({"bxy"}, 10);  // 10 words of 3 pieces: 30 tokens
  const std::vector<std::string_view> docs = {doc};
  DocumentWindows w;
  ASSERT_TRUE(SplitLongDocuments(*model, "a", docs, ChunkOptionsFor(*model, LongDocuments::kChunkMean), &w).ok());
  ASSERT_GT(w.windows.size(), 1u);
  for (std::string_view window : w.windows) {
    EXPECT_EQ(window, Repeat({"bxy"}, WordCount(window))) << window;  // whole words only
    EXPECT_LE(WordCount(window) * 3, 12u);
  }
}

TEST(SplitLongDocuments, ChunkTokensStrideAndTheWindowLimit) {
  ModelSpec spec;
  spec.parameters.chunk_tokens = 4;
  spec.parameters.chunk_stride = 4;
  spec.parameters.max_chunks_per_document = 5;
  auto model = Served(spec, std::make_shared<BackendControl>());
  const std::string doc = Repeat({"b", "c"}, 20);
  const std::vector<std::string_view> docs = {doc};
  DocumentWindows w;
  ASSERT_TRUE(SplitLongDocuments(*model, "a", docs, ChunkOptionsFor(*model, LongDocuments::kChunkMax), &w).ok());
  ASSERT_EQ(w.windows.size(), 5u);  // 20 tokens, 4 a window, no overlap
  for (std::string_view window : w.windows) EXPECT_EQ(WordCount(window), 4u);

  const std::string longer = Repeat({"b", "c"}, 24);
  const std::vector<std::string_view> too_long = {"b", longer};
  const absl::Status s =
      SplitLongDocuments(*model, "a", too_long, ChunkOptionsFor(*model, LongDocuments::kChunkMax), &w);
  EXPECT_EQ(api::HttpStatusFor(s), 422);
  EXPECT_NE(s.message().find("texts[1]"), std::string::npos) << s;
  EXPECT_NE(s.message().find("needs 6 windows"), std::string::npos) << s;
  EXPECT_NE(s.message().find("max_chunks_per_document is 5"), std::string::npos) << s;
}

TEST(FoldWindowScores, MaxOrMeanPerDocument) {
  const std::vector<size_t> owner = {0, 1, 1, 1, 2};
  const std::vector<float> scores = {0.5f, 0.1f, 0.9f, 0.2f, -1.0f};
  EXPECT_EQ(FoldWindowScores(LongDocuments::kChunkMax, owner, scores, 3), (std::vector<float>{0.5f, 0.9f, -1.0f}));
  const std::vector<float> mean = FoldWindowScores(LongDocuments::kChunkMean, owner, scores, 3);
  EXPECT_FLOAT_EQ(mean[1], 0.4f);
  EXPECT_FLOAT_EQ(mean[0], 0.5f);
}

// A document whose only matching word lies past what fits beside the query: truncate misses it,
// chunk_max finds it, chunk_mean averages it in; every window runs as a row.
TEST(ServiceCoreLongDocuments, TheMatchPastTheCutIsFound) {
  auto metrics = ServingMetrics::Create();
  ASSERT_TRUE(metrics.ok());
  auto models = ModelManager::Create(metrics->get());
  auto c = std::make_shared<BackendControl>();
  c->decisive_token = 9;  // "f"
  ASSERT_TRUE(models->Add(Served({}, c)).ok());
  ServiceCoreOptions o;
  o.tokenization_workers = 1;
  auto core = ServiceCore::Create(models.get(), metrics->get(), o);
  ASSERT_TRUE(core.ok());
  CallInfo info;
  info.received_at = std::chrono::steady_clock::now();
  CallPtr call;
  absl::Notification started;
  (*core)->Start(info, [&](absl::StatusOr<CallPtr> c) {
    call = *std::move(c);
    started.Notify();
  });
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kHang));
  auto model = *(*core)->FindModel();
  const std::string doc = Repeat({"b", "c", "d"}, 20) + " f";  // "f" is token 21 of the document
  const std::vector<std::string_view> docs = {"b c", doc};
  auto rerank = [&](LongDocuments mode) {
    PairOptions p;
    p.long_documents = mode;
    absl::StatusOr<RerankScores> out = absl::UnknownError("no answer");
    absl::Notification done;
    (*core)->Rerank(call, model, "a", docs, p, /*raw_scores=*/true, [&](absl::StatusOr<RerankScores> s) {
      out = std::move(s);
      done.Notify();
    });
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(kHang));
    return out;
  };
  const int before = c->rows_run.load();
  auto cut = rerank(LongDocuments::kTruncate);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_EQ(cut->scores, (std::vector<float>{-5.0f, -5.0f}));
  EXPECT_EQ(c->rows_run.load() - before, 2);
  auto best = rerank(LongDocuments::kChunkMax);
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_EQ(best->scores, (std::vector<float>{-5.0f, 5.0f}));
  EXPECT_EQ(c->rows_run.load() - before, 2 + 4);  // "b c" + 3 windows of the long document
  EXPECT_GT(best->real_tokens, cut->real_tokens);  // every window's tokens
  auto mean = rerank(LongDocuments::kChunkMean);
  ASSERT_TRUE(mean.ok());
  EXPECT_FLOAT_EQ(mean->scores[1], (-5.0f - 5.0f + 5.0f) / 3);  // only the last window holds "f"
  EXPECT_FLOAT_EQ(mean->scores[0], -5.0f);  // a short document is untouched
  call.reset();
  core->reset();
}

}  // namespace
}  // namespace tide::serving
