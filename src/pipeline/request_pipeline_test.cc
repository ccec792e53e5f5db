// RequestPipeline over a ServiceCore with fake backends (serving/testing/fake_backend.h): the
// domain answers both edges render, with their outcomes.
#include "pipeline/request_pipeline.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "api/status_http.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "serving/testing/fake_backend.h"

namespace tide::pipeline {
namespace {

using serving::testing::BackendControl;
using serving::testing::kHang;
using serving::testing::Served;

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// A core over its own manager and metrics, one tokenization worker, and a pipeline over it.
struct Harness {
  Harness() {
    auto m = serving::ServingMetrics::Create();
    EXPECT_TRUE(m.ok());
    metrics = *std::move(m);
    models = serving::ModelManager::Create(metrics.get());
    serving::ServiceCoreOptions options;
    options.tokenization_workers = 1;
    auto c = serving::ServiceCore::Create(models.get(), metrics.get(), options);
    EXPECT_TRUE(c.ok()) << c.status();
    core = *std::move(c);
    PipelineOptions po;
    po.limits.max_documents = 7;
    po.version = "9.9.9";
    pipeline = std::make_unique<RequestPipeline>(core.get(), CompletionRecorder(metrics.get(), nullptr), po);
  }
  ~Harness() {
    pipeline.reset();
    core.reset();
    models.reset();
  }
  serving::CallPtr Admit() {
    serving::CallInfo info;
    info.body_bytes = 100;
    info.received_at = std::chrono::steady_clock::now();
    info.client_gone = std::make_shared<CancellationFlag>();
    absl::StatusOr<serving::CallPtr> out = absl::UnknownError("no answer");
    absl::Notification done;
    core->Start(info, [&](absl::StatusOr<serving::CallPtr> call) {
      out = std::move(call);
      done.Notify();
    });
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(kHang));
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : nullptr;
  }
  template <typename Answer, typename Run>
  Answer Wait(Run run) {
    Answer answer;
    absl::Notification done;
    run([&](Answer a) {
      answer = std::move(a);
      done.Notify();
    });
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(kHang));
    return answer;
  }

  std::unique_ptr<serving::ServingMetrics> metrics;
  std::unique_ptr<serving::ModelManager> models;
  std::unique_ptr<serving::ServiceCore> core;
  std::unique_ptr<RequestPipeline> pipeline;
};

TEST(RequestPipeline, RerankAnswersScoresWithTheVersionAndTimings) {
  Harness h;
  auto c = std::make_shared<BackendControl>();
  c->value = 0.5f;
  ASSERT_TRUE(h.models->Add(Served({.name = "m", .version = 4}, c)).ok());
  auto call = h.Admit();
  auto request = std::make_shared<api::RerankRequest>();
  request->query = "a";
  request->texts = {"b", "c d"};
  RerankAnswer a = h.Wait<RerankAnswer>([&](auto done) { h.pipeline->Rerank(call, request, std::move(done)); });
  ASSERT_TRUE(a.outcome.status.ok()) << a.outcome.status;
  EXPECT_EQ(a.outcome.model, "m");
  EXPECT_EQ(a.outcome.version, 4);
  EXPECT_EQ(a.outcome.fallback, nullptr);
  EXPECT_FALSE(a.outcome.degraded());
  EXPECT_FALSE(a.outcome.cache_on);
  ASSERT_TRUE(a.outcome.timings.has_value());
  ASSERT_EQ(a.scores.size(), 2u);
  EXPECT_FLOAT_EQ(a.scores[0], Sigmoid(0.5f));
  EXPECT_GT(a.real_tokens, 0u);
  // Without the cache the cache attempt never answers (Rerank does).
  EXPECT_FALSE(h.pipeline->RerankFromCache(call, *request).has_value());
}

TEST(RequestPipeline, AnUnknownModelIsNotFoundWithoutAModelAndABadOutputNamesTheModel) {
  Harness h;
  ASSERT_TRUE(h.models->Add(Served({.name = "m"}, std::make_shared<BackendControl>())).ok());
  auto call = h.Admit();
  auto cohere = std::make_shared<api::CohereRerankRequest>();
  cohere->model = "nope";
  cohere->query = "a";
  cohere->documents = {"b"};
  RerankAnswer r = h.Wait<RerankAnswer>([&](auto done) { h.pipeline->CohereRerank(call, cohere, std::move(done)); });
  EXPECT_EQ(api::HttpStatusFor(r.outcome.status), 404);
  EXPECT_TRUE(r.outcome.model.empty());
  EXPECT_FALSE(r.outcome.version.has_value());

  InferAnswer i = h.Wait<InferAnswer>([&](auto done) {
    h.pipeline->Infer(
        call, "m", "",
        [](const api::RequestLimits&) -> absl::StatusOr<api::InferRequest> {
          api::InferRequest req;
          req.outputs.push_back(api::InferRequestedOutput{.name = "probabilities"});
          return req;
        },
        std::move(done));
  });
  EXPECT_EQ(api::HttpStatusFor(i.outcome.status), 422);
  EXPECT_NE(i.outcome.status.message().find("unknown output 'probabilities'"), std::string::npos);
  EXPECT_EQ(i.outcome.model, "m");
  EXPECT_EQ(i.outcome.version, 1);
}

// Text inputs of one (query, document) row.
api::InferRequest TextRow(const std::string& output, std::optional<int64_t> classification) {
  api::InferRequest req;
  req.id = "r7";
  for (const char* name : {"text", "text_pair"}) {
    api::Tensor t;
    t.name = name;
    t.datatype = api::DataType::kBytes;
    t.shape = {1};
    t.data = std::vector<std::string>{name == std::string("text") ? "a" : "b c"};
    req.inputs.push_back(std::move(t));
  }
  api::InferRequestedOutput out;
  out.name = output;
  if (classification.has_value()) out.parameters["classification"] = *classification;
  req.outputs.push_back(std::move(out));
  return req;
}

TEST(RequestPipeline, InferDecodesUnderTheModelsLimitsAndAppliesClassification) {
  Harness h;
  auto c = std::make_shared<BackendControl>();
  c->value = 2.0f;
  ASSERT_TRUE(h.models->Add(Served({.name = "m", .version = 2}, c)).ok());
  auto call = h.Admit();
  const std::string logits = (*h.core->FindModel("m"))->signature().logits_name;
  for (const bool classify : {false, true}) {
    size_t seen_limit = 0;
    InferAnswer a = h.Wait<InferAnswer>([&](auto done) {
      h.pipeline->Infer(
          call, "m", "",
          [&](const api::RequestLimits& limits) -> absl::StatusOr<api::InferRequest> {
            seen_limit = limits.max_batch_tensor_elements;
            return TextRow(logits, classify ? std::optional<int64_t>(1) : std::nullopt);
          },
          std::move(done));
    });
    ASSERT_TRUE(a.outcome.status.ok()) << a.outcome.status;
    // Token tensors: at most max_documents rows of max_sequence_length (16) tokens.
    EXPECT_EQ(seen_limit, 7u * 16u);
    ASSERT_NE(a.request, nullptr);
    EXPECT_EQ(a.response.model_name, "m");
    EXPECT_EQ(a.response.model_version, "2");
    EXPECT_EQ(a.response.id, "r7");
    ASSERT_EQ(a.response.outputs.size(), 1u);
    const api::Tensor& out = a.response.outputs[0];
    EXPECT_EQ(out.name, logits);
    if (classify) {
      // Triton's classification: BYTES [rows, k] of "value:index".
      EXPECT_EQ(out.datatype, api::DataType::kBytes);
      EXPECT_EQ(out.shape, (std::vector<int64_t>{1, 1}));
      const auto& top = std::get<std::vector<std::string>>(out.data);
      ASSERT_EQ(top.size(), 1u);
      EXPECT_EQ(top[0].substr(top[0].find(':')), ":0");
      EXPECT_NEAR(std::stof(top[0]), 2.0f, 1e-4);
    } else {
      EXPECT_EQ(out.datatype, api::DataType::kFp32);
      EXPECT_FLOAT_EQ(std::get<std::vector<float>>(out.data).at(0), 2.0f);
    }
  }
}

TEST(RequestPipeline, TokenizeGivesOffsetsIntoEachTextOfAPair) {
  Harness h;
  ASSERT_TRUE(h.models->Add(Served({.name = "m"}, std::make_shared<BackendControl>())).ok());
  auto call = h.Admit();
  api::TokenizeRequest request;
  request.inputs.push_back({"a  b", std::nullopt});
  request.inputs.push_back({"c", std::string("d e")});
  TokenizeAnswer a = h.pipeline->Tokenize(*call, request);
  ASSERT_TRUE(a.outcome.status.ok()) << a.outcome.status;
  EXPECT_EQ(a.outcome.model, "m");
  ASSERT_EQ(a.tokens.size(), 2u);
  // [CLS] a b [SEP]
  ASSERT_EQ(a.tokens[0].size(), 4u);
  EXPECT_TRUE(a.tokens[0][0].special);
  EXPECT_FALSE(a.tokens[0][0].start.has_value());
  EXPECT_EQ(a.tokens[0][1].text, "a");
  EXPECT_EQ(a.tokens[0][1].start, 0u);
  EXPECT_EQ(a.tokens[0][1].stop, 1u);
  EXPECT_EQ(a.tokens[0][2].text, "b");
  EXPECT_EQ(a.tokens[0][2].start, 3u);
  EXPECT_EQ(a.tokens[0][2].stop, 4u);
  // [CLS] c [SEP] d e [SEP]: the pair's tokens are offsets into the second text.
  ASSERT_EQ(a.tokens[1].size(), 6u);
  EXPECT_EQ(a.tokens[1][1].start, 0u);
  EXPECT_EQ(a.tokens[1][3].text, "d");
  EXPECT_EQ(a.tokens[1][3].start, 0u);
  EXPECT_EQ(a.tokens[1][4].text, "e");
  EXPECT_EQ(a.tokens[1][4].start, 2u);
  EXPECT_EQ(a.tokens[1][4].stop, 3u);

  // Decode turns the ids back into text.
  api::DecodeRequest decode;
  decode.ids.push_back({});
  for (const api::TokenInfo& t : a.tokens[0]) decode.ids[0].push_back(t.id);
  DecodeAnswer d = h.pipeline->Decode(decode);
  ASSERT_TRUE(d.outcome.status.ok()) << d.outcome.status;
  ASSERT_EQ(d.texts.size(), 1u);
  EXPECT_EQ(d.texts[0], "a b");
}

TEST(RequestPipeline, PredictRefusesAnOverLongInputWithoutTruncateNamingIt) {
  Harness h;
  auto c = std::make_shared<BackendControl>();
  c->value = -1.0f;
  ASSERT_TRUE(h.models->Add(Served({.name = "m", .max_sequence_length = 4}, c)).ok());
  auto call = h.Admit();
  auto request = std::make_shared<api::PredictRequest>();
  request->inputs.push_back({"a", std::nullopt});
  request->inputs.push_back({"a b c d e f", std::nullopt});
  PredictAnswer ok = h.Wait<PredictAnswer>([&](auto done) { h.pipeline->Predict(call, request, std::move(done)); });
  ASSERT_TRUE(ok.outcome.status.ok()) << ok.outcome.status;
  EXPECT_EQ(ok.num_labels, 1);
  ASSERT_EQ(ok.logits.size(), 2u);
  EXPECT_FLOAT_EQ(ok.logits[0], -1.0f);
  EXPECT_EQ(ok.labels.size(), 1u);
  EXPECT_EQ(ok.tokens, 3u + 4u);  // [CLS] a [SEP], and the second cut to 4

  request->truncate = false;
  PredictAnswer refused =
      h.Wait<PredictAnswer>([&](auto done) { h.pipeline->Predict(call, request, std::move(done)); });
  EXPECT_EQ(api::HttpStatusFor(refused.outcome.status), 422);
  EXPECT_NE(refused.outcome.status.message().find("inputs[1] has "), std::string::npos)
      << refused.outcome.status;
  EXPECT_NE(refused.outcome.status.message().find("the model's limit is 4"), std::string::npos)
      << refused.outcome.status;
  EXPECT_EQ(refused.outcome.model, "m");
}

TEST(RequestPipeline, InfoDescribesTheDefaultModelOnce) {
  Harness h;
  InfoAnswer none = h.pipeline->Info();
  EXPECT_EQ(api::HttpStatusFor(none.outcome.status), 404);
  ASSERT_TRUE(h.models->Add(Served({.name = "m", .version = 5}, std::make_shared<BackendControl>())).ok());
  InfoAnswer a = h.pipeline->Info();
  ASSERT_TRUE(a.outcome.status.ok()) << a.outcome.status;
  EXPECT_EQ(a.outcome.version, 5);
  EXPECT_EQ(a.info.model_id, "m");
  EXPECT_FALSE(a.info.classifier);
  EXPECT_EQ(a.info.max_input_length, 16);
  EXPECT_EQ(a.info.max_client_batch_size, 7);
  EXPECT_EQ(a.info.tokenization_workers, 1);
  EXPECT_EQ(a.info.version, "9.9.9");
  EXPECT_FALSE(h.pipeline->DefaultIsClassifier());
  auto model = h.pipeline->Model("m", "5");
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(h.pipeline->Metadata(**model).name, "m");
  EXPECT_EQ(h.pipeline->AllModels().size(), 1u);
  EXPECT_NE(h.pipeline->MetricsText().find("# TYPE tide_"), std::string::npos);
}

}  // namespace
}  // namespace tide::pipeline
