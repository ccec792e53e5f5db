// Black-box tests of the go-live guards of `tide serve`: API key, concurrency limit
// (429 at once), and the circuit breaker's BM25 fallback (degraded answers) — against the real
// binary over HTTP. One server:
//   --api-key secret --max-concurrent-requests 2
//   slow     tiny-bert, max_queue_delay 300 ms (holds its permit long enough to fill the limit)
//   guarded  tiny-bert with default_queue_policy { max_queue_size: 2 } and
//            breaker_queue_fullness 0.5: a 3-document request fills the queue past half, so the
//            breaker opens and the next requests are answered by BM25 for 60 s.
//   verdict, verdict-503
//            the same breaker on tiny-bert configured as a classifier (task "classify"): with
//            breaker_default_result "[-1.5]" it answers that logit while open; without, 503.
//            (Named after "guarded" and "slow": TEI's /rerank serves the first model by name.)
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "blackbox_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http_client.h"

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;
using tide::testing::ClientResponse;
using tide::testing::HeaderList;
using tide::testing::HttpClient;

const HeaderList kAuth = {{"Authorization", "Bearer secret"}};

class ServeGuardTest : public SharedServerSuite<ServeGuardTest> {
 protected:
  static void SetUpTestSuite() {
    StartSharedServer(AddModels, {"--io-threads", "4", "--api-key", "secret", "--max-concurrent-requests", "2",
                                  "--log-level", "warn"});
  }
  static absl::Status AddModels(const fs::path& repository) {
    const std::string common =
        "backend: \"onnxruntime\"\nmax_batch_size: 16\n"
        "parameters { key: \"max_sequence_length\" value { string_value: \"64\" } }\n";
    absl::Status s =
        AddTinyBert(repository, "slow", common + "dynamic_batching { max_queue_delay_microseconds: 300000 }\n");
    if (s.ok()) {
      s = AddTinyBert(repository, "guarded",
                      common +
                          "dynamic_batching { max_queue_delay_microseconds: 1000\n"
                          "  default_queue_policy { max_queue_size: 2 } }\n"
                          "parameters { key: \"breaker_queue_fullness\" value { string_value: \"0.5\" } }\n"
                          "parameters { key: \"breaker_open_s\" value { string_value: \"60\" } }\n");
    }
    const std::string classifier =
        common +
        "dynamic_batching { max_queue_delay_microseconds: 1000\n"
        "  default_queue_policy { max_queue_size: 2 } }\n"
        "parameters { key: \"task\" value { string_value: \"classify\" } }\n"
        "parameters { key: \"breaker_queue_fullness\" value { string_value: \"0.5\" } }\n"
        "parameters { key: \"breaker_open_s\" value { string_value: \"60\" } }\n";
    if (s.ok()) {
      s = AddTinyBert(
          repository, "verdict",
          classifier + "parameters { key: \"breaker_default_result\" value { string_value: \"[-1.5]\" } }\n");
    }
    if (s.ok()) s = AddTinyBert(repository, "verdict-503", classifier);
    return s;
  }
  static std::string Body(const std::string& model, const std::string& query, const std::vector<std::string>& docs) {
    return json{{"model", model}, {"query", query}, {"documents", docs}}.dump();
  }
};

TEST_F(ServeGuardTest, InferenceEndpointsNeedTheApiKeyHealthDoesNot) {
  auto client = NewClient();
  const std::string body = Body("slow", "panda", {"bear"});
  const ClientResponse none = client->Post("/v1/rerank", body);
  EXPECT_EQ(none.status, 401) << none.body;
  EXPECT_EQ(none.header("www-authenticate"), "Bearer");
  EXPECT_THAT(none.body, HasSubstr("API key"));
  EXPECT_EQ(client->Post("/v1/rerank", body, {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(client->Post("/v1/rerank", body, {{"Authorization", "secret"}}).status, 401);
  EXPECT_EQ(client->Post("/v1/rerank", body, kAuth).status, 200);
  EXPECT_EQ(client->Post("/v2/models/slow/infer", R"({"inputs": []})").status, 401);
  EXPECT_EQ(client->Post("/tokenize", R"({"inputs": "x"})").status, 401);
  EXPECT_EQ(client->Get("/v2/health/ready").status, 200);
  EXPECT_EQ(client->Get("/v2/health/live").status, 200);
  EXPECT_EQ(client->Get("/metrics").status, 200);
  // The dashboard holds no data and polls /metrics: open without the key, like /metrics.
  const ClientResponse dashboard = client->Get("/dashboard");
  EXPECT_EQ(dashboard.status, 200);
  EXPECT_EQ(dashboard.header("content-type"), "text/html; charset=utf-8");
}

TEST_F(ServeGuardTest, RequestsBeyondTheConcurrencyLimitGet429AtOnce) {
  constexpr int kClients = 8;
  std::vector<std::unique_ptr<HttpClient>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(NewClient());
    ASSERT_TRUE(clients.back()->Connect().ok());
  }
  auto rows_run = [&] {
    const json stats = json::parse(NewClient()->Get("/v2/models/slow/stats", kAuth).body, nullptr, false);
    return stats.is_object() ? stats["model_stats"][0]["inference_count"].get<int64_t>() : int64_t{-1};
  };
  const int64_t rows_before = rows_run();
  const std::vector<std::string> shed_label = {R"(reason="max_concurrent_requests")"};
  const double shed_before = MetricSum(NewClient()->Get("/metrics").body, "tide_shed_requests_total", shed_label);
  std::vector<ClientResponse> responses(kClients);
  std::latch start(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      responses[i] = clients[i]->Post("/v1/rerank", Body("slow", "panda", {"bear"}), kAuth);
    });
  }
  for (auto& t : threads) t.join();
  int ok = 0, shed = 0;
  for (int i = 0; i < kClients; ++i) {
    const ClientResponse& r = responses[i];
    ASSERT_TRUE(r.status == 200 || r.status == 429) << r.status << " " << r.error << " " << r.body;
    if (r.status == 200) ++ok;
    if (r.status == 429) {
      ++shed;
      EXPECT_EQ(r.header("retry-after"), "1");
      EXPECT_THAT(r.body, HasSubstr("max_concurrent_requests=2"));
    }
  }
  EXPECT_GE(ok, 1);
  EXPECT_GE(shed, 1) << "8 simultaneous requests against a limit of 2 were all admitted";
  EXPECT_LE(ok, kClients - 1);
  // Shed before any work: the limiter counted each shed request, and the model ran exactly the
  // admitted requests' rows (one each). How fast a shed answer comes is bench/overload's claim.
  EXPECT_EQ(MetricSum(NewClient()->Get("/metrics").body, "tide_shed_requests_total", shed_label) - shed_before, shed);
  EXPECT_EQ(rows_run() - rows_before, ok);
}

TEST_F(ServeGuardTest, OpenBreakerAnswersWithBm25MarkedDegraded) {
  auto client = NewClient();
  // Three rows into a queue of two: served (an empty queue takes any request), but the observed
  // fullness (1.5 >= 0.5) opens the breaker.
  const ClientResponse first =
      client->Post("/v1/rerank", Body("guarded", "giant panda", {"a", "b", "c"}), kAuth);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.header("x-tide-degraded"), "");

  const ClientResponse degraded = client->Post(
      "/v1/rerank",
      Body("guarded", "giant panda", {"the weather is mild", "a giant panda eats bamboo", "pandas are bears"}), kAuth);
  ASSERT_EQ(degraded.status, 200) << degraded.body;
  EXPECT_EQ(degraded.header("x-tide-degraded"), "bm25");
  const json j = ParseJson(degraded.body);
  ASSERT_TRUE(j.is_object()) << degraded.body;
  EXPECT_EQ(j["degraded"], true);
  ASSERT_EQ(j["results"].size(), 3u);
  EXPECT_EQ(j["results"][0]["index"], 1) << "BM25 ranks the document sharing both query words first";
  EXPECT_EQ(j["results"][2]["relevance_score"], 0.0) << "no shared word: BM25 score 0";

  // TEI's /rerank answers with the first model by name ("guarded"): every item is marked.
  const ClientResponse tei = client->Post(
      "/rerank", json{{"query", "giant panda"}, {"texts", {"giant panda", "weather"}}}.dump(), kAuth);
  ASSERT_EQ(tei.status, 200) << tei.body;
  EXPECT_EQ(tei.header("x-tide-degraded"), "bm25");
  for (const json& item : ParseJson(tei.body)) EXPECT_EQ(item["degraded"], true) << tei.body;

  // Tensors have no lightweight fallback: 503 with Retry-After while open.
  const ClientResponse infer = client->Post(
      "/v2/models/guarded/infer",
      R"({"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": ["panda"]}]})", kAuth);
  EXPECT_EQ(infer.status, 503) << infer.body;
  EXPECT_EQ(infer.header("retry-after"), "1");

  const std::string metrics = client->Get("/metrics").body;
  EXPECT_THAT(metrics, HasSubstr(R"(tide_breaker_state{model="guarded",version="1"} 1)"));
  EXPECT_THAT(metrics, HasSubstr(R"(tide_breaker_transitions_total{model="guarded",version="1",to="open"} 1)"));
  EXPECT_THAT(metrics, HasSubstr(R"(tide_degraded_responses_total{model="guarded",version="1",fallback="bm25"} 2)"));
}

// A classifier's breaker opens the same way; while open it answers its breaker_default_result
// (the logits row, for every input) marked degraded on every endpoint, or 503 when it has none.
TEST_F(ServeGuardTest, OpenBreakerOfAClassifierAnswersItsDefaultResultOr503) {
  auto client = NewClient();
  for (const char* model : {"verdict", "verdict-503"}) {
    const ClientResponse first = client->Post("/v1/rerank", Body(model, "panda", {"a", "b", "c"}), kAuth);
    ASSERT_EQ(first.status, 200) << model << ": " << first.body;
    EXPECT_EQ(first.header("x-tide-degraded"), "") << model;
  }
  const std::string infer_body =
      R"({"id": "q1", "inputs": [{"name": "text", "shape": [2], "datatype": "BYTES", "data": ["panda", "bear"]}]})";

  const ClientResponse rerank = client->Post("/v1/rerank", Body("verdict", "panda", {"bears", "cities"}), kAuth);
  ASSERT_EQ(rerank.status, 200) << rerank.body;
  EXPECT_EQ(rerank.header("x-tide-degraded"), "default");
  json j = ParseJson(rerank.body);
  ASSERT_TRUE(j.is_object() && j.contains("results")) << rerank.body;
  EXPECT_EQ(j["degraded"], true);
  ASSERT_EQ(j["results"].size(), 2u);
  for (const json& item : j["results"]) {
    EXPECT_NEAR(item["relevance_score"].get<double>(), Sigmoid(-1.5), 1e-6) << "the default logit, as a score";
  }

  const ClientResponse infer = client->Post("/v2/models/verdict/infer", infer_body, kAuth);
  ASSERT_EQ(infer.status, 200) << infer.body;
  EXPECT_EQ(infer.header("x-tide-degraded"), "default");
  json out = ParseJson(infer.body);
  ASSERT_TRUE(out.is_object() && out.contains("outputs")) << infer.body;
  EXPECT_EQ(out["id"], "q1");
  EXPECT_EQ(out["parameters"]["degraded"], true) << infer.body;
  ASSERT_EQ(out["outputs"].size(), 1u);
  EXPECT_EQ(out["outputs"][0]["shape"], json::array({2, 1}));
  EXPECT_EQ(out["outputs"][0]["data"], json::array({-1.5, -1.5}));

  for (const ClientResponse& r : {client->Post("/v1/rerank", Body("verdict-503", "panda", {"bears"}), kAuth),
                                  client->Post("/v2/models/verdict-503/infer", infer_body, kAuth)}) {
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_EQ(r.header("retry-after"), "1");
    EXPECT_EQ(r.header("x-tide-degraded"), "unavailable");
    EXPECT_THAT(r.body, HasSubstr("circuit breaker open"));
  }
  const std::string metrics = client->Get("/metrics").body;
  EXPECT_THAT(metrics, HasSubstr(R"(tide_degraded_responses_total{model="verdict",version="1",fallback="default"} 2)"));
  EXPECT_THAT(metrics, HasSubstr(R"(tide_breaker_state{model="verdict-503",version="1"} 1)"));
}

// A default result that does not fit the model is refused when the model loads, naming the file,
// the parameter and both counts.
TEST(ServeGuardConfigTest, DefaultResultOfTheWrongLengthFailsAtLoad) {
  TempDir repo;
  ASSERT_TRUE(AddTinyBert(repo.path(), "verdict",
                          "backend: \"onnxruntime\"\nmax_batch_size: 4\n"
                          "parameters { key: \"task\" value { string_value: \"classify\" } }\n"
                          "parameters { key: \"breaker_p99_ms\" value { string_value: \"200\" } }\n"
                          "parameters { key: \"breaker_default_result\" value { string_value: \"[1, -1]\" } }\n")
                  .ok());
  // (A server that wrongly started would be stopped by timeout: exit 124.)
  auto run = RunCommand({"/usr/bin/timeout", "60", TideBinary().string(), "serve", "--model-repository",
                         repo.path().string(), "--port", "0", "--log-level", "warn"});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 1) << run->output;
  EXPECT_THAT(run->output,
              AllOf(HasSubstr("config.pbtxt: parameters[\"breaker_default_result\"]: has 2 value(s)"),
                    HasSubstr("has 1 label(s)")));
}

}  // namespace
}  // namespace tide::blackbox
