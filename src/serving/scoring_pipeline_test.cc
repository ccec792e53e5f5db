// Tests of the scoring pipeline alone, over fake backends, a fake quota and a fake rollout hook:
// every rerank and every set of token rows is charged once (a long document's windows as rows), a
// refused charge is the answer before any row runs, the rollout's watch sees each live answer
// once, the score cache never answers alone for a version the rollout tracks, and the embedding
// cache queues only the rows it lacks. No admission,
// no coordinator, no sleeps.
#include "serving/scoring_pipeline.h"

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/error.h"
#include "gtest/gtest.h"
#include "serving/testing/fake_backend.h"

namespace tide::serving {
namespace {

using testing::BackendControl;
using testing::kHang;
using testing::Rows;
using testing::Served;

// Records every charge; refuses when `refuse` is set.
struct FakeQuota {
  absl::Mutex mu;
  std::vector<size_t> charged ABSL_GUARDED_BY(mu);
  bool refuse = false;
  ChargePairsFn Fn() {
    return [this](const Call&, size_t pairs) -> absl::Status {
      absl::MutexLock lock(&mu);
      charged.push_back(pairs);
      if (refuse) return errors::Overloaded("over the fake quota");
      return absl::OkStatus();
    };
  }
  std::vector<size_t> Charged() {
    absl::MutexLock lock(&mu);
    return charged;
  }
};

// A rollout that tracks every version when `tracked` and records what its watches see.
class FakeHook : public RolloutHook {
 public:
  struct Seen : AnswerWatch {
    std::atomic<int> submitted{0}, answered{0};
    absl::Mutex mu;
    absl::Status status ABSL_GUARDED_BY(mu);
    bool degraded ABSL_GUARDED_BY(mu) = false;
    std::vector<float> scores ABSL_GUARDED_BY(mu);
    void Submitted() override { ++submitted; }
    void Answered(const absl::Status& s, bool d, std::span<const float> sc) override {
      absl::MutexLock lock(&mu);
      status = s;
      degraded = d;
      scores.assign(sc.begin(), sc.end());
      ++answered;
    }
  };
  bool tracked = false;
  std::vector<std::shared_ptr<Seen>> watches;
  std::vector<size_t> mirrored;  // documents (or rows) each watch was offered

  absl::StatusOr<std::shared_ptr<ServedModel>> Pick(const Call&, std::string_view, std::string_view) const override {
    return absl::UnimplementedError("not used");
  }
  std::vector<std::string> StickyHeaders() const override { return {}; }
  bool Tracks(const ServedModel&) const override { return tracked; }
  std::shared_ptr<AnswerWatch> Watch(const Call&, const ServedModel&, const MirrorRequest& mirror) override {
    if (!tracked) return nullptr;
    mirrored.push_back(mirror.rows != nullptr ? mirror.rows->size() : mirror.documents.size());
    watches.push_back(std::make_shared<Seen>());
    return watches.back();
  }
};

struct Harness {
  explicit Harness(ScoringPipelineOptions options = {}) {
    auto m = ServingMetrics::Create();
    EXPECT_TRUE(m.ok());
    metrics = *std::move(m);
    control->value = 0.5f;
    model = std::shared_ptr<ServedModel>(Served({}, control));
    pipeline = std::make_unique<ScoringPipeline>(metrics.get(), quota.Fn(), &hook, options);
    call = std::make_shared<Call>(&clock, RowTask::Admission{}, clock.Now(), std::chrono::milliseconds(0), false,
                                  false);
  }
  absl::StatusOr<RerankScores> Rerank(std::vector<std::string_view> docs, PairOptions options = {}) {
    absl::StatusOr<RerankScores> out = absl::UnknownError("no answer");
    absl::Notification done;
    pipeline->Rerank(call, model, "a", docs, options, /*raw_scores=*/true, [&](absl::StatusOr<RerankScores> s) {
      out = std::move(s);
      done.Notify();
    });
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(kHang));
    return out;
  }
  absl::StatusOr<InferOutcome> Infer(size_t rows) {
    absl::StatusOr<InferOutcome> out = absl::UnknownError("no answer");
    absl::Notification done;
    pipeline->Infer(call, model, Rows(rows), [&](absl::StatusOr<InferOutcome> o) {
      out = std::move(o);
      done.Notify();
    });
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(kHang));
    return out;
  }

  absl::StatusOr<InferOutcome> Embed(std::vector<tokenizer::Encoding> rows) {
    absl::StatusOr<InferOutcome> out = absl::UnknownError("no answer");
    absl::Notification done;
    pipeline->Embed(call, model, std::move(rows), [&](absl::StatusOr<InferOutcome> o) {
      out = std::move(o);
      done.Notify();
    });
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(kHang));
    return out;
  }
  double EmbedCache(bool hits) const {
    const std::vector<std::string> labels = {model->name(), std::to_string(model->version())};
    return (hits ? metrics->embed_cache_hits : metrics->embed_cache_misses)->WithLabels(labels)->Value();
  }

  FakeClock clock;
  std::unique_ptr<ServingMetrics> metrics;
  std::shared_ptr<BackendControl> control = std::make_shared<BackendControl>();
  std::shared_ptr<ServedModel> model;
  FakeQuota quota;
  FakeHook hook;
  std::unique_ptr<ScoringPipeline> pipeline;
  CallPtr call;
};

std::string Words(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += i == 0 ? "b" : " c";
  return s;
}

TEST(ScoringPipeline, EveryRequestIsChargedOnceAndALongDocumentsWindowsAsRows) {
  Harness h;
  ASSERT_TRUE(h.Rerank({"b", "c d"}).ok());
  const std::string long_doc = Words(20);  // 3 windows beside a 1-token query (long_documents_test)
  PairOptions windows;
  windows.long_documents = LongDocuments::kChunkMax;
  auto split = h.Rerank({"b", long_doc}, windows);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->scores.size(), 2u);  // folded back per document
  ASSERT_TRUE(h.Infer(3).ok());
  EXPECT_EQ(h.quota.Charged(), (std::vector<size_t>{2, 1 + 3, 3}));
  EXPECT_EQ(h.call->pairs(), 0);  // the pipeline only asks; the quota (admission) counts
}

TEST(ScoringPipeline, ARefusedChargeIsTheAnswerBeforeAnyRowRuns) {
  Harness h;
  h.quota.refuse = true;
  const int warm = h.control->rows_run.load();  // the model's warm-up rows
  auto scores = h.Rerank({"b", "c"});
  EXPECT_EQ(KindOf(scores.status()), ErrorKind::kOverloaded) << scores.status();
  auto rows = h.Infer(2);
  EXPECT_EQ(KindOf(rows.status()), ErrorKind::kOverloaded) << rows.status();
  EXPECT_EQ(h.control->rows_run.load(), warm);
}

TEST(ScoringPipeline, TheRolloutsWatchSeesEachLiveAnswerOnce) {
  Harness h;
  ASSERT_TRUE(h.Rerank({"b"}).ok());
  EXPECT_TRUE(h.hook.watches.empty());  // not tracked: no watch
  h.hook.tracked = true;
  auto scores = h.Rerank({"b", "c d"});
  ASSERT_TRUE(scores.ok());
  auto rows = h.Infer(3);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(h.hook.watches.size(), 2u);
  EXPECT_EQ(h.hook.mirrored, (std::vector<size_t>{2, 3}));
  for (const auto& w : h.hook.watches) {
    EXPECT_EQ(w->submitted.load(), 1);
    EXPECT_EQ(w->answered.load(), 1);
    absl::MutexLock lock(&w->mu);
    EXPECT_TRUE(w->status.ok());
    EXPECT_FALSE(w->degraded);
  }
  absl::MutexLock a(&h.hook.watches[0]->mu), b(&h.hook.watches[1]->mu);
  EXPECT_EQ(h.hook.watches[0]->scores, scores->scores);
  EXPECT_EQ(h.hook.watches[1]->scores, rows->result.logits);

  // A refused charge is an answer the watch sees too (the rollout decides it says nothing).
  h.quota.refuse = true;
  EXPECT_FALSE(h.Rerank({"b"}).ok());
  ASSERT_EQ(h.hook.watches.size(), 3u);
  EXPECT_EQ(h.hook.watches[2]->answered.load(), 1);
}

TEST(ScoringPipeline, TheCacheAnswersAloneOnlyForAVersionNoRolloutTracks) {
  ScoringPipelineOptions o;
  o.score_cache_bytes = 1 << 20;
  Harness h(o);
  const std::vector<std::string_view> docs = {"b", "c"};
  EXPECT_FALSE(h.pipeline->RerankFromCache(*h.call, *h.model, "a", docs, PairOptions{}, false).has_value());
  auto first = h.Rerank(docs);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->cache_hits, 0u);
  const int run = h.control->rows_run.load();
  auto whole = h.pipeline->RerankFromCache(*h.call, *h.model, "a", docs, PairOptions{}, /*raw_scores=*/true);
  ASSERT_TRUE(whole.has_value() && whole->ok());
  EXPECT_EQ((*whole)->cache_hits, 2u);
  EXPECT_EQ((*whole)->scores, first->scores);
  EXPECT_EQ(h.call->cache_hits(), 2);
  h.hook.tracked = true;
  EXPECT_FALSE(h.pipeline->RerankFromCache(*h.call, *h.model, "a", docs, PairOptions{}, true).has_value());
  auto again = h.Rerank(docs);  // the pipeline's own lookup still uses the cache
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->cache_hits, 2u);
  EXPECT_EQ(h.control->rows_run.load(), run);
  EXPECT_EQ(h.quota.Charged(), (std::vector<size_t>{2, 2, 2}));
}

// Rows whose token ids are {2, id, 3}: the fake model answers +5 for a row holding token 7, else -5.
std::vector<tokenizer::Encoding> RowsWith(std::vector<int64_t> middle) {
  std::vector<tokenizer::Encoding> rows = Rows(middle.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i].ids[1] = middle[i];
  return rows;
}

TEST(ScoringPipeline, TheEmbeddingCacheQueuesOnlyTheRowsItLacksAndAnswersInOrder) {
  ScoringPipelineOptions o;
  o.embed_cache_bytes = 1 << 20;
  Harness h(o);
  h.control->decisive_token = 7;
  auto first = h.Embed(RowsWith({4, 7}));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->result.logits, (std::vector<float>{-5, 5}));
  EXPECT_EQ(h.EmbedCache(true), 0);
  EXPECT_EQ(h.EmbedCache(false), 2);
  const int run = h.control->rows_run.load();
  // Two rows found, one new one queued alone; the answer keeps the request's order.
  auto mixed = h.Embed(RowsWith({7, 8, 4}));
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(mixed->result.rows, 3);
  EXPECT_EQ(mixed->result.logits, (std::vector<float>{5, -5, -5}));
  EXPECT_EQ(h.control->rows_run.load(), run + 1);
  EXPECT_EQ(h.EmbedCache(true), 2);
  EXPECT_EQ(h.EmbedCache(false), 3);
  // Every row found: answered without the model.
  h.control->decisive_token = 8;  // the model would now answer differently
  auto cached = h.Embed(RowsWith({4, 7}));
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(cached->result.logits, (std::vector<float>{-5, 5}));
  EXPECT_EQ(cached->result.real_tokens, 0u);
  EXPECT_EQ(h.control->rows_run.load(), run + 1);
  EXPECT_EQ(h.call->cache_hits(), 4);
  // The same ids with other type ids are another input.
  std::vector<tokenizer::Encoding> typed = RowsWith({4});
  typed[0].type_ids = {1, 1, 1};
  ASSERT_TRUE(h.Embed(std::move(typed)).ok());
  EXPECT_EQ(h.control->rows_run.load(), run + 2);
  // Every row is charged, found or not.
  EXPECT_EQ(h.quota.Charged(), (std::vector<size_t>{2, 3, 2, 1}));
}

TEST(ScoringPipeline, TheEmbeddingCacheIsSkippedForAVersionTheRolloutTracks) {
  ScoringPipelineOptions o;
  o.embed_cache_bytes = 1 << 20;
  Harness h(o);
  ASSERT_TRUE(h.Embed(RowsWith({4, 5})).ok());
  const int run = h.control->rows_run.load();
  h.hook.tracked = true;  // its answers must reach the rollout's watch
  ASSERT_TRUE(h.Embed(RowsWith({4, 5})).ok());
  EXPECT_EQ(h.control->rows_run.load(), run + 2);
  ASSERT_EQ(h.hook.watches.size(), 1u);
  EXPECT_EQ(h.hook.watches[0]->answered.load(), 1);
  EXPECT_EQ(h.EmbedCache(true), 0);
}

// EmbedAll (TEI's /embed_all): every row runs, asking for the token states (never the cache, which
// holds pooled vectors only); each row gets its own tokens' states; every row is charged.
TEST(ScoringPipeline, EmbedAllAsksForTokenStatesAndNeverReadsTheCache) {
  ScoringPipelineOptions o;
  o.embed_cache_bytes = 1 << 20;
  Harness h(o);
  std::atomic<int> asked{0};
  h.control->logits = [&asked](const runtime::TokenBatch& b, runtime::Logits* out) {
    if (!b.token_states) return;
    asked.fetch_add(1);
    out->hidden = 1;  // each token's state: its id
    out->token_states.assign(b.input_ids.begin(), b.input_ids.end());
  };
  ASSERT_TRUE(h.Embed(RowsWith({4, 7})).ok());  // now in the cache
  EXPECT_EQ(asked.load(), 0);
  const int run = h.control->rows_run.load();
  std::vector<tokenizer::Encoding> rows = RowsWith({4, 7});
  const std::vector<int64_t> ids0 = rows[0].ids, ids1 = rows[1].ids;
  absl::StatusOr<InferOutcome> all = absl::UnknownError("no answer");
  absl::Notification done;
  h.pipeline->EmbedAll(h.call, h.model, std::move(rows), [&](absl::StatusOr<InferOutcome> r) {
    all = std::move(r);
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kHang));
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(h.control->rows_run.load(), run + 2);
  EXPECT_GE(asked.load(), 1);
  EXPECT_EQ(all->result.hidden, 1);
  ASSERT_EQ(all->result.token_states.size(), 2u);
  EXPECT_EQ(all->result.token_states[0], std::vector<float>(ids0.begin(), ids0.end()));
  EXPECT_EQ(all->result.token_states[1], std::vector<float>(ids1.begin(), ids1.end()));
  EXPECT_EQ(h.EmbedCache(true), 0);
  EXPECT_EQ(h.call->cache_hits(), 0);
  EXPECT_EQ(h.quota.Charged(), (std::vector<size_t>{2, 2}));
}

TEST(ScoringPipeline, WithoutTheEmbeddingCacheEmbedIsInfer) {
  Harness h;
  ASSERT_TRUE(h.Embed(RowsWith({4})).ok());
  const int run = h.control->rows_run.load();
  ASSERT_TRUE(h.Embed(RowsWith({4})).ok());
  EXPECT_EQ(h.control->rows_run.load(), run + 1);
  EXPECT_EQ(h.pipeline->embed_cache(), nullptr);
}

}  // namespace
}  // namespace tide::serving
