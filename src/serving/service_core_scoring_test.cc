// In-process tests of the service core's scoring path with fake backends (serving/testing/
// core_harness.h): rerank and token rows through the model, the breaker's fallbacks, atomic
// replacement of a version with a call in flight, and the score cache (what it queues, tenant
// partitions, degraded answers). No model file, no ONNX Runtime, no HTTP, no sleeps.
#include "serving/service_core.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "api/status_http.h"
#include "common/error.h"
#include "guard/api_keys.h"
#include "gtest/gtest.h"
#include "serving/fallback.h"
#include "serving/testing/core_harness.h"

namespace tide::serving {
namespace {

using testing::BackendControl;
using testing::kHang;
using testing::ModelSpec;
using testing::Rows;
using testing::Served;
using Harness = testing::ServiceCoreHarness;
using testing::BreakerSpec;
using testing::OpenBreaker;
using testing::RerankNow;
using testing::Sigmoid;

TEST(ServiceCore, RerankScoresThroughTheModelAndTheDefaultIsTheFirstByName) {
  Harness h;
  auto c = std::make_shared<BackendControl>();
  c->value = 0.5f;
  ASSERT_TRUE(h.models->Add(Served({.name = "m"}, c)).ok());
  auto other = std::make_shared<BackendControl>();
  other->value = -1.0f;
  ASSERT_TRUE(h.models->Add(Served({.name = "z"}, other)).ok());
  auto call = h.StartAndWait(h.Info());
  ASSERT_TRUE(call.ok());
  auto model = h.core->FindModel();
  ASSERT_TRUE(model.ok());
  EXPECT_EQ((*model)->name(), "m");
  auto scores = RerankNow(*h.core, *call, *model, {"b", "c d"});
  ASSERT_TRUE(scores.ok()) << scores.status();
  ASSERT_EQ(scores->scores.size(), 2u);
  EXPECT_FLOAT_EQ(scores->scores[1], Sigmoid(0.5f));
  EXPECT_EQ(scores->fallback, nullptr);
  EXPECT_GT(scores->real_tokens, 0u);
  auto z = h.core->FindModel("z");
  ASSERT_TRUE(z.ok());
  EXPECT_FLOAT_EQ(RerankNow(*h.core, *call, *z, {"b"})->scores[0], Sigmoid(-1.0f));
  EXPECT_EQ(api::HttpStatusFor(h.core->FindModel("m", "9").status()), 404);

  // Tokenize: each input cut to the model's max_sequence_length.
  std::vector<tokenizer::Encoding> out;
  const std::vector<TextInput> inputs = {{"a b", std::nullopt}, {"a", "b c"}};
  ASSERT_TRUE(h.core->Tokenize(**call, **model, inputs, true, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].ids.size(), 4u);  // [CLS] a b [SEP]
  EXPECT_EQ(out[1].ids.size(), 6u);  // [CLS] a [SEP] b c [SEP]
}

TEST(ServiceCore, AnOpenBreakerAnswersWithTheFallbackMarkedAndCounted) {
  Harness h;
  auto c = std::make_shared<BackendControl>();
  ASSERT_TRUE(h.models->Add(Served(BreakerSpec("r"), c)).ok());
  ModelSpec classifier = BreakerSpec("k");
  classifier.parameters.task = config::Task::kClassify;
  classifier.parameters.breaker_default_result = {0.25f};
  auto kc = std::make_shared<BackendControl>();
  ASSERT_TRUE(h.models->Add(Served(classifier, kc)).ok());
  auto reranker = *h.core->FindModel("r");
  auto classify = *h.core->FindModel("k");
  OpenBreaker(*reranker, *c);
  OpenBreaker(*classify, *kc);
  auto call = h.StartAndWait(h.Info());
  ASSERT_TRUE(call.ok());

  // A reranker answers BM25 over the request's documents: the matching one first.
  auto bm25 = RerankNow(*h.core, *call, reranker, {"b c", "a b"});
  ASSERT_TRUE(bm25.ok()) << bm25.status();
  EXPECT_EQ(std::string(bm25->fallback), kFallbackBm25);
  EXPECT_GT(bm25->scores[1], bm25->scores[0]);
  EXPECT_EQ(h.metrics->degraded->WithLabels({"r", "1", kFallbackBm25})->Value(), 1);

  // Token rows: a reranker has no fallback (503, marked); a classifier its default result.
  auto infer = [&](std::shared_ptr<ServedModel> model) {
    absl::StatusOr<InferOutcome> out = absl::UnknownError("no answer");
    h.core->Infer(*call, std::move(model), Rows(3), [&](absl::StatusOr<InferOutcome> o) { out = std::move(o); });
    return out;  // a fallback answers on this thread
  };
  auto unavailable = infer(reranker);
  EXPECT_EQ(api::HttpStatusFor(unavailable.status()), 503);
  EXPECT_TRUE(IsDegradedUnavailable(unavailable.status()));
  auto defaulted = infer(classify);
  ASSERT_TRUE(defaulted.ok()) << defaulted.status();
  EXPECT_EQ(std::string(defaulted->fallback), kFallbackDefault);
  EXPECT_EQ(defaulted->result.rows, 3);
  EXPECT_FLOAT_EQ(defaulted->result.at(2, 0), 0.25f);
  EXPECT_EQ(h.metrics->degraded->WithLabels({"k", "1", kFallbackDefault})->Value(), 1);
}

TEST(ServiceCore, AReplacedVersionFinishesTheCallsThatFoundIt) {
  Harness h;
  auto old_backends = std::make_shared<BackendControl>();
  old_backends->value = 1.0f;
  ASSERT_TRUE(h.models->Add(Served({}, old_backends)).ok());
  auto call = h.StartAndWait(h.Info());
  ASSERT_TRUE(call.ok());
  old_backends->armed = true;
  absl::StatusOr<InferOutcome> in_flight = absl::UnknownError("no answer");
  absl::Notification in_flight_done;
  h.core->Infer(*call, *h.core->FindModel("m"), Rows(2), [&](absl::StatusOr<InferOutcome> o) {
    in_flight = std::move(o);
    in_flight_done.Notify();
  });
  ASSERT_TRUE(old_backends->entered.WaitForNotificationWithTimeout(kHang));

  auto new_backends = std::make_shared<BackendControl>();
  new_backends->value = 2.0f;
  ASSERT_TRUE(h.models->Replace(Served({}, new_backends)).ok());
  auto fresh_call = h.StartAndWait(h.Info());
  ASSERT_TRUE(fresh_call.ok());
  auto fresh = RerankNow(*h.core, *fresh_call, *h.core->FindModel("m"), {"b"});
  ASSERT_TRUE(fresh.ok());
  EXPECT_FLOAT_EQ(fresh->scores[0], Sigmoid(2.0f));

  old_backends->gate.Notify();
  ASSERT_TRUE(in_flight_done.WaitForNotificationWithTimeout(kHang));
  ASSERT_TRUE(in_flight.ok()) << in_flight.status();
  EXPECT_FLOAT_EQ(in_flight->result.at(1, 0), 1.0f);
  EXPECT_TRUE(old_backends->all_destroyed.WaitForNotificationWithTimeout(kHang));
}

// The score cache: a pair seen again is not queued again; only the pairs not found are; a
// replaced version answers from its own entries only; no_cache reads nothing; a degraded answer
// is degraded for every document.
TEST(ServiceCore, TheScoreCacheQueuesOnlyPairsItHasNotSeen) {
  ServiceCoreOptions o;
  o.score_cache_bytes = 1 << 20;
  Harness h(o);
  auto c = std::make_shared<BackendControl>();
  c->value = 0.5f;
  ASSERT_TRUE(h.models->Add(Served({}, c)).ok());
  auto call = h.StartAndWait(h.Info());
  ASSERT_TRUE(call.ok());
  auto model = *h.core->FindModel();
  const int warmup = c->rows_run.load();  // rows the warm-up ran
  auto rows_run = [&] { return c->rows_run.load() - warmup; };

  auto first = RerankNow(*h.core, *call, model, {"b", "c"});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->cache_hits, 0u);
  EXPECT_EQ(rows_run(), 2);
  auto again = RerankNow(*h.core, *call, model, {"b", "c"});  // all found: the model is not asked
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->cache_hits, 2u);
  EXPECT_EQ(again->scores, first->scores);
  EXPECT_EQ(rows_run(), 2);
  auto mixed = RerankNow(*h.core, *call, model, {"d", "b"});  // one found, one queued
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(mixed->cache_hits, 1u);
  EXPECT_EQ(rows_run(), 3);
  EXPECT_FLOAT_EQ(mixed->scores[0], Sigmoid(0.5f));
  EXPECT_FLOAT_EQ(mixed->scores[1], first->scores[0]);
  // Another query is another pair; raw scores come from the same cached logit.
  absl::StatusOr<RerankScores> raw = absl::UnknownError("no answer");
  h.core->Rerank(*call, model, "a", std::vector<std::string_view>{"b"}, PairOptions{}, /*raw_scores=*/true,
                 [&](absl::StatusOr<RerankScores> s) { raw = std::move(s); });
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->cache_hits, 1u);
  EXPECT_FLOAT_EQ(raw->scores[0], 0.5f);
  // Counted per model and version (the dashboard's hit ratio per card).
  const std::vector<std::string> labels = {model->name(), std::to_string(model->version())};
  EXPECT_EQ(h.metrics->score_cache_hits->WithLabels(labels)->Value(), 4);
  EXPECT_EQ(h.metrics->score_cache_misses->WithLabels(labels)->Value(), 3);

  // RerankFromCache (the edge's I/O-thread attempt): a request found whole is answered without the
  // model and counted; one with a pair not found answers nullopt and counts nothing.
  const std::vector<std::string_view> found = {"b", "c"};
  auto whole = h.core->RerankFromCache(**call, *model, "a", found, PairOptions{}, /*raw_scores=*/false);
  ASSERT_TRUE(whole.has_value());
  ASSERT_TRUE(whole->ok()) << whole->status();
  EXPECT_EQ((*whole)->cache_hits, 2u);
  EXPECT_EQ((*whole)->scores, first->scores);
  EXPECT_EQ(rows_run(), 3);
  EXPECT_EQ(h.metrics->score_cache_hits->WithLabels(labels)->Value(), 6);
  const std::vector<std::string_view> partly = {"b", "never seen"};
  EXPECT_FALSE(h.core->RerankFromCache(**call, *model, "a", partly, PairOptions{}, false).has_value());
  PairOptions windows;
  windows.long_documents = LongDocuments::kChunkMax;
  EXPECT_FALSE(h.core->RerankFromCache(**call, *model, "a", found, windows, false).has_value());
  EXPECT_EQ(h.metrics->score_cache_hits->WithLabels(labels)->Value(), 6);
  EXPECT_EQ(h.metrics->score_cache_misses->WithLabels(labels)->Value(), 3);

  // no_cache: nothing read (the answer is stored again).
  CallInfo fresh_info = h.Info();
  fresh_info.no_cache = true;
  auto fresh_call = h.StartAndWait(fresh_info);
  ASSERT_TRUE(fresh_call.ok());
  auto fresh = RerankNow(*h.core, *fresh_call, model, {"b", "c"});
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->cache_hits, 0u);
  EXPECT_EQ(rows_run(), 5);

  // A replaced version (same number, new weights) never answers from its predecessor's entries.
  auto replacement = std::make_shared<BackendControl>();
  replacement->value = -2.0f;
  ASSERT_TRUE(h.models->Replace(Served({}, replacement)).ok());
  auto replaced = RerankNow(*h.core, *call, *h.core->FindModel(), {"b", "c"});
  ASSERT_TRUE(replaced.ok());
  EXPECT_EQ(replaced->cache_hits, 0u);
  EXPECT_FLOAT_EQ(replaced->scores[0], Sigmoid(-2.0f));
}

// Tenant isolation: with keys, a tenant never hits (nor learns of) another tenant's pairs; with
// score_cache_scope kShared everyone shares the entries.
TEST(ServiceCore, TheScoreCacheIsPartitionedByTenantUnlessShared) {
  for (const ScoreCacheScope scope : {ScoreCacheScope::kTenant, ScoreCacheScope::kShared}) {
    SCOPED_TRACE(scope == ScoreCacheScope::kTenant ? "tenant" : "shared");
    FakeClock clock;
    auto keys = guard::ApiKeys::Parse("key-a name=alice\nkey-b name=bob\n", "keys", &clock);
    ASSERT_TRUE(keys.ok()) << keys.status();
    ServiceCoreOptions o;
    o.api_keys = *keys;
    o.clock = &clock;
    o.score_cache_bytes = 1 << 20;
    o.score_cache_scope = scope;
    Harness h(o);
    auto c = std::make_shared<BackendControl>();
    ASSERT_TRUE(h.models->Add(Served({}, c)).ok());
    auto model = *h.core->FindModel();
    auto as = [&](const char* authorization) {
      CallInfo info = h.Info();
      info.authorization = authorization;
      return h.StartAndWait(info);
    };
    auto alice = as("Bearer key-a");
    auto bob = as("Bearer key-b");
    ASSERT_TRUE(alice.ok() && bob.ok());
    const int warmup = c->rows_run.load();

    auto first = RerankNow(*h.core, *alice, model, {"b", "c"});
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(first->cache_hits, 0u);
    const std::vector<std::string_view> pairs = {"b", "c"};
    auto bob_whole = h.core->RerankFromCache(**bob, *model, "a", pairs, PairOptions{}, /*raw_scores=*/false);
    auto by_bob = RerankNow(*h.core, *bob, model, {"b", "c"});
    ASSERT_TRUE(by_bob.ok()) << by_bob.status();
    auto again = RerankNow(*h.core, *alice, model, {"b", "c"});
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->cache_hits, 2u) << "a tenant hits its own pairs";
    if (scope == ScoreCacheScope::kTenant) {
      EXPECT_FALSE(bob_whole.has_value()) << "the I/O-thread attempt must not answer from alice's entries";
      EXPECT_EQ(by_bob->cache_hits, 0u);
      EXPECT_EQ(c->rows_run.load() - warmup, 4) << "bob's pairs are scored by the model";
    } else {
      ASSERT_TRUE(bob_whole.has_value());
      EXPECT_EQ((*bob_whole)->cache_hits, 2u);
      EXPECT_EQ(by_bob->cache_hits, 2u);
      EXPECT_EQ(c->rows_run.load() - warmup, 2);
    }
    EXPECT_EQ(by_bob->scores, first->scores);
  }
}

TEST(ServiceCore, ADegradedAnswerWithACacheIsDegradedForEveryDocument) {
  ServiceCoreOptions o;
  o.score_cache_bytes = 1 << 20;
  Harness h(o);
  auto c = std::make_shared<BackendControl>();
  ASSERT_TRUE(h.models->Add(Served(BreakerSpec("r"), c)).ok());
  auto model = *h.core->FindModel("r");
  auto call = h.StartAndWait(h.Info());
  ASSERT_TRUE(call.ok());
  ASSERT_TRUE(RerankNow(*h.core, *call, model, {"b"}).ok());  // cached while the model answers
  OpenBreaker(*model, *c);
  auto degraded = RerankNow(*h.core, *call, model, {"a b", "b"});  // "b" is cached, "a b" is not
  ASSERT_TRUE(degraded.ok()) << degraded.status();
  EXPECT_EQ(std::string(degraded->fallback), kFallbackBm25);
  EXPECT_EQ(degraded->scores.size(), 2u);
  EXPECT_GT(degraded->scores[0], degraded->scores[1]);  // BM25 for both: the query word matches "a b"
}

}  // namespace
}  // namespace tide::serving
