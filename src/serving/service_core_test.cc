// In-process tests of the protocol-neutral service core with fake backends: admission in its
// documented order (draining, credential, concurrency, unknown model, memory), the tokenization
// queue, deadlines and departed clients while a call waits for a worker (injected clock), rerank
// and token rows through the model, the breaker's fallbacks, version selection and atomic
// replacement with a call in flight, and how every refusal maps to HTTP and gRPC. No model file,
// no ONNX Runtime, no HTTP, no sleeps.
#include "serving/service_core.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "api/status_http.h"
#include "common/error.h"
#include "guard/api_keys.h"
#include "gtest/gtest.h"
#include "serving/fallback.h"
#include "serving/testing/fake_backend.h"

namespace tide::serving {
namespace {

using testing::BackendControl;
using testing::kHang;
using testing::ModelSpec;
using testing::Rows;
using testing::Served;

// A core over its own manager and metrics; one tokenization worker unless a test asks for more.
struct Harness {
  explicit Harness(ServiceCoreOptions options = {}) {
    auto m = ServingMetrics::Create();
    EXPECT_TRUE(m.ok());
    metrics = *std::move(m);
    models = ModelManager::Create(metrics.get());
    if (options.tokenization_workers == 0) options.tokenization_workers = 1;
    if (options.clock == nullptr) options.clock = &clock;
    auto c = ServiceCore::Create(models.get(), metrics.get(), options);
    EXPECT_TRUE(c.ok()) << c.status();
    core = *std::move(c);
  }
  ~Harness() {
    core.reset();  // workers first, while models and metrics still exist
    models.reset();
  }

  CallInfo Info(size_t body_bytes = 100) const {
    CallInfo info;
    info.body_bytes = body_bytes;
    info.received_at = clock.Now();
    info.client_gone = std::make_shared<CancellationFlag>();
    return info;
  }
  // Starts a call and waits for its refusal or its admitted call (the work then returns at once).
  absl::StatusOr<CallPtr> StartAndWait(const CallInfo& info) {
    absl::StatusOr<CallPtr> out = absl::UnknownError("no answer");
    absl::Notification done;
    core->Start(info, [&](absl::StatusOr<CallPtr> call) {
      out = std::move(call);
      done.Notify();
    });
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(kHang));
    return out;
  }
  // Occupies the only tokenization worker until the returned notification is notified.
  std::shared_ptr<absl::Notification> BlockWorker() {
    auto release = std::make_shared<absl::Notification>();
    absl::Notification running;
    core->Start(Info(), [release, &running](absl::StatusOr<CallPtr> call) {
      EXPECT_TRUE(call.ok()) << call.status();
      running.Notify();
      release->WaitForNotificationWithTimeout(kHang);
    });
    EXPECT_TRUE(running.WaitForNotificationWithTimeout(kHang));
    return release;
  }
  double Shed(const char* reason) const { return metrics->shed->WithLabels({reason})->Value(); }

  FakeClock clock;
  std::unique_ptr<ServingMetrics> metrics;
  std::unique_ptr<ModelManager> models;
  std::unique_ptr<ServiceCore> core;
};

absl::StatusOr<RerankScores> RerankNow(ServiceCore& core, const CallPtr& call, std::shared_ptr<ServedModel> model,
                                       std::vector<std::string_view> docs) {
  absl::StatusOr<RerankScores> out = absl::UnknownError("no answer");
  absl::Notification done;
  core.Rerank(call, std::move(model), "a", docs, PairOptions{}, /*raw_scores=*/false,
              [&](absl::StatusOr<RerankScores> s) {
                out = std::move(s);
                done.Notify();
              });
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(kHang));
  return out;
}

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

TEST(ServiceCore, AdmitsInTheDocumentedOrder) {
  ServiceCoreOptions o;
  o.api_key = "k";
  o.max_concurrent_requests = 1;
  o.max_inflight_bytes = 10 << 20;
  o.request_memory_factor = 1;
  o.request_memory_fixed_bytes = 0;
  Harness h(o);
  ASSERT_TRUE(h.models->Add(Served({}, std::make_shared<BackendControl>())).ok());

  // Draining comes first, even before the credential.
  h.core->SetDraining(true);
  EXPECT_EQ(api::HttpStatusFor(h.StartAndWait(h.Info()).status()), 503);
  EXPECT_FALSE(h.core->Ready());
  h.core->SetDraining(false);
  EXPECT_TRUE(h.core->Ready());
  EXPECT_EQ(h.Shed("draining"), 1);

  // The credential.
  CallInfo info = h.Info();
  EXPECT_EQ(api::HttpStatusFor(h.StartAndWait(info).status()), 401);
  info.authorization = "Bearer wrong";
  EXPECT_EQ(api::HttpStatusFor(h.StartAndWait(info).status()), 401);
  info.authorization = "Bearer k";

  // Concurrency: while one call is held, the next is refused; the slot frees with the call.
  absl::StatusOr<CallPtr> held = h.StartAndWait(info);
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(h.core->CurrentLoad().in_flight, 1);
  EXPECT_EQ(api::HttpStatusFor(h.StartAndWait(info).status()), 429);
  EXPECT_EQ(h.Shed("max_concurrent_requests"), 1);
  held->reset();
  EXPECT_EQ(h.core->CurrentLoad().in_flight, 0);

  // A model the path names must be served.
  CallInfo named = info;
  named.model = "nope";
  EXPECT_EQ(api::HttpStatusFor(h.StartAndWait(named).status()), 404);
  named.model = "m";
  named.model_version = "1";
  EXPECT_TRUE(h.StartAndWait(named).ok());

  // Memory: over the whole budget 413; over what is left 429.
  CallInfo huge = info;
  huge.body_bytes = 11 << 20;
  EXPECT_EQ(api::HttpStatusFor(h.StartAndWait(huge).status()), 413);
  h.core = nullptr;  // a core without the concurrency limit for the budget's second case
  o.max_concurrent_requests = 0;
  auto core = ServiceCore::Create(h.models.get(), h.metrics.get(), o);
  ASSERT_TRUE(core.ok());
  h.core = *std::move(core);
  CallInfo six = info;
  six.body_bytes = 6 << 20;
  absl::StatusOr<CallPtr> big = h.StartAndWait(six);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(api::HttpStatusFor(h.StartAndWait(six).status()), 429);
  EXPECT_EQ(h.Shed("max_inflight_bytes"), 2);
  big->reset();  // the lease goes back with the call
  EXPECT_TRUE(h.StartAndWait(six).ok());

  // A malformed timeout is the core's to refuse, for every edge.
  CallInfo zero = info;
  zero.timeout_us = 0;
  EXPECT_EQ(api::HttpStatusFor(h.StartAndWait(zero).status()), 422);
}

// A tenant asks for at most its max_priority, on the header and in the body (Refine); an admin
// key is no inference key.
TEST(ServiceCore, ATenantsPriorityIsClampedToItsMaxPriorityAndAdminKeysDoNotInfer) {
  FakeClock keys_clock;
  auto keys = guard::ApiKeys::Parse("capped-key name=capped max_priority=3\nplain-key name=plain\n"
                                    "ops-key name=ops role=admin\n", "keys.txt", &keys_clock);
  ASSERT_TRUE(keys.ok()) << keys.status();
  ServiceCoreOptions o;
  o.api_keys = *keys;
  Harness h(o);
  auto admitted = [&](const char* authorization, std::optional<int64_t> priority) {
    CallInfo info = h.Info();
    info.authorization = authorization;
    info.priority = priority;
    return h.StartAndWait(info);
  };
  auto capped = admitted("Bearer capped-key", 1);
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_EQ((*capped)->admission().priority, 3);
  EXPECT_EQ((*admitted("Bearer capped-key", 5))->admission().priority, 5);
  EXPECT_EQ((*admitted("Bearer plain-key", 1))->admission().priority, 0);
  auto refined = admitted("Bearer capped-key", std::nullopt);
  ASSERT_TRUE(refined.ok());
  ASSERT_TRUE((*refined)->Refine(std::nullopt, 2).ok());
  EXPECT_EQ((*refined)->admission().priority, 3);
  auto admin = admitted("Bearer ops-key", std::nullopt);
  ASSERT_FALSE(admin.ok());
  EXPECT_EQ(KindOf(admin.status()), ErrorKind::kForbidden);
}

TEST(ServiceCore, AFullWorkerQueueRefusesAtOnce) {
  ServiceCoreOptions o;
  o.tokenization_queue = 1;
  Harness h(o);
  auto release = h.BlockWorker();
  absl::Notification queued_ran;
  h.core->Start(h.Info(), [&](absl::StatusOr<CallPtr> call) {
    EXPECT_TRUE(call.ok());
    queued_ran.Notify();
  });
  absl::StatusOr<CallPtr> refused = absl::UnknownError("no answer");
  h.core->Start(h.Info(), [&](absl::StatusOr<CallPtr> call) { refused = std::move(call); });
  EXPECT_EQ(api::HttpStatusFor(refused.status()), 429);  // answered on this thread
  EXPECT_EQ(h.Shed("tokenization_queue"), 1);
  release->Notify();
  EXPECT_TRUE(queued_ran.WaitForNotificationWithTimeout(kHang));
}

TEST(ServiceCore, ACallIsDroppedWhenItsDeadlinePassesOrItsClientLeavesWhileItWaits) {
  Harness h;
  auto release = h.BlockWorker();
  CallInfo timed = h.Info();
  timed.timeout_us = 1000;
  CallInfo left = h.Info();
  absl::StatusOr<CallPtr> late = absl::UnknownError("no answer"), gone = absl::UnknownError("no answer");
  absl::Notification late_done, gone_done;
  h.core->Start(timed, [&](absl::StatusOr<CallPtr> c) {
    late = std::move(c);
    late_done.Notify();
  });
  h.core->Start(left, [&](absl::StatusOr<CallPtr> c) {
    gone = std::move(c);
    gone_done.Notify();
  });
  h.clock.Advance(std::chrono::milliseconds(2));
  left.client_gone->Cancel();
  release->Notify();
  ASSERT_TRUE(late_done.WaitForNotificationWithTimeout(kHang));
  ASSERT_TRUE(gone_done.WaitForNotificationWithTimeout(kHang));
  EXPECT_EQ(api::HttpStatusFor(late.status()), 504);
  EXPECT_NE(late.status().message().find("waiting for a tokenization worker"), std::string::npos);
  EXPECT_EQ(api::HttpStatusFor(gone.status()), 499);
  EXPECT_EQ(h.core->CurrentLoad().in_flight, 0);
}

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

// Opens `model`'s breaker by failing its batches (parameters from the spec).
void OpenBreaker(ServedModel& model, BackendControl& c) {
  c.fail = true;
  for (int i = 0; i < 200 && model.AdmitToModel(); ++i) {
    absl::Notification done;
    auto rows = Rows(1);
    model.Submit(rows, {}, [&done](absl::StatusOr<InferenceResult>) { done.Notify(); });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(kHang));
  }
  ASSERT_FALSE(model.AdmitToModel());
}

ModelSpec BreakerSpec(std::string name) {
  ModelSpec spec;
  spec.name = std::move(name);
  spec.parameters.breaker_error_rate = 0.5;
  spec.parameters.breaker_min_samples = 1;
  spec.parameters.breaker_open_s = 600;
  return spec;
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

// Several API keys: each tenant's requests_per_second, max_concurrent and pairs_per_second quotas
// hold for it alone; over quota is 429 with the time until its bucket allows the call.
TEST(ServiceCore, PerKeyQuotasLimitOnlyTheirOwnTenant) {
  FakeClock clock;
  auto keys = guard::ApiKeys::Parse(
      "flood-key name=flood requests_per_second=2 max_concurrent=1 pairs_per_second=4\n"
      "calm-key name=calm\n",
      "keys", &clock);
  ASSERT_TRUE(keys.ok()) << keys.status();
  ServiceCoreOptions o;
  o.api_keys = *keys;
  o.clock = &clock;
  Harness h(o);
  ASSERT_TRUE(h.models->Add(Served({}, std::make_shared<BackendControl>())).ok());
  auto as = [&](const char* key) {
    CallInfo info = h.Info();
    info.authorization = key;
    return info;
  };
  // max_concurrent=1: a second call of the same key waits for the first.
  absl::StatusOr<CallPtr> first = h.StartAndWait(as("Bearer flood-key"));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)->tenant()->name(), "flood");
  absl::StatusOr<CallPtr> second = h.StartAndWait(as("Bearer flood-key"));
  EXPECT_EQ(api::HttpStatusFor(second.status()), 429);
  EXPECT_NE(second.status().message().find("max_concurrent"), std::string::npos);
  // The other tenant is not affected.
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(h.StartAndWait(as("Bearer calm-key")).ok()) << i;

  // pairs_per_second=4 (burst 4): 3 documents pass, then 3 more must wait 0.5 s.
  auto model = *h.core->FindModel();
  EXPECT_TRUE(RerankNow(*h.core, *first, model, {"b", "c", "d"}).ok());
  auto over = RerankNow(*h.core, *first, model, {"b", "c", "d"});
  EXPECT_EQ(api::HttpStatusFor(over.status()), 429);
  EXPECT_EQ(RetryAfterMs(over.status()), 500);  // 2 tokens missing at 4/s
  EXPECT_EQ(h.metrics->key_pairs->WithLabels({"flood"})->Value(), 3);
  // The edge releases the call's permits as it answers (the model's callback may hold the call a
  // little longer).
  (*first)->ReleasePermit();
  first->reset();

  // requests_per_second=2 (burst 2): the first call took one token, this one takes the other.
  EXPECT_TRUE(h.StartAndWait(as("Bearer flood-key")).ok());
  absl::StatusOr<CallPtr> third = h.StartAndWait(as("Bearer flood-key"));
  EXPECT_EQ(api::HttpStatusFor(third.status()), 429);
  EXPECT_EQ(RetryAfterMs(third.status()), 500);
  EXPECT_EQ(h.metrics->key_requests->WithLabels({"flood", "over_requests"})->Value(), 1);
  EXPECT_EQ(h.metrics->key_requests->WithLabels({"flood", "over_concurrency"})->Value(), 1);
  EXPECT_EQ(h.metrics->key_requests->WithLabels({"calm", "admitted"})->Value(), 5);
  clock.Advance(std::chrono::milliseconds(500));
  EXPECT_TRUE(h.StartAndWait(as("Bearer flood-key")).ok());

  // Unknown keys are 401; a reload swaps the table at once.
  EXPECT_EQ(api::HttpStatusFor(h.StartAndWait(as("Bearer other")).status()), 401);
  auto reloaded = guard::ApiKeys::Parse("other name=other\n", "keys", &clock);
  ASSERT_TRUE(reloaded.ok());
  ASSERT_TRUE(h.core->SetKeys("", "", *reloaded).ok());
  EXPECT_TRUE(h.StartAndWait(as("Bearer other")).ok());
  EXPECT_EQ(api::HttpStatusFor(h.StartAndWait(as("Bearer calm-key")).status()), 401);
  EXPECT_EQ(api::HttpStatusFor(h.core->Authorize(guard::Access::kTenant, "Bearer calm-key").status()), 401);
}

TEST(ServiceCore, WithoutKeysNoCredentialIsAsked) {
  Harness h;
  auto who = h.core->Authorize(guard::Access::kTenant, "");
  ASSERT_TRUE(who.ok());
  EXPECT_EQ(*who, nullptr);
  auto call = h.StartAndWait(h.Info());
  ASSERT_TRUE(call.ok());
  EXPECT_EQ((*call)->tenant(), nullptr);
  EXPECT_TRUE(h.core->ChargePairs(**call, 1000000).ok());
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

// Every refusal the core makes, mapped by the one table to HTTP and gRPC.
TEST(ServiceCore, RefusalsMapToOneHttpAndGrpcAnswer) {
  ServiceCoreOptions o;
  o.api_key = "k";
  o.max_inflight_bytes = 100;
  o.request_memory_factor = 1;
  o.request_memory_fixed_bytes = 0;
  Harness h(o);
  CallInfo info = h.Info(10);
  info.authorization = "Bearer k";
  struct Case {
    const char* what;
    absl::Status status;
    int http;
    int grpc;
  };
  CallInfo unknown = info;
  unknown.model = "m";
  CallInfo huge = info;
  huge.body_bytes = 1000;
  CallInfo unauthenticated = info;
  unauthenticated.authorization = "";
  std::vector<Case> cases = {
      {"unauthenticated", h.StartAndWait(unauthenticated).status(), 401, 16},
      {"unknown model", h.StartAndWait(unknown).status(), 404, 5},
      {"too large", h.StartAndWait(huge).status(), 413, 8},
  };
  h.core->SetDraining(true);
  cases.push_back({"draining", h.StartAndWait(info).status(), 503, 14});
  for (const Case& c : cases) {
    EXPECT_EQ(api::HttpStatusFor(c.status), c.http) << c.what << ": " << c.status;
    EXPECT_EQ(api::GrpcStatusFor(c.status), c.grpc) << c.what << ": " << c.status;
  }
}

}  // namespace
}  // namespace tide::serving
