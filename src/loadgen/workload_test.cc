#include "loadgen/workload.h"

#include <filesystem>
#include <memory>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "shared_assets.h"
#include "tokenizer/tokenizer.h"

namespace tide::loadgen {
namespace {

size_t Words(const std::string& text) {
  return std::vector<std::string>(absl::StrSplit(text, ' ', absl::SkipEmpty())).size();
}

std::unique_ptr<WorkloadGenerator> Make(const WorkloadOptions& options) {
  auto g = WorkloadGenerator::Create(options, Vocabulary::BuiltIn());
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : nullptr;
}

TEST(WorkloadGenerator, FixedSeedGivesTheSameRequests) {
  WorkloadOptions o;
  o.documents = 4;
  auto a = Make(o), b = Make(o);
  o.seed = 43;
  auto c = Make(o);
  bool differs = false;
  for (int i = 0; i < 20; ++i) {
    RerankWorkload x = a->Next(), y = b->Next(), z = c->Next();
    EXPECT_EQ(x.query, y.query);
    EXPECT_EQ(x.documents, y.documents);
    differs |= x.query != z.query || x.documents != z.documents;
  }
  EXPECT_TRUE(differs);
}

TEST(WorkloadGenerator, WordCountsFollowTheDistributionAndTheCap) {
  WorkloadOptions o;
  o.documents = 16;
  o.max_document_tokens = 512;
  auto g = Make(o);
  std::vector<int> doc_tokens;
  double query_sum = 0;
  int queries = 0;
  for (int i = 0; i < 400; ++i) {
    RerankWorkload w = g->Next();
    ASSERT_EQ(w.documents.size(), 16u);
    EXPECT_EQ(Words(w.query), static_cast<size_t>(w.query_tokens));
    query_sum += w.query_tokens;
    ++queries;
    for (size_t d = 0; d < w.documents.size(); ++d) {
      EXPECT_EQ(Words(w.documents[d]), static_cast<size_t>(w.document_tokens[d]));
      EXPECT_LE(w.document_tokens[d], 512);
      doc_tokens.push_back(w.document_tokens[d]);
    }
  }
  std::sort(doc_tokens.begin(), doc_tokens.end());
  EXPECT_NEAR(doc_tokens[doc_tokens.size() / 2], 314, 10);
  EXPECT_NEAR(doc_tokens[doc_tokens.size() * 9 / 10 - 1], 500, 10);
  // About 9% of SciFact documents exceed 509 tokens; the cap folds them onto 512.
  const double capped = std::count(doc_tokens.begin(), doc_tokens.end(), 512) / double(doc_tokens.size());
  EXPECT_GT(capped, 0.05);
  EXPECT_LT(capped, 0.12);
  EXPECT_NEAR(query_sum / queries, 20.8, 1.5);
}

TEST(WorkloadGenerator, RejectsNoDocuments) {
  WorkloadOptions o;
  o.documents = 0;
  EXPECT_FALSE(WorkloadGenerator::Create(o, Vocabulary::BuiltIn()).ok());
  EXPECT_FALSE(WorkloadGenerator::Create(WorkloadOptions{}, Vocabulary{}).ok());
}

TEST(Vocabulary, WordsFromTheTokenizerAreOneTokenEach) {
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kBertBaseUncasedTokenizer);
  const std::filesystem::path path = tide::testing::SharedAssetPath(tide::testing::kBertBaseUncasedTokenizer);
  auto tok = tokenizer::Tokenizer::FromFile(path.string());
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto vocab = Vocabulary::FromTokenizer(**tok);
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_GT(vocab->words.size(), 10000u);
  for (const std::string& w : vocab->words) {
    ASSERT_FALSE(w.starts_with("##"));
    ASSERT_FALSE(w.starts_with("["));
  }
  WorkloadOptions o;
  o.documents = 8;
  auto g = WorkloadGenerator::Create(o, *std::move(vocab));
  ASSERT_TRUE(g.ok());
  std::vector<int64_t> ids;
  for (int i = 0; i < 10; ++i) {
    RerankWorkload w = (*g)->Next();
    ASSERT_TRUE((*tok)->Tokenize(w.query, &ids).ok());
    EXPECT_EQ(ids.size(), static_cast<size_t>(w.query_tokens));
    for (size_t d = 0; d < w.documents.size(); ++d) {
      ASSERT_TRUE((*tok)->Tokenize(w.documents[d], &ids).ok());
      EXPECT_EQ(ids.size(), static_cast<size_t>(w.document_tokens[d]));
    }
  }
}

}  // namespace
}  // namespace tide::loadgen
