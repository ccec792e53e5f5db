// Black-box test of the per-pair score cache (`--score-cache-bytes`) against the
// real binary over HTTP: a request seen again is answered from the cache with the same scores and
// `x-tide-cache-hits`; a partly new one queues only its new pairs (the batch metrics show it);
// `Cache-Control: no-cache` bypasses it; the cache's metrics add up. Tenant isolation:
// with two keys of an --api-keys file, tenant B never hits the pairs tenant A scored
// (`--score-cache-scope tenant`, the default), and does with `--score-cache-scope shared`.
#include <fstream>
#include <string>

#include "blackbox_support.h"
#include "gtest/gtest.h"
#include "http_client.h"

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using tide::testing::ClientResponse;

class ServeCacheTest : public SharedServerSuite<ServeCacheTest> {
 protected:
  static void SetUpTestSuite() {
    StartSharedServer(
        [](const fs::path& repository) {
          return AddTinyBert(repository, "m",
                             TinyBertConfig());
        },
        {"--score-cache-bytes", "1048576", "--log-level", "warn"});
  }
  static double Rows(const std::string& metrics) {
    return MetricSum(metrics, "tide_batch_size_sum", {R"(model="m")"});
  }
};

TEST_F(ServeCacheTest, RepeatedPairsComeFromTheCache) {
  auto client = NewClient();
  const std::string body = R"({"query": "what is a panda?", "texts": ["a bear", "a city", "a river"]})";
  const ClientResponse first = client->Post("/rerank", body);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.header("x-tide-cache-hits"), "0");
  const double rows_after_first = Rows(client->Get("/metrics").body);

  const ClientResponse again = client->Post("/rerank", body);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.header("x-tide-cache-hits"), "3");
  EXPECT_EQ(ParseJson(again.body), ParseJson(first.body));  // same scores, same order
  EXPECT_EQ(Rows(client->Get("/metrics").body), rows_after_first);  // the model ran nothing

  // A partial hit goes on to a worker with the request parsed on the I/O thread: its options
  // (return_text) and order must be those of the same request answered without the cache.
  const std::string partly_body =
      R"({"query": "what is a panda?", "texts": ["a bear", "a mountain"], "return_text": true})";
  const ClientResponse partly = client->Post("/rerank", partly_body);
  ASSERT_EQ(partly.status, 200) << partly.body;
  EXPECT_EQ(partly.header("x-tide-cache-hits"), "1");
  EXPECT_EQ(Rows(client->Get("/metrics").body), rows_after_first + 1);  // only the new pair ran
  const ClientResponse partly_fresh = client->Post("/rerank", partly_body, {{"Cache-Control", "no-cache"}});
  ASSERT_EQ(partly_fresh.status, 200) << partly_fresh.body;
  EXPECT_EQ(ParseJson(partly.body), ParseJson(partly_fresh.body));
  ASSERT_EQ(ParseJson(partly.body).size(), 2u);
  EXPECT_TRUE(ParseJson(partly.body)[0].contains("text")) << partly.body;

  const ClientResponse bypass = client->Post("/rerank", body, {{"Cache-Control", "no-cache"}});
  ASSERT_EQ(bypass.status, 200) << bypass.body;
  EXPECT_EQ(bypass.header("x-tide-cache-hits"), "0");
  EXPECT_EQ(ParseJson(bypass.body), ParseJson(first.body));

  // Cohere's endpoint shares the cache (same pairs, same options: truncation on).
  const ClientResponse cohere = client->Post(
      "/v1/rerank", R"({"query": "what is a panda?", "documents": ["a bear", "a city"]})");
  ASSERT_EQ(cohere.status, 200) << cohere.body;
  EXPECT_EQ(cohere.header("x-tide-cache-hits"), "2");

  const std::string metrics = client->Get("/metrics").body;
  EXPECT_EQ(MetricSum(metrics, "tide_score_cache_hits_total", {}), 3 + 1 + 2);
  EXPECT_EQ(MetricSum(metrics, "tide_score_cache_misses_total", {}), 3 + 1);
  EXPECT_GT(MetricSum(metrics, "tide_score_cache_bytes", {}), 0);
}

// An --api-keys file with two tenants, alice (key-a) and bob (key-b), for the whole test binary.
std::string TwoTenantKeysFile() {
  static TempDir dir;
  const fs::path file = dir.path() / "keys.txt";
  std::ofstream(file) << "key-a name=alice\nkey-b name=bob\n";
  return file.string();
}

const tide::testing::HeaderList kAlice = {{"Authorization", "Bearer key-a"}};
const tide::testing::HeaderList kBob = {{"Authorization", "Bearer key-b"}};

// Alice scores three pairs; bob sends the same pairs; alice again. Returns bob's hit count.
std::string BobsHitsAfterAlice(tide::testing::HttpClient& client) {
  const std::string body = R"({"query": "who scored this?", "texts": ["pair one", "pair two", "pair three"]})";
  const ClientResponse alice = client.Post("/rerank", body, kAlice);
  EXPECT_EQ(alice.status, 200) << alice.body;
  EXPECT_EQ(alice.header("x-tide-cache-hits"), "0");
  const ClientResponse bob = client.Post("/rerank", body, kBob);
  EXPECT_EQ(bob.status, 200) << bob.body;
  EXPECT_EQ(ParseJson(bob.body), ParseJson(alice.body));  // the same scores either way
  const ClientResponse alice_again = client.Post("/rerank", body, kAlice);
  EXPECT_EQ(alice_again.status, 200) << alice_again.body;
  EXPECT_EQ(alice_again.header("x-tide-cache-hits"), "3") << "a tenant hits its own pairs";
  return std::string(bob.header("x-tide-cache-hits"));
}

class ScoreCacheTenantTest : public SharedServerSuite<ScoreCacheTenantTest> {
 protected:
  static void SetUpTestSuite() {
    StartSharedServer([](const fs::path& repository) { return AddTinyBert(repository, "m", TinyBertConfig()); },
                      {"--score-cache-bytes", "1048576", "--api-keys", TwoTenantKeysFile(), "--log-level", "warn"});
  }
};

TEST_F(ScoreCacheTenantTest, ATenantNeverHitsAnotherTenantsPairs) {
  auto client = NewClient();
  EXPECT_EQ(BobsHitsAfterAlice(*client), "0") << "bob learnt that alice scored these pairs";
  // Bob's own answer was stored in bob's partition.
  const ClientResponse bob_again = client->Post(
      "/rerank", R"({"query": "who scored this?", "texts": ["pair one", "pair two", "pair three"]})", kBob);
  ASSERT_EQ(bob_again.status, 200) << bob_again.body;
  EXPECT_EQ(bob_again.header("x-tide-cache-hits"), "3");
  // Cohere's endpoint is partitioned the same way (it takes the worker path, not the I/O-thread one).
  const std::string cohere = R"({"query": "cohere pair", "documents": ["doc one", "doc two"]})";
  ASSERT_EQ(client->Post("/v1/rerank", cohere, kAlice).status, 200);
  const ClientResponse cohere_bob = client->Post("/v1/rerank", cohere, kBob);
  ASSERT_EQ(cohere_bob.status, 200) << cohere_bob.body;
  EXPECT_EQ(cohere_bob.header("x-tide-cache-hits"), "0");
}

class ScoreCacheSharedTest : public SharedServerSuite<ScoreCacheSharedTest> {
 protected:
  static void SetUpTestSuite() {
    StartSharedServer([](const fs::path& repository) { return AddTinyBert(repository, "m", TinyBertConfig()); },
                      {"--score-cache-bytes", "1048576", "--api-keys", TwoTenantKeysFile(), "--score-cache-scope",
                       "shared", "--log-level", "warn"});
  }
};

TEST_F(ScoreCacheSharedTest, SharedScopeLetsEveryTenantHitEveryPair) {
  auto client = NewClient();
  EXPECT_EQ(BobsHitsAfterAlice(*client), "3");
}

}  // namespace
}  // namespace tide::blackbox
