// Black-box tests of the cost bounds on one request: row limits on every
// endpoint, a JSON body of millions of tiny strings refused before it is materialised, the
// in-flight byte budget (--max-inflight-bytes), and parsing/tokenization off the HTTP threads
// (--tokenization-workers), so health checks and small requests are answered while heavy ones are
// being worked on. Two servers:
//   HeavyRequestTest   one HTTP I/O thread (so any work done on it would hold every other client),
//                      two tokenization workers, model "m" (tiny-bert, max_sequence_length 64, two
//                      priority levels).
//   InflightBytesTest  --max-inflight-bytes 40000000 --request-memory-factor 16 and model "slow"
//                      (max_queue_delay 400 ms, so an admitted request holds its bytes that long).
#include <algorithm>
#include <chrono>
#include <fstream>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "blackbox_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http_client.h"

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using tide::testing::ClientResponse;
using tide::testing::HttpClient;
using Steady = std::chrono::steady_clock;

const std::string kConfig =
    "backend: \"onnxruntime\"\nmax_batch_size: 64\n"
    "parameters { key: \"max_sequence_length\" value { string_value: \"64\" } }\n";

// Resident set of `pid` in bytes (/proc/<pid>/status VmRSS), or -1.
int64_t RssBytes(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

// A JSON array of `n` one-byte strings: "a","a",... (4 bytes each).
std::string TinyStrings(size_t n) {
  std::string out;
  out.reserve(4 * n + 2);
  out += '[';
  for (size_t i = 0; i < n; ++i) out += i == 0 ? "\"a\"" : ",\"a\"";
  out += ']';
  return out;
}

// `n` documents of about `bytes` bytes of words each.
std::vector<std::string> LongDocuments(size_t n, size_t bytes) {
  static const char* kWords[] = {"panda ", "bamboo ", "forest ", "mountain ", "river ", "eats ", "sleeps "};
  std::vector<std::string> docs(n);
  for (size_t i = 0; i < n; ++i) {
    size_t w = i;
    while (docs[i].size() < bytes) docs[i] += kWords[w++ % 7];
  }
  return docs;
}

double MsSince(Steady::time_point t0) {
  return std::chrono::duration<double, std::milli>(Steady::now() - t0).count();
}

class HeavyRequestTest : public SharedServerSuite<HeavyRequestTest> {
 protected:
  static void SetUpTestSuite() {
    // Two priority levels: the small probes ask for level 1 (x-priority: 1), so in the model's batch
    // queue, too, they go before the heavy requests' rows.
    StartSharedServer(
        [](const fs::path& repository) {
          return AddTinyBert(repository, "m",
                             kConfig + "dynamic_batching { priority_levels: 2 default_priority_level: 2 }\n");
        },
                      {"--io-threads", "1", "--tokenization-workers", "2", "--log-level", "warn"});
  }
};

TEST_F(HeavyRequestTest, KServeRowsOverMaxDocumentsGet422NamingTheLimit) {
  auto client = NewClient(std::chrono::milliseconds(20000));
  // [100000, 1]: 100x --max-documents in 586 KB.
  std::string data = "[";
  for (int i = 0; i < 100000; ++i) data += i == 0 ? "101" : ",101";
  data += "]";
  const std::string body =
      absl::StrCat(R"({"inputs":[{"name":"input_ids","shape":[100000,1],"datatype":"INT64","data":)", data, "}]}");
  const ClientResponse r = client->Post("/v2/models/m/infer", body);
  EXPECT_EQ(r.status, 422) << r.error << " " << r.body.substr(0, 300);
  EXPECT_THAT(r.body, HasSubstr("max_documents=1000"));
  // Elements are bounded per model by max_documents x max_sequence_length (1000 x 64), on the
  // shape alone: the one-element data is never looked at.
  const ClientResponse elements = client->Post(
      "/v2/models/m/infer", R"({"inputs":[{"name":"input_ids","shape":[1000,100],"datatype":"INT64","data":[1]}]})");
  EXPECT_EQ(elements.status, 422) << elements.body;
  EXPECT_THAT(elements.body, HasSubstr("max_batch_tensor_elements=64000"));
  // The same rows as BYTES text.
  const ClientResponse text = client->Post(
      "/v2/models/m/infer",
      absl::StrCat(R"({"inputs":[{"name":"text","shape":[1001],"datatype":"BYTES","data":)", TinyStrings(1001), "}]}"));
  EXPECT_EQ(text.status, 422) << text.error << " " << text.body.substr(0, 300);
  EXPECT_THAT(text.body, HasSubstr("max_documents=1000"));
  // /tokenize has the same limit.
  const ClientResponse tokenize = client->Post("/tokenize", absl::StrCat(R"({"inputs":)", TinyStrings(1001), "}"));
  EXPECT_EQ(tokenize.status, 422) << tokenize.body.substr(0, 300);
  EXPECT_THAT(tokenize.body, HasSubstr("max_documents=1000"));
}

TEST_F(HeavyRequestTest, MillionsOfTinyStringsAreRefusedAndMemoryStaysBounded) {
  auto client = NewClient(std::chrono::milliseconds(60000));
  const pid_t pid = server().pid();
  const int64_t before = RssBytes(pid);
  ASSERT_GT(before, 0);
  // 2,000,000 one-byte strings: 8 MB, under --max-body-bytes (8 MiB), on every endpoint.
  const std::string strings = TinyStrings(2000000);
  const std::vector<std::pair<std::string, std::string>> requests = {
      {"/v2/models/m/infer",
       absl::StrCat(R"({"inputs":[{"name":"text","shape":[2000000],"datatype":"BYTES","data":)", strings, "}]}")},
      {"/rerank", absl::StrCat(R"({"query":"q","texts":)", strings, "}")},
      {"/tokenize", absl::StrCat(R"({"inputs":)", strings, "}")},
  };
  int64_t peak = before;
  for (const auto& [path, body] : requests) {
    ASSERT_LT(body.size(), size_t{8} << 20);
    const ClientResponse r = client->Post(path, body);
    EXPECT_THAT(r.status, AnyOf(413, 422)) << path << ": " << r.error << " " << r.body.substr(0, 300);
    EXPECT_THAT(r.body, HasSubstr("max_documents")) << path;
    peak = std::max(peak, RssBytes(pid));
  }
  // The binary form: 1,600,000 BYTES elements of one byte (5 bytes each).
  const std::string header =
      R"({"inputs":[{"name":"text","shape":[1600000],"datatype":"BYTES","parameters":{"binary_data_size":8000000}}]})";
  std::string binary;
  binary.reserve(8000000);
  for (int i = 0; i < 1600000; ++i) binary.append("\x01\x00\x00\x00" "a", 5);
  const ClientResponse r = client->Post("/v2/models/m/infer", header + binary,
                                        {{"Content-Type", "application/octet-stream"},
                                         {"Inference-Header-Content-Length", std::to_string(header.size())}});
  EXPECT_THAT(r.status, AnyOf(413, 422)) << r.error << " " << r.body.substr(0, 300);
  EXPECT_THAT(r.body, HasSubstr("max_documents"));
  peak = std::max(peak, RssBytes(pid));
  // Before the fix one such request cost ~650 MB (a DOM of 2M strings, then 2M rows).
  EXPECT_LT(peak - before, int64_t{300} << 20) << "RSS grew from " << before << " to " << peak;
  EXPECT_EQ(client->Get("/v2/health/live").status, 200);
}

// While heavy but valid requests (1000 long documents, 7.5 MB each) keep both tokenization
// workers busy, the single HTTP thread still answers health checks and a 1-document rerank:
// they never queue behind a body being parsed or tokenized.
TEST_F(HeavyRequestTest, HealthAndSmallRequestsAreAnsweredWhileHeavyOnesAreWorkedOn) {
  const std::string heavy_body =
      json{{"query", "where do pandas live"}, {"texts", LongDocuments(1000, 7500)}, {"truncate", true}}.dump();
  ASSERT_LT(heavy_body.size(), size_t{8} << 20);
  const std::string small_body = json{{"query", "panda"}, {"texts", {"bamboo"}}}.dump();

  constexpr int kHeavyClients = 3;
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> heavy_ms(kHeavyClients);
  std::vector<int> heavy_bad(kHeavyClients, 0);
  std::latch started(kHeavyClients + 1);
  std::vector<std::thread> heavy;
  for (int c = 0; c < kHeavyClients; ++c) {
    heavy.emplace_back([&, c] {
      auto client = NewClient(std::chrono::milliseconds(120000));
      started.arrive_and_wait();
      while (!stop.load()) {
        const auto t0 = Steady::now();
        const ClientResponse r = client->Post("/rerank", heavy_body);
        heavy_ms[c].push_back(MsSince(t0));
        if (r.status != 200 && r.status != 429) ++heavy_bad[c];
      }
    });
  }
  started.arrive_and_wait();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let the heavy ones get going
  auto probe = NewClient(std::chrono::milliseconds(60000));
  double worst_live = 0, worst_small = 0;
  for (int i = 0; i < 15; ++i) {
    auto t0 = Steady::now();
    const ClientResponse live = probe->Get("/v2/health/live");
    worst_live = std::max(worst_live, MsSince(t0));
    EXPECT_EQ(live.status, 200) << live.error;
    t0 = Steady::now();
    const ClientResponse small = probe->Post("/rerank", small_body, {{"x-priority", "1"}});
    worst_small = std::max(worst_small, MsSince(t0));
    EXPECT_EQ(small.status, 200) << small.error << " " << small.body;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  stop = true;
  for (auto& t : heavy) t.join();
  std::vector<double> all;
  for (int c = 0; c < kHeavyClients; ++c) {
    EXPECT_EQ(heavy_bad[c], 0) << "heavy client " << c;
    all.insert(all.end(), heavy_ms[c].begin(), heavy_ms[c].end());
  }
  ASSERT_FALSE(all.empty());
  std::sort(all.begin(), all.end());
  const double heavy_median = all[all.size() / 2];
  // How long the probes took next to the heavy requests is a measurement (printed and recorded),
  // not asserted: a timing bound in a test fails on a loaded machine. What is asserted: every probe
  // and every heavy request was answered correctly while the others were in flight.
  std::cerr << "heavy requests: " << all.size() << ", median " << heavy_median << " ms; worst /v2/health/live "
            << worst_live << " ms, worst 1-document /rerank " << worst_small << " ms\n";
  RecordProperty("heavy_median_ms", static_cast<int>(heavy_median));
  RecordProperty("worst_live_ms", static_cast<int>(worst_live));
  RecordProperty("worst_small_rerank_ms", static_cast<int>(worst_small));
}

class InflightBytesTest : public SharedServerSuite<InflightBytesTest> {
 protected:
  static void SetUpTestSuite() {
    StartSharedServer(
        [](const fs::path& repository) {
          return AddTinyBert(repository, "slow",
                             kConfig + "dynamic_batching { max_queue_delay_microseconds: 400000 }\n");
        },
        {"--io-threads", "4", "--max-inflight-bytes", "40000000", "--request-memory-factor", "16", "--log-level",
         "warn"});
  }
};

TEST_F(InflightBytesTest, ARequestThatCouldNeverFitGets413) {
  auto client = NewClient();
  // 3 MB x 16 + 1 MiB > 40 MB.
  const std::string body = json{{"query", "panda"}, {"texts", LongDocuments(300, 10000)}}.dump();
  const ClientResponse r = client->Post("/rerank", body);
  EXPECT_EQ(r.status, 413) << r.error << " " << r.body.substr(0, 300);
  EXPECT_THAT(r.body, HasSubstr("max_inflight_bytes=40000000"));
  EXPECT_EQ(client->Post("/rerank", json{{"query", "panda"}, {"texts", {"bamboo"}}}.dump()).status, 200);
}

TEST_F(InflightBytesTest, AFullBudgetAnswers429AtOnce) {
  // 1 MB x 16 + 1 MiB = ~17 MB each: two fit in 40 MB, the others are refused while those two
  // wait out the 400 ms batching delay.
  const std::string body = json{{"query", "panda"}, {"texts", LongDocuments(100, 10000)}}.dump();
  constexpr int kClients = 6;
  std::vector<std::unique_ptr<HttpClient>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(NewClient());
    ASSERT_TRUE(clients.back()->Connect().ok());
  }
  std::vector<ClientResponse> responses(kClients);
  std::latch start(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      responses[i] = clients[i]->Post("/rerank", body);
    });
  }
  for (auto& t : threads) t.join();
  int ok = 0, shed = 0;
  for (const ClientResponse& r : responses) {
    ASSERT_TRUE(r.status == 200 || r.status == 429) << r.status << " " << r.error << " " << r.body.substr(0, 300);
    if (r.status == 200) ++ok;
    if (r.status == 429) {
      ++shed;
      EXPECT_EQ(r.header("retry-after"), "1");
      EXPECT_THAT(r.body, HasSubstr("max_inflight_bytes=40000000"));
    }
  }
  EXPECT_GE(ok, 1);
  EXPECT_GE(shed, 1) << "6 simultaneous ~17 MB requests against a 40 MB budget were all admitted";
  // The budget is given back: a request after them is admitted.
  auto after = NewClient();
  EXPECT_EQ(after->Post("/rerank", body).status, 200);
  const std::string metrics = after->Get("/metrics").body;
  EXPECT_THAT(metrics, HasSubstr(R"(reason="max_inflight_bytes")"));
  EXPECT_THAT(metrics, HasSubstr("tide_inflight_request_bytes "));
  EXPECT_THAT(metrics, HasSubstr("tide_tokenization_queue "));
}

}  // namespace
}  // namespace tide::blackbox
