// Black-box tests of dynamic batching, queue policy and deadlines in `tide serve`.
// One server, three copies of the exported tiny-bert that differ only in config.pbtxt:
//   batched    max_batch_size 16, dynamic_batching { max_queue_delay 200 ms }
//   unbatched  max_batch_size 1, no dynamic_batching: every row runs alone
//   limited    dynamic_batching with default_queue_policy { max_queue_size: 2 } and a long delay,
//              so a burst overflows the queue
//   saturated  as batched, with batch_saturation_tokens 1: every row is past the saturation, so
//              every row runs alone however many wait (the batcher's cap, wired from config.pbtxt)
//   longest    as batched, with batch_padding longest: a batch is padded to its longest row
//              rounded up to 16, not to its bucket
// "batched" has no batch_saturation_tokens: its cap is derived at load from the graph's weight
// FLOPs per token (the loader -> served model -> batcher wiring), which the load log line shows.
// Requests go to /v1/rerank, which routes on its "model" field. Each request carries ONE document,
// so a batch of more than one row can only come from several requests.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <latch>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "blackbox_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http_client.h"

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;
using tide::testing::ClientResponse;
using tide::testing::HttpClient;

class ServeBatchingTest : public SharedServerSuite<ServeBatchingTest> {
 protected:
  static void SetUpTestSuite() {
    // info: the load log line carries each model's batcher options.
    StartSharedServer(AddModels, {"--io-threads", "4", "--max-batch-tokens", "2048", "--log-level", "info"});
  }

  static absl::Status AddModels(const fs::path& repository) {
    const std::string common =
        "backend: \"onnxruntime\"\n"
        "parameters { key: \"max_sequence_length\" value { string_value: \"64\" } }\n";
    absl::Status s = AddTinyBert(repository, "batched",
                                 common + "max_batch_size: 16\n"
                                          "dynamic_batching { max_queue_delay_microseconds: 200000 }\n");
    if (s.ok()) s = AddTinyBert(repository, "unbatched", common + "max_batch_size: 1\n");
    if (s.ok()) {
      s = AddTinyBert(repository, "limited",
                      common + "max_batch_size: 16\n"
                               "dynamic_batching {\n"
                               "  max_queue_delay_microseconds: 500000\n"
                               "  default_queue_policy { max_queue_size: 2 }\n"
                               "}\n");
    }
    if (s.ok()) {
      s = AddTinyBert(repository, "longest",
                      common + "max_batch_size: 16\n"
                               "dynamic_batching { max_queue_delay_microseconds: 2000 }\n"
                               "parameters { key: \"batch_padding\" value { string_value: \"longest\" } }\n");
    }
    if (s.ok()) {
      s = AddTinyBert(repository, "saturated",
                      common + "max_batch_size: 16\n"
                               "dynamic_batching { max_queue_delay_microseconds: 200000 }\n"
                               "parameters { key: \"batch_saturation_tokens\" value { string_value: \"1\" } }\n");
    }
    return s;
  }

  static json RerankBody(const std::string& model, const std::string& query, const std::vector<std::string>& docs) {
    return {{"model", model}, {"query", query}, {"documents", docs}};
  }

  // The one document's score of a successful single-document /v1/rerank response.
  static double OnlyScore(const ClientResponse& r) {
    EXPECT_EQ(r.status, 200) << r.error << r.body;
    const json j = ParseJson(r.body);
    if (!j.is_object() || !j.contains("results") || j["results"].size() != 1) {
      ADD_FAILURE() << "unexpected response: " << r.body;
      return NAN;
    }
    return j["results"][0]["relevance_score"].get<double>();
  }

  // Sends `bodies[i]` to /v1/rerank from thread i, all released together; one response each. Then
  // checks that no connection carries anything after its response (a second answer).
  std::vector<ClientResponse> Burst(const std::vector<json>& bodies, const tide::testing::HeaderList& headers = {}) {
    std::vector<ClientResponse> responses(bodies.size());
    std::vector<std::unique_ptr<HttpClient>> clients;
    for (size_t i = 0; i < bodies.size(); ++i) {
      clients.push_back(NewClient());
      EXPECT_TRUE(clients.back()->Connect().ok());  // connect first, so that the requests leave together
    }
    std::latch start(static_cast<std::ptrdiff_t>(bodies.size()));
    std::vector<std::thread> threads;
    for (size_t i = 0; i < bodies.size(); ++i) {
      threads.emplace_back([&, i] {
        const std::string body = bodies[i].dump();
        start.arrive_and_wait();
        responses[i] = clients[i]->Post("/v1/rerank", body, headers);
      });
    }
    for (std::thread& t : threads) t.join();
    for (size_t i = 0; i < clients.size(); ++i) {
      if (!clients[i]->connected()) continue;
      const tide::testing::RawReadResult extra = clients[i]->ReadUntilClosed(std::chrono::milliseconds(50));
      EXPECT_TRUE(extra.bytes.empty()) << "request " << i << " got more than one response: " << extra.bytes;
    }
    return responses;
  }

  // One single-document request per (query, document) pair to `model`, all released together.
  std::vector<ClientResponse> BurstOfPairs(const std::string& model,
                                           const std::vector<std::pair<std::string, std::string>>& pairs) {
    std::vector<json> bodies;
    for (const auto& [q, d] : pairs) bodies.push_back(RerankBody(model, q, {d}));
    return Burst(bodies);
  }

  json Stats(const std::string& model) const {
    const ClientResponse r = NewClient()->Get(absl::StrCat("/v2/models/", model, "/stats"));
    EXPECT_EQ(r.status, 200) << r.body;
    const json j = ParseJson(r.body);
    EXPECT_TRUE(j.is_object() && j.contains("model_stats") && j["model_stats"].size() == 1) << r.body;
    return j.is_object() && j.contains("model_stats") && !j["model_stats"].empty() ? j["model_stats"][0] : json();
  }

  // Distinct (query, document) pairs of different lengths, so that batched rows need padding.
  static std::vector<std::pair<std::string, std::string>> Pairs(size_t n) {
    static const std::vector<std::string> kWords = {"panda", "bear",   "bamboo", "forest", "china", "giant",
                                                    "eats",  "sleeps", "black",  "white",  "river", "mountain"};
    std::vector<std::pair<std::string, std::string>> pairs;
    for (size_t i = 0; i < n; ++i) {
      std::vector<std::string> doc;
      for (size_t k = 0; k < 2 + (i * 5) % 17; ++k) doc.push_back(kWords[(i + 3 * k) % kWords.size()]);
      pairs.emplace_back(absl::StrCat("where does the ", kWords[i % kWords.size()], " live"), absl::StrJoin(doc, " "));
    }
    return pairs;
  }
};

// Concurrent single-document requests share batches, and each gets exactly its own score: the
// score of the same request run alone on a model that never batches.
TEST_F(ServeBatchingTest, ConcurrentRequestsAreBatchedAndKeepTheirOwnScores) {
  constexpr size_t kRequests = 12;
  const auto pairs = Pairs(kRequests);
  const json before = Stats("batched");
  const std::vector<ClientResponse> batched = BurstOfPairs("batched", pairs);

  for (size_t i = 0; i < kRequests; ++i) {
    SCOPED_TRACE(absl::StrCat("request ", i));
    ASSERT_EQ(batched[i].status, 200) << batched[i].error << batched[i].body;
    for (const char* h : {"x-tokenization-time", "x-queue-time", "x-inference-time", "x-total-time"}) {
      const std::string value(batched[i].header(h));
      EXPECT_FALSE(value.empty()) << h << " missing";
      EXPECT_TRUE(!value.empty() && std::all_of(value.begin(), value.end(), ::isdigit)) << h << ": " << value;
    }
  }

  const json after = Stats("batched");
  ASSERT_TRUE(after.is_object());
  const uint64_t inferences = after["inference_count"].get<uint64_t>() - before["inference_count"].get<uint64_t>();
  const uint64_t executions = after["execution_count"].get<uint64_t>() - before["execution_count"].get<uint64_t>();
  EXPECT_EQ(inferences, kRequests) << after;
  EXPECT_LT(executions, inferences) << "no two requests shared a batch: " << after;
  uint64_t largest = 0;
  for (const json& b : after["batch_stats"]) {
    if (b["compute_infer"]["count"].get<uint64_t>() > 0) largest = std::max(largest, b["batch_size"].get<uint64_t>());
  }
  EXPECT_GT(largest, 1u) << after;

  // The same requests, one at a time, on the model that runs every row alone.
  auto client = NewClient();
  std::set<double> distinct;
  for (size_t i = 0; i < kRequests; ++i) {
    SCOPED_TRACE(absl::StrCat("request ", i));
    const double alone = OnlyScore(client->Post("/v1/rerank", RerankBody("unbatched", pairs[i].first,
                                                                         {pairs[i].second}).dump()));
    EXPECT_NEAR(OnlyScore(batched[i]), alone, 1e-5);
    distinct.insert(alone);
  }
  // Distinct requests score differently, so a mix-up between requests could not go unseen.
  EXPECT_GT(distinct.size(), kRequests / 2);
  const json unbatched = Stats("unbatched");
  for (const json& b : unbatched["batch_stats"]) EXPECT_EQ(b["batch_size"], 1) << unbatched;
}

// The batch saturation reaches the batcher: on "saturated" (batch_saturation_tokens 1) the burst
// that "batched" runs in shared batches runs one row per batch, each with its own score; the load
// log shows that setting, and for "batched" a cap derived from its graph (never 0: 0 would mean the
// loader passed no weight FLOPs and the cap is off).
TEST_F(ServeBatchingTest, BatchSaturationTokensRunEveryRowAloneAndTheDefaultComesFromTheGraph) {
  constexpr size_t kRequests = 12;
  const auto pairs = Pairs(kRequests);
  const json before = Stats("saturated");
  const std::vector<ClientResponse> saturated = BurstOfPairs("saturated", pairs);
  const json after = Stats("saturated");
  ASSERT_TRUE(after.is_object());
  EXPECT_EQ(after["inference_count"].get<uint64_t>() - before["inference_count"].get<uint64_t>(), kRequests) << after;
  EXPECT_EQ(after["execution_count"].get<uint64_t>() - before["execution_count"].get<uint64_t>(), kRequests) << after;
  for (const json& b : after["batch_stats"]) EXPECT_EQ(b["batch_size"], 1) << after;
  auto client = NewClient();
  for (size_t i = 0; i < kRequests; ++i) {
    SCOPED_TRACE(absl::StrCat("request ", i));
    const double alone = OnlyScore(client->Post("/v1/rerank", RerankBody("unbatched", pairs[i].first,
                                                                         {pairs[i].second}).dump()));
    EXPECT_NEAR(OnlyScore(saturated[i]), alone, 1e-5);
  }

  // "model NAME version 1: ... batch_saturation_tokens N, ..." once per model.
  auto logged_cap = [](const std::string& log, const std::string& model) -> int64_t {
    const std::string head = absl::StrCat("model ", model, " version 1: ");
    for (const absl::string_view line : absl::StrSplit(log, '\n')) {
      const size_t at = line.find(head);
      const size_t key = line.find("batch_saturation_tokens ");
      if (at == absl::string_view::npos || key == absl::string_view::npos) continue;
      return std::strtoll(std::string(line.substr(key + 24)).c_str(), nullptr, 10);
    }
    return -1;
  };
  const std::string log = server().Stderr() + server().Stdout();
  EXPECT_EQ(logged_cap(log, "saturated"), 1) << log;
  // tiny-bert's weights are a few kFLOP per token: 68 GFLOP of them is far past the token ceiling,
  // so the ceiling binds (0 here would mean the loader passed no weight FLOPs and the cap is off).
  EXPECT_EQ(logged_cap(log, "batched"), 400) << log;
}

// batch_padding reaches the batcher: one request of 33..48 tokens runs padded to its bucket (64)
// on "batched" and to its length rounded up to 16 (48) on "longest", with the same score.
TEST_F(ServeBatchingTest, BatchPaddingLongestPadsARowToSixteenNotToItsBucket) {
  auto client = NewClient();
  // A document that makes the pair 40 tokens or a little more (the tokenizer says how long).
  const std::string query = "a town by the river";
  std::string document;
  for (std::vector<std::string> words; words.size() < 64;) {
    words.push_back(words.size() % 2 ? "river" : "town");
    document = absl::StrJoin(words, " ");
    const ClientResponse t = client->Post(
        "/tokenize", json{{"model", "longest"}, {"inputs", json::array({json::array({query, document})})}}.dump());
    ASSERT_EQ(t.status, 200) << t.body;
    if (ParseJson(t.body)[0].size() >= 40) break;
  }
  auto tokens = [&](const std::string& model) {
    const ClientResponse m = client->Get("/metrics");
    EXPECT_EQ(m.status, 200);
    const std::vector<std::string> labels = {absl::StrCat("model=\"", model, "\"")};
    return std::pair{MetricSum(m.body, "tide_batch_real_tokens_total", labels),
                     MetricSum(m.body, "tide_batch_padded_tokens_total", labels)};
  };
  std::map<std::string, std::pair<double, double>> run;  // model -> (real, padded) of the request
  std::map<std::string, double> score;
  for (const std::string model : {"batched", "longest"}) {
    const auto before = tokens(model);
    score[model] = OnlyScore(client->Post("/v1/rerank", RerankBody(model, query, {document}).dump()));
    const auto after = tokens(model);
    run[model] = {after.first - before.first, after.second - before.second};
  }
  const double real = run["batched"].first;
  ASSERT_GE(real, 33) << "the request must fall between two alignment steps below its bucket";
  ASSERT_LE(real, 48);
  EXPECT_EQ(run["longest"].first, real);
  EXPECT_EQ(run["batched"].second, 64) << "the bucket of a 33..64-token row";
  EXPECT_EQ(run["longest"].second, 48);
  EXPECT_NEAR(score["longest"], score["batched"], 1e-5);
}

// A burst over max_queue_size: some requests are refused with 503 + Retry-After + a JSON error,
// the others succeed, and every request gets exactly one answer.
TEST_F(ServeBatchingTest, QueueOverflowAnswers503WithRetryAfter) {
  constexpr size_t kRequests = 12;
  std::vector<json> bodies;
  for (const auto& [q, d] : Pairs(kRequests)) bodies.push_back(RerankBody("limited", q, {d}));
  const std::vector<ClientResponse> responses = Burst(bodies);
  size_t ok = 0, unavailable = 0;
  for (size_t i = 0; i < responses.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("request ", i));
    const ClientResponse& r = responses[i];
    if (r.status == 200) {
      ++ok;
      OnlyScore(r);
    } else if (r.status == 503) {
      ++unavailable;
      EXPECT_FALSE(r.header("Retry-After").empty());
      const json j = ParseJson(r.body);
      ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
      EXPECT_THAT(j["error"].get<std::string>(), HasSubstr("queue"));
    } else {
      ADD_FAILURE() << "status " << r.status << " " << r.error << " " << r.body;
    }
  }
  EXPECT_EQ(ok + unavailable, kRequests);
  EXPECT_GE(ok, 1u);
  EXPECT_GE(unavailable, 1u);

  // Rejections are counted, and the model still serves once the burst is over.
  auto client = NewClient();
  const auto pair = Pairs(1)[0];
  OnlyScore(client->Post("/v1/rerank", RerankBody("limited", pair.first, {pair.second}).dump()));
  const ClientResponse metrics = client->Get("/metrics");
  EXPECT_THAT(metrics.body, HasSubstr(R"(tide_requests_total{model="limited",version="1",endpoint="v1_rerank",status="503",protocol="http"})"));
}

// max_queue_size bounds queued rows, but a request's rows are admitted together and an empty
// queue takes any request: one larger than max_queue_size is served, not refused forever.
TEST_F(ServeBatchingTest, RequestWithMoreRowsThanMaxQueueSizeIsServedWhenIdle) {
  auto client = NewClient();
  const ClientResponse r =
      client->Post("/v1/rerank", RerankBody("limited", "panda", {"bear", "bamboo", "china"}).dump());
  EXPECT_EQ(r.status, 200) << r.body;
}

// A 1 ms deadline on a large request under load: 504 or success, never a hang; the server keeps
// serving afterwards.
TEST_F(ServeBatchingTest, TinyTimeoutUnderLoadAnswersPromptly) {
  std::vector<std::string> docs;
  for (const auto& [q, d] : Pairs(48)) docs.push_back(q + " " + d);
  std::vector<json> bodies;
  for (int i = 0; i < 4; ++i) bodies.push_back(RerankBody("batched", "panda", docs));
  std::atomic<bool> load_done{false};
  std::thread load([&] {
    const auto responses = Burst(bodies);
    for (const ClientResponse& r : responses) EXPECT_EQ(r.status, 200) << r.error << r.body;
    load_done = true;
  });
  auto client = NewClient();
  for (int attempt = 0; attempt < 3; ++attempt) {
    const ClientResponse r = client->Post("/v1/rerank", RerankBody("batched", "panda", docs).dump(),
                                          {{"x-timeout-ms", "1"}});
    ASSERT_NE(r.status, 0) << "no response: " << r.error;
    RecordProperty(absl::StrCat("timeout_attempt_", attempt), r.status);
    if (r.status == 504) {
      const json j = ParseJson(r.body);
      ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
      EXPECT_EQ(j["error_type"], "timeout") << r.body;
    } else {
      EXPECT_EQ(r.status, 200) << r.body;
    }
  }
  load.join();
  EXPECT_TRUE(load_done);
  const ClientResponse bad = client->Post("/v1/rerank", RerankBody("batched", "panda", {"bear"}).dump(),
                                          {{"x-timeout-ms", "soon"}});
  EXPECT_EQ(bad.status, 400) << bad.body;
  const auto pair = Pairs(1)[0];
  OnlyScore(client->Post("/v1/rerank", RerankBody("batched", pair.first, {pair.second}).dump()));
}

TEST_F(ServeBatchingTest, MetricsShowBatchSizesAndQueueGauges) {
  auto client = NewClient();
  const auto pair = Pairs(1)[0];
  OnlyScore(client->Post("/v1/rerank", RerankBody("batched", pair.first, {pair.second}).dump()));
  const ClientResponse m = client->Get("/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_THAT(m.body, HasSubstr("# TYPE tide_batch_size histogram"));
  EXPECT_THAT(m.body, HasSubstr(R"(tide_batch_size_bucket{model="batched",version="1",le="1"})"));
  EXPECT_THAT(m.body, HasSubstr(R"(tide_batch_size_count{model="batched",version="1"})"));
  EXPECT_THAT(m.body, HasSubstr("# TYPE tide_queue_tasks gauge"));
  EXPECT_THAT(m.body, HasSubstr(R"(tide_queue_tasks{model="batched",version="1"} 0)"));
  double batches = -1;
  for (const std::string& line : std::vector<std::string>(absl::StrSplit(m.body, '\n'))) {
    const std::string_view prefix = R"(tide_batch_size_count{model="batched",version="1"} )";
    if (line.substr(0, prefix.size()) == prefix) batches = std::stod(std::string(line.substr(prefix.size())));
  }
  EXPECT_GE(batches, 1) << m.body;
}

}  // namespace
}  // namespace tide::blackbox
