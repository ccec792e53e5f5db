// Black-box test of GET /load (the signal a load balancer routes by: bench/replicas/load_agent.py
// turns it into an haproxy agent-check weight). One server, --max-concurrent-requests 4, an
// --admin-port listener (which serves /load too), a tiny-bert model that holds each request for
// its 300 ms batching delay.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "blackbox_support.h"
#include "raw_socket.h"
#include "gtest/gtest.h"
#include "http_client.h"

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

uint16_t g_admin_port = 0;

class ServeLoadTest : public SharedServerSuite<ServeLoadTest> {
 protected:
  static void SetUpTestSuite() {
    g_admin_port = FreePort();
    StartSharedServer(AddModels, {"--io-threads", "2", "--max-concurrent-requests", "4", "--admin-port",
                                  std::to_string(g_admin_port), "--log-level", "warn"});
  }
  static absl::Status AddModels(const fs::path& repository) {
    return AddTinyBert(repository, "slow",
                       "backend: \"onnxruntime\"\nmax_batch_size: 16\n"
                       "dynamic_batching { max_queue_delay_microseconds: 300000 }\n"
                       "parameters { key: \"max_sequence_length\" value { string_value: \"64\" } }\n");
  }
};

TEST_F(ServeLoadTest, IdleServerReportsFullFreeCapacity) {
  auto client = NewClient();
  auto r = client->Get("/load");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["ready"], true);
  EXPECT_EQ(j["in_flight"], 0);
  EXPECT_EQ(j["max_concurrent_requests"], 4);
  EXPECT_EQ(j["queued_tasks"], 0);
  EXPECT_EQ(j["queued_tokens"], 0);
  EXPECT_EQ(j["free_percent"], 100);
}

TEST_F(ServeLoadTest, AdminListenerServesLoadToo) {
  tide::testing::HttpClient admin(server().host(), g_admin_port, std::chrono::milliseconds(10000));
  auto r = admin.Get("/load");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(json::parse(r.body)["max_concurrent_requests"], 4);
}

TEST_F(ServeLoadTest, RequestsInFlightAndQueuedRowsLowerTheFreeCapacity) {
  constexpr int kClients = 2;
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&] {
      auto c = NewClient();
      auto r = c->Post("/rerank", R"({"query":"panda","texts":["bear","bamboo forest"]})");
      EXPECT_EQ(r.status, 200) << r.error << r.body;
      done.fetch_add(1);
    });
  }
  // Poll while the requests wait out their 300 ms batching delay: at some point both hold a
  // permit and their rows sit in the queue.
  auto client = NewClient();
  int max_in_flight = 0, min_free = 100, max_queued = 0, max_tokens = 0;
  while (done.load() < kClients) {
    auto r = client->Get("/load");
    ASSERT_EQ(r.status, 200) << r.error << r.body;
    json j = json::parse(r.body);
    max_in_flight = std::max(max_in_flight, j["in_flight"].get<int>());
    min_free = std::min(min_free, j["free_percent"].get<int>());
    max_queued = std::max(max_queued, j["queued_tasks"].get<int>());
    max_tokens = std::max(max_tokens, j["queued_tokens"].get<int>());
  }
  for (auto& t : threads) t.join();
  // At least one request seen in flight (usually both: 50%); each permit is 25% of 4.
  EXPECT_GE(max_in_flight, 1);
  EXPECT_LE(max_in_flight, kClients);
  EXPECT_LE(min_free, 75);
  EXPECT_EQ(min_free % 25, 0);
  EXPECT_GE(max_queued, 1);
  EXPECT_GT(max_tokens, 0);
  json after = json::parse(client->Get("/load").body);
  EXPECT_EQ(after["in_flight"], 0);
  EXPECT_EQ(after["free_percent"], 100);
}

}  // namespace
}  // namespace tide::blackbox
