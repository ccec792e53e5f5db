// Black-box tests of several API keys with quotas (`--api-keys FILE`) against the
// real binary over HTTP. One server:
//   --api-key single --api-keys keys.txt with
//     flood-secret-1 name=flood requests_per_second=5 max_concurrent=2
//     calm-secret-2  name=calm
//   m  tiny-bert
// A flooding tenant gets 429 with Retry-After from its own bucket while the other tenant's every
// request succeeds; metrics count by key name and never show a key; SIGHUP reloads the file, and a
// file that does not parse leaves the keys in force.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "blackbox_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http_client.h"
#include "wait_for.h"

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using tide::test_support::WaitFor;
using tide::testing::ClientResponse;
using tide::testing::HeaderList;

constexpr char kKeys[] =
    "# tenants of the keys test\n"
    "flood-secret-1 name=flood requests_per_second=5 max_concurrent=2\n"
    "calm-secret-2  name=calm\n";

HeaderList Bearer(const std::string& key) { return {{"Authorization", "Bearer " + key}}; }

class ServeKeysTest : public SharedServerSuite<ServeKeysTest> {
 protected:
  static void SetUpTestSuite() {
    keys_dir_ = new TempDir();
    WriteKeys(kKeys);
    StartSharedServer(
        [](const fs::path& repository) {
          return AddTinyBert(repository, "m",
                             TinyBertConfig());
        },
                      {"--io-threads", "2", "--api-key", "single", "--api-keys", KeysFile().string(),
                       "--log-level", "info"});
  }
  static void TearDownTestSuite() {
    SharedServerSuite<ServeKeysTest>::TearDownTestSuite();
    delete keys_dir_;
    keys_dir_ = nullptr;
  }
  static fs::path KeysFile() { return keys_dir_->path() / "keys.txt"; }
  static void WriteKeys(const std::string& text) {
    const fs::path tmp = keys_dir_->path() / "keys.txt.tmp";
    std::ofstream(tmp) << text;
    fs::rename(tmp, KeysFile());  // atomically, as a config manager would
  }
  static std::string Rerank() { return R"({"query": "panda", "texts": ["a bear", "a city"]})"; }
  // Polls until `key` gets `status` on /rerank (a SIGHUP reload is asynchronous), up to 10 s.
  int WaitForStatus(const std::string& key, int status) {
    auto client = NewClient();
    int got = 0;
    WaitFor([&] { return (got = client->Post("/rerank", Rerank(), Bearer(key)).status) == status; },
            std::chrono::seconds(10));
    return got;
  }
  static inline TempDir* keys_dir_ = nullptr;
};

TEST_F(ServeKeysTest, AFloodingTenantIsLimitedAndTheOtherIsNot) {
  // flood: 6 threads x 10 requests as fast as they can, against 5 requests/s and 2 in flight.
  std::atomic<int> flood_ok{0}, flood_429{0}, flood_other{0};
  std::atomic<bool> retry_after_ok{true}, message_ok{true};
  std::vector<std::thread> flooders;
  for (int t = 0; t < 6; ++t) {
    flooders.emplace_back([&] {
      auto client = NewClient();
      for (int i = 0; i < 10; ++i) {
        const ClientResponse r = client->Post("/rerank", Rerank(), Bearer("flood-secret-1"));
        if (r.status == 200) {
          ++flood_ok;
        } else if (r.status == 429) {
          ++flood_429;
          const std::string retry(r.header("Retry-After"));
          if (retry.empty() || std::stoi(retry) < 1) retry_after_ok = false;
          if (r.body.find("flood") == std::string::npos || r.body.find("flood-secret") != std::string::npos) {
            message_ok = false;
          }
        } else {
          ++flood_other;
        }
      }
    });
  }
  // calm: sequential requests throughout; every one must succeed.
  auto calm = NewClient();
  int calm_ok = 0;
  for (int i = 0; i < 20; ++i) {
    const ClientResponse r = calm->Post("/rerank", Rerank(), Bearer("calm-secret-2"));
    EXPECT_EQ(r.status, 200) << r.body;
    calm_ok += r.status == 200;
  }
  for (auto& t : flooders) t.join();
  EXPECT_EQ(calm_ok, 20);
  EXPECT_GT(flood_ok.load(), 0);
  EXPECT_GT(flood_429.load(), 0);  // limited (how many depends on how fast the flood went)
  EXPECT_EQ(flood_other.load(), 0);
  EXPECT_TRUE(retry_after_ok);
  EXPECT_TRUE(message_ok);
  RecordProperty("flood_ok", flood_ok.load());
  RecordProperty("flood_429", flood_429.load());

  const std::string metrics = NewClient()->Get("/metrics").body;
  EXPECT_EQ(MetricSum(metrics, "tide_key_requests_total", {R"(key="calm")", R"(outcome="admitted")"}), 20);
  EXPECT_EQ(MetricSum(metrics, "tide_key_requests_total", {R"(key="flood")", R"(outcome="admitted")"}),
            flood_ok.load());
  EXPECT_EQ(MetricSum(metrics, "tide_key_requests_total", {R"(key="flood")", R"(outcome="over_requests")"}) +
                MetricSum(metrics, "tide_key_requests_total", {R"(key="flood")", R"(outcome="over_concurrency")"}),
            flood_429.load());
  EXPECT_EQ(MetricSum(metrics, "tide_key_pairs_total", {R"(key="calm")"}), 40);
  EXPECT_THAT(metrics, ::testing::Not(HasSubstr("secret")));
}

TEST_F(ServeKeysTest, KeysGuardMetadataAndTheSingleKeyIsATenantToo) {
  auto client = NewClient();
  EXPECT_EQ(client->Get("/v2/models/m").status, 401);
  EXPECT_EQ(client->Get("/v2/models/m", Bearer("calm-secret-2")).status, 200);
  EXPECT_EQ(client->Post("/rerank", Rerank(), Bearer("single")).status, 200);
  EXPECT_EQ(client->Post("/rerank", Rerank(), Bearer("nobody")).status, 401);
  EXPECT_EQ(client->Get("/v2/health/ready").status, 200);  // probes stay open
}

TEST_F(ServeKeysTest, SighupReloadsTheFileAndABadFileKeepsTheKeys) {
  // A file that does not parse: the keys in force stay.
  WriteKeys("fresh-secret-3\n");  // no name=
  auto refusals = [] {  // the log lines of refused reloads so far
    const std::string out = server().Stdout();
    size_t n = 0;
    for (size_t at = out.find("keeping the current API keys"); at != std::string::npos;
         at = out.find("keeping the current API keys", at + 1)) {
      ++n;
    }
    return n;
  };
  const size_t refused_before = refusals();
  ASSERT_TRUE(server().Signal(SIGHUP).ok());
  ASSERT_TRUE(WaitFor([&] { return refusals() > refused_before; }, std::chrono::seconds(10),
                      "tide to refuse the bad keys file"))
      << server().Diagnostics();
  EXPECT_EQ(NewClient()->Post("/rerank", Rerank(), Bearer("calm-secret-2")).status, 200);

  WriteKeys("fresh-secret-3 name=fresh\n");
  ASSERT_TRUE(server().Signal(SIGHUP).ok());
  EXPECT_EQ(WaitForStatus("fresh-secret-3", 200), 200);
  EXPECT_EQ(NewClient()->Post("/rerank", Rerank(), Bearer("calm-secret-2")).status, 401);
  EXPECT_EQ(NewClient()->Post("/rerank", Rerank(), Bearer("single")).status, 200);  // --api-key stays
}

}  // namespace
}  // namespace tide::blackbox
