// Black-box tests of gray release: the real binary serving three versions
// of one model — 1 (stable), 2 (the same weights: an identical candidate) and 3 (tiny-bert exported
// with another seed: a candidate that ranks differently) — with the rollout API behind an admin key.
//
//  - canary at 10% lands 10% +- 3% of 2,000 unnamed requests (x-tide-model-version names the
//    version of every answer); with sticky_header the same header value always lands on the same
//    version; a request naming a version bypasses the split;
//  - shadow returns only stable answers; an identical candidate agrees 1.0 on every measure (on
//    reranks, KServe infer rows and long documents alike); a
//    candidate that ranks differently is rolled back by the guard at the very comparison that
//    crosses min_requests (the window holds exactly min_requests pairs), with the reason in the
//    API and the metrics, and nothing in flight fails;
//  - promote makes the candidate the stable version;
//  - with --rollout-state-file, a rollout started, promoted and rolled back through the API is
//    found as it was after each restart.
// Closed-loop clients run throughout each rollout and every answer is checked.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
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
using ::testing::HasSubstr;
using tide::testing::HeaderList;
using tide::testing::HttpClient;

constexpr char kAdminKey[] = "rollout-admin";
constexpr int kOtherSeed = 7;

const HeaderList& Admin() {
  static const HeaderList h = {{"Authorization", std::string("Bearer ") + kAdminKey}};
  return h;
}

// Five documents, so that two rankings can disagree.
std::string RerankBody(int i) {
  return absl::StrCat(R"({"query": "what is a panda number )", i % 17,
                      R"(?", "texts": ["a bear", "a city in china", "the giant panda eats bamboo", "a red fox", "number )",
                      i % 5, R"( is a number"]})");
}

// The ranked document indices of a TEI rerank answer.
std::vector<int> Order(const json& body) {
  std::vector<int> out;
  if (!body.is_array()) return out;
  for (const json& e : body) out.push_back(e.value("index", -1));
  return out;
}

::testing::AssertionResult WaitFor(const std::function<bool()>& done,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  return tide::test_support::WaitFor(done, timeout);
}

// Versions 1 and 2 of m (tiny-bert, the same weights) and 3 (exported with another seed).
absl::Status PopulateThreeVersions(const fs::path& repo) {
  auto tiny = ExportedTinyBert();
  if (!tiny.ok()) return tiny.status();
  auto other = ExportedTinyBert(kOtherSeed);
  if (!other.ok()) return other.status();
  const std::string config =
      "backend: \"onnxruntime\"\nmax_batch_size: 8\n"
      "parameters { key: \"max_sequence_length\" value { string_value: \"64\" } }\n"
      "version_policy { all { } }\n";
  if (absl::Status s = AddTinyBert(repo, "m", config); !s.ok()) return s;
  for (const auto& [version, file] : {std::pair{"2", *tiny / "1" / "model.onnx"},
                                      std::pair{"3", *other / "1" / "model.onnx"}}) {
    std::error_code ec;
    fs::create_directories(repo / "m" / version, ec);
    if (!ec) fs::create_symlink(fs::absolute(file), repo / "m" / version / "model.onnx", ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot add version ", version, ": ", ec.message()));
  }
  return absl::OkStatus();
}

class ServeRolloutTest : public SharedServerSuite<ServeRolloutTest> {
 protected:
  static void SetUpTestSuite() {
    StartSharedServer(PopulateThreeVersions,
        // Shadow lanes at the inference threads' priority: a test machine shared with other work
        // would starve SCHED_IDLE threads (the default, measured by bench/rollout/shadow.sh).
        {"--log-level", "info", "--admin-api-key", kAdminKey, "--shadow-scheduling", "normal"});
  }

  static json Rollout() { return ParseJson(NewClient()->Get("/v2/models/m/rollout", Admin()).body); }
  static tide::testing::ClientResponse Put(const std::string& body) {
    return NewClient()->Send("PUT", "/v2/models/m/rollout", body,
                             {{"Authorization", std::string("Bearer ") + kAdminKey},
                              {"Content-Type", "application/json"}});
  }
  static double Metric(std::string_view name, const std::vector<std::string>& labels) {
    return MetricSum(NewClient()->Get("/metrics").body, name, labels);
  }
  // Runs `per_thread` /rerank requests on each of `threads` closed-loop clients; `check` sees
  // every answer (from the clients' threads).
  // `threads` clients send `per_thread` requests each, one after the other; with `think`, each
  // client pauses that long after every answer (live traffic that leaves the server idle gaps).
  static void ClosedLoop(int threads, int per_thread, const std::function<HeaderList(int)>& headers,
                         const std::function<void(int, const tide::testing::ClientResponse&)>& check,
                         std::chrono::milliseconds think = std::chrono::milliseconds(0)) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        auto client = NewClient();
        for (int k = 0; k < per_thread; ++k) {
          const int i = t * per_thread + k;
          check(i, client->Post("/rerank", RerankBody(i), headers(i)));
          if (think.count() > 0) std::this_thread::sleep_for(think);
        }
      });
    }
    for (auto& th : pool) th.join();
  }
};

HeaderList NoHeaders(int) { return {}; }

// The shadow tests' clients pause this long after each answer: a shadow batch starts only once
// live traffic left both versions idle for the hold-off (10 ms by default).
constexpr std::chrono::milliseconds kThink{40};

// Version 1's ranking of each RerankBody seen while a shadow rollout sends every request to it:
// the same body must always come back in the same order (a shadow answer never leaks out).
std::map<std::string, std::vector<int>> g_stable_orders;
std::mutex g_stable_mu;

TEST_F(ServeRolloutTest, TheRolloutApiNeedsTheAdminKeyAndValidBodies) {
  auto client = NewClient();
  EXPECT_EQ(client->Get("/v2/models/m/rollout").status, 401);
  EXPECT_EQ(client->Send("PUT", "/v2/models/m/rollout", R"({"candidate": "2"})", {}).status, 401);
  EXPECT_EQ(client->Post("/v2/models/m/rollout/promote", "").status, 401);
  const json idle = Rollout();
  EXPECT_EQ(idle.value("state", ""), "idle") << idle.dump();
  EXPECT_EQ(idle.value("stable", ""), "3");  // the newest version answers without a rollout
  EXPECT_EQ(Put(R"({"candidate": "9"})").status, 404);
  EXPECT_EQ(Put(R"({"candidate": "2", "mode": "blue"})").status, 422);
  EXPECT_EQ(Put(R"({"candidate": "2", "percent": 10)").status, 400);
  EXPECT_EQ(client->Post("/v2/models/m/rollout/rollback", "", Admin()).status, 404);  // none yet
}

// A rollout's window is bounded (1..100000), and its body gets the admin input
// pre-scan; a refused PUT changes nothing.
TEST_F(ServeRolloutTest, OutOfBoundsRolloutInputIsRefusedAndChangesNothing) {
  const json before = Rollout();
  auto window = Put(R"({"candidate": "2", "window": 1000000})");
  EXPECT_EQ(window.status, 422) << window.body;
  EXPECT_EQ(ParseJson(window.body).value("error", ""), "window must be an integer within 1..100000") << window.body;
  auto min_requests = Put(R"({"candidate": "2", "guard": {"min_requests": 1000000}})");
  EXPECT_EQ(min_requests.status, 422) << min_requests.body;
  auto deep = Put(std::string(10000, '[') + std::string(10000, ']'));
  EXPECT_EQ(deep.status, 422) << deep.body;
  EXPECT_THAT(deep.body, HasSubstr("max_json_depth=16"));
  auto big = Put(R"({"candidate": "2", "sticky_header": ")" + std::string(2 << 20, 'x') + R"("})");
  EXPECT_EQ(big.status, 413) << big.body.substr(0, 300);
  EXPECT_EQ(Rollout(), before);
}

TEST_F(ServeRolloutTest, CanaryTakesTenPercentAndIsStickyPerHeaderValue) {
  auto put = Put(R"({"candidate": "2", "stable": "1", "mode": "canary", "percent": 10,
                     "sticky_header": "x-user-id", "guard": {"min_requests": 100000}})");
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(ParseJson(put.body).value("state", ""), "running");
  // 2,000 requests without the sticky header: drawn one by one.
  std::mutex mu;
  std::map<std::string, int> by_version;
  int bad = 0;
  ClosedLoop(4, 500, NoHeaders, [&](int, const tide::testing::ClientResponse& r) {
    std::lock_guard<std::mutex> lock(mu);
    if (r.status != 200 || Order(ParseJson(r.body)).size() != 5) ++bad;
    ++by_version[std::string(r.header("x-tide-model-version"))];
  });
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(by_version["1"] + by_version["2"], 2000) << "other versions: " << by_version.size();
  const double share = by_version["2"] / 2000.0;
  EXPECT_NEAR(share, 0.10, 0.03) << "candidate answered " << by_version["2"] << " of 2000";
  // Sticky: 200 users, 5 requests each; every user always on one version, both versions used.
  std::map<std::string, std::set<std::string>> versions_of;
  ClosedLoop(4, 250, [](int i) { return HeaderList{{"X-User-Id", absl::StrCat("user-", i % 200)}}; },
             [&](int i, const tide::testing::ClientResponse& r) {
               std::lock_guard<std::mutex> lock(mu);
               if (r.status != 200) ++bad;
               versions_of[absl::StrCat("user-", i % 200)].insert(std::string(r.header("x-tide-model-version")));
             });
  EXPECT_EQ(bad, 0);
  int users_on_candidate = 0;
  for (const auto& [user, versions] : versions_of) {
    EXPECT_EQ(versions.size(), 1u) << user << " landed on several versions";
    users_on_candidate += versions.count("2");
  }
  EXPECT_EQ(versions_of.size(), 200u);
  EXPECT_GT(users_on_candidate, 0);
  EXPECT_LT(users_on_candidate, 60);
  // A request naming a version bypasses the split.
  auto client = NewClient();
  const std::string infer = R"({"inputs": [
      {"name": "text", "shape": [1], "datatype": "BYTES", "data": ["what is a panda?"]},
      {"name": "text_pair", "shape": [1], "datatype": "BYTES", "data": ["a bear"]}]})";
  for (int i = 0; i < 30; ++i) {
    auto r = client->Post("/v2/models/m/versions/3/infer", infer);
    ASSERT_EQ(r.status, 200) << r.body;
    ASSERT_EQ(r.header("x-tide-model-version"), "3");
  }
  const json status = Rollout();
  EXPECT_GE(status["stats"]["2"].value("requests", 0), 150) << status.dump();
  std::cerr << "canary: candidate answered " << by_version["2"] << " of 2000 (" << share * 100 << "%), "
            << users_on_candidate << " of 200 sticky users; " << status.dump() << "\n";
}

TEST_F(ServeRolloutTest, ShadowReturnsStableAnswersAndAnIdenticalCandidateAgreesFully) {
  auto put = Put(R"({"candidate": "2", "stable": "1", "mode": "shadow", "percent": 100,
                     "guard": {"min_requests": 100, "max_p99_ratio": 1000}})");
  ASSERT_EQ(put.status, 200) << put.body;
  std::mutex mu;
  int bad = 0;
  // Shadow rows use idle capacity only (never while a queue holds rows, and a batch only after both
  // versions were idle for the hold-off): clients that pause between requests leave such gaps.
  // Rounds of requests until 100 were compared.
  for (int round = 0; round < 20 && Rollout()["agreement"].value("pairs", 0) < 100; ++round) {
    ClosedLoop(3, 50, NoHeaders, [&](int i, const tide::testing::ClientResponse& r) {
      std::lock_guard<std::mutex> lock(mu);
      if (r.status != 200 || r.header("x-tide-model-version") != "1") ++bad;
      // Every answer is version 1's: the same body always ranks the same.
      auto [it, fresh] = g_stable_orders.emplace(RerankBody(i), Order(ParseJson(r.body)));
      if (!fresh && it->second != Order(ParseJson(r.body))) ++bad;
    }, kThink);
  }
  EXPECT_EQ(bad, 0);
  ASSERT_TRUE(WaitFor([&] { return Rollout()["agreement"].value("pairs", 0) >= 100; })) << Rollout().dump();
  const json status = Rollout();
  EXPECT_EQ(status.value("state", ""), "running") << status.dump();
  EXPECT_DOUBLE_EQ(status["agreement"].value("spearman", 0.0), 1.0);
  EXPECT_DOUBLE_EQ(status["agreement"].value("top1", 0.0), 1.0);
  EXPECT_NEAR(status["agreement"].value("ndcg10", 0.0), 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(Metric("tide_rollout_agreement", {R"(model="m")", R"(measure="spearman")"}), 1.0);
  EXPECT_GE(status["stats"]["2"].value("requests", 0), 100);
  std::cerr << "shadow, identical candidate: " << status.dump() << "\n";
}

// KServe infer (BYTES text/text_pair rows of a reranker) and long-document reranks (chunk_max) are
// shadowed too, each through the lane: an identical candidate agrees 1.0 on both; every answer is
// the stable version's.
TEST_F(ServeRolloutTest, ShadowComparesKServeInferRowsAndLongDocuments) {
  auto put = Put(R"({"candidate": "2", "stable": "1", "mode": "shadow", "percent": 100,
                     "guard": {"min_requests": 1000, "max_p99_ratio": 1000}})");
  ASSERT_EQ(put.status, 200) << put.body;
  auto scored = [] { return Metric("tide_rollout_shadow_requests_total", {R"(model="m")", R"(outcome="scored")"}); };
  const std::string infer = R"({"inputs": [
      {"name": "text", "shape": [4], "datatype": "BYTES",
       "data": ["what is a panda?", "what is a panda?", "what is a panda?", "what is a panda?"]},
      {"name": "text_pair", "shape": [4], "datatype": "BYTES",
       "data": ["a bear", "a city in china", "the giant panda eats bamboo", "a red fox"]}]})";
  std::string long_doc;
  for (int i = 0; i < 60; ++i) long_doc += "the red fox runs far ";
  long_doc += "the giant panda eats bamboo";
  const std::string long_body =
      json{{"query", "what is a panda?"}, {"texts", {"a bear", long_doc, "a city in china"}}, {"long_documents", "chunk_max"}}.dump();
  std::mutex mu;
  int bad = 0;
  std::string first_bad;
  for (const auto& [path, body] : {std::pair{std::string("/v2/models/m/infer"), infer}, std::pair{std::string("/rerank"), long_body}}) {
    const double before = scored();
    // Closed-loop clients pausing kThink after each answer; shadows run on the idle capacity they
    // leave: rounds until 10 were compared.
    for (int round = 0; round < 20 && scored() < before + 10; ++round) {
      std::vector<std::thread> pool;
      for (int t = 0; t < 3; ++t) {
        pool.emplace_back([&] {
          auto client = NewClient();
          for (int k = 0; k < 10; ++k) {
            auto r = client->Post(path, body);
            std::lock_guard<std::mutex> lock(mu);
            if (r.status != 200 || r.header("x-tide-model-version") != "1") {
              if (++bad == 1) first_bad = absl::StrCat(path, ": ", r.status, " ", r.body);
            }
            std::this_thread::sleep_for(kThink);
          }
        });
      }
      for (auto& th : pool) th.join();
    }
    // A machine busy with other work can leave the closed loop no idle gap at all: then single
    // requests, each leaving the CPU idle after it, until 10 were compared.
    auto single = NewClient();
    EXPECT_TRUE(WaitFor([&] {
      if (scored() >= before + 10) return true;
      auto r = single->Post(path, body);
      std::lock_guard<std::mutex> lock(mu);
      if (r.status != 200 || r.header("x-tide-model-version") != "1") {
        if (++bad == 1) first_bad = absl::StrCat(path, ": ", r.status, " ", r.body);
      }
      return scored() >= before + 10;
    })) << path << ": " << Rollout().dump();
  }
  EXPECT_EQ(bad, 0) << first_bad;
  const json status = Rollout();
  EXPECT_EQ(status.value("state", ""), "running") << status.dump();
  EXPECT_GE(status["agreement"].value("pairs", 0), 20);
  EXPECT_DOUBLE_EQ(status["agreement"].value("spearman", 0.0), 1.0) << status.dump();
  EXPECT_DOUBLE_EQ(status["agreement"].value("top1", 0.0), 1.0);
  EXPECT_EQ(Metric("tide_rollout_shadow_requests_total", {R"(model="m")", R"(outcome="failed")"}), 0);
  std::cerr << "shadow of KServe infer and long documents, identical candidate: " << status.dump() << "\n"
            << "preempted so far: "
            << Metric("tide_rollout_shadow_requests_total", {R"(model="m")", R"(outcome="preempted")"}) << "\n";
}

TEST_F(ServeRolloutTest, AShadowCandidateThatRanksDifferentlyIsRolledBackAtTheCrossing) {
  const double before = Metric("tide_rollout_rollbacks_total", {R"(model="m")"});
  auto put = Put(R"({"candidate": "3", "stable": "1", "mode": "shadow", "percent": 100,
                     "guard": {"min_requests": 40, "min_spearman": 0.9, "min_top1": 0.8, "max_p99_ratio": 1000}})");
  ASSERT_EQ(put.status, 200) << put.body;
  std::mutex mu;
  int bad = 0;
  std::string first_bad;
  for (int round = 0; round < 20 && Rollout().value("state", "") == "running"; ++round) {
    ClosedLoop(3, 30, NoHeaders, [&](int i, const tide::testing::ClientResponse& r) {
      std::lock_guard<std::mutex> lock(mu);
      const std::vector<int> order = Order(ParseJson(r.body));
      auto [it, fresh] = g_stable_orders.emplace(RerankBody(i), order);
      if (r.status != 200 || r.header("x-tide-model-version") != "1" || order.size() != 5 ||
          (!fresh && it->second != order)) {
        if (++bad == 1) first_bad = absl::StrCat(r.status, " ", std::string(r.header("x-tide-model-version")), " ", r.body);
      }
    }, kThink);
  }
  EXPECT_EQ(bad, 0) << first_bad;
  ASSERT_TRUE(WaitFor([&] { return Rollout().value("state", "") == "rolled_back"; }, std::chrono::seconds(10)))
      << Rollout().dump();
  const json status = Rollout();
  // Rolled back at the comparison that reached min_requests (it crossed the bound): no later
  // comparison entered the window.
  EXPECT_EQ(status["agreement"].value("pairs", 0), 40) << status.dump();
  EXPECT_LT(status["agreement"].value("spearman", 1.0), 0.9);
  EXPECT_THAT(status.value("reason", ""), HasSubstr("Spearman"));
  EXPECT_EQ(Metric("tide_rollout_rollbacks_total", {R"(model="m")", R"(reason="spearman")"}), 1);
  EXPECT_EQ(Metric("tide_rollout_rollbacks_total", {R"(model="m")"}), before + 1);
  EXPECT_EQ(Metric("tide_rollout_state", {R"(model="m")"}), 3);
  // After the rollback every unnamed request goes to the stable version.
  auto client = NewClient();
  for (int i = 0; i < 20; ++i) {
    auto r = client->Post("/rerank", RerankBody(i));
    ASSERT_EQ(r.status, 200);
    ASSERT_EQ(r.header("x-tide-model-version"), "1");
  }
  std::cerr << "shadow, other-seed candidate: " << status.dump() << "\n";
}

TEST_F(ServeRolloutTest, PromoteMakesTheCandidateStable) {
  auto put = Put(R"({"candidate": "2", "stable": "1", "mode": "canary", "percent": 10,
                     "guard": {"min_requests": 100000}})");
  ASSERT_EQ(put.status, 200) << put.body;
  auto client = NewClient();
  auto promoted = client->Post("/v2/models/m/rollout/promote", "", Admin());
  ASSERT_EQ(promoted.status, 200) << promoted.body;
  const json status = ParseJson(promoted.body);
  EXPECT_EQ(status.value("state", ""), "promoted");
  EXPECT_EQ(status.value("stable", ""), "2");
  EXPECT_EQ(Metric("tide_rollout_state", {R"(model="m")"}), 2);
  for (int i = 0; i < 50; ++i) {
    auto r = client->Post("/rerank", RerankBody(i));
    ASSERT_EQ(r.status, 200);
    ASSERT_EQ(r.header("x-tide-model-version"), "2");
  }
  // Promoting again is refused: the rollout is over.
  EXPECT_EQ(client->Post("/v2/models/m/rollout/promote", "", Admin()).status, 422);
}

// --rollout-state-file: a rollout started, promoted and rolled back through the API is found as it
// was after each restart of the server (same repository, same file).
TEST(ServeRolloutStateTest, RolloutsStartedThroughTheApiSurviveRestarts) {
  TempDir dir;
  const fs::path repo = dir.path() / "repo";
  ASSERT_TRUE(PopulateThreeVersions(repo).ok());
  const std::string state_file = (dir.path() / "rollouts.json").string();
  const std::vector<std::string> flags = {"--admin-api-key", kAdminKey, "--rollout-state-file", state_file,
                                          "--shadow-scheduling", "normal", "--log-level", "info"};
  auto versions_answering = [](HttpClient& client) {
    std::set<std::string> seen;
    for (int i = 0; i < 10; ++i) {
      auto r = client.Post("/rerank", RerankBody(i));
      seen.insert(r.status == 200 ? std::string(r.header("x-tide-model-version")) : "error " + r.body);
    }
    return seen;
  };
  auto rollout = [](HttpClient& client) { return ParseJson(client.Get("/v2/models/m/rollout", Admin()).body); };
  auto start = [&]() {
    auto server = StartTideServe(repo, flags);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  };
  {
    auto server = start();
    ASSERT_NE(server, nullptr);
    HttpClient client(server->host(), server->port());
    EXPECT_EQ(rollout(client).value("state", ""), "idle");
    auto put = client.Send("PUT", "/v2/models/m/rollout",
                           R"({"candidate": "2", "stable": "1", "mode": "canary", "percent": 100,
                               "guard": {"min_requests": 100000}})",
                           {{"Authorization", std::string("Bearer ") + kAdminKey}, {"Content-Type", "application/json"}});
    ASSERT_EQ(put.status, 200) << put.body;
    EXPECT_EQ(versions_answering(client), std::set<std::string>{"2"});
  }
  ASSERT_TRUE(fs::exists(state_file));  // written before the PUT was answered
  {
    auto server = start();
    ASSERT_NE(server, nullptr);
    HttpClient client(server->host(), server->port());
    const json st = rollout(client);
    EXPECT_EQ(st.value("state", ""), "running") << st.dump();
    EXPECT_EQ(st.value("candidate", ""), "2");
    EXPECT_EQ(st.value("percent", 0.0), 100.0);
    EXPECT_EQ(versions_answering(client), std::set<std::string>{"2"});
    ASSERT_EQ(client.Post("/v2/models/m/rollout/promote", "", Admin()).status, 200);
  }
  {
    auto server = start();
    ASSERT_NE(server, nullptr);
    HttpClient client(server->host(), server->port());
    const json st = rollout(client);
    EXPECT_EQ(st.value("state", ""), "promoted") << st.dump();
    EXPECT_EQ(st.value("stable", ""), "2");
    EXPECT_EQ(versions_answering(client), std::set<std::string>{"2"});  // not the newest (3)
    // The promotion is still undoable after the restart: version 1 is stable again.
    auto back = client.Post("/v2/models/m/rollout/rollback", "", Admin());
    ASSERT_EQ(back.status, 200) << back.body;
  }
  {
    auto server = start();
    ASSERT_NE(server, nullptr);
    HttpClient client(server->host(), server->port());
    const json st = rollout(client);
    EXPECT_EQ(st.value("state", ""), "rolled_back") << st.dump();
    EXPECT_EQ(st.value("stable", ""), "1");
    EXPECT_THAT(st.value("reason", ""), HasSubstr("manual"));
    EXPECT_EQ(versions_answering(client), std::set<std::string>{"1"});
  }
  // A file that is not a rollout state stops the start-up instead of forgetting rollouts.
  {
    std::ofstream(state_file) << "not json";
  }
  auto refused = StartTideServe(repo, flags, std::chrono::milliseconds(60000));
  EXPECT_FALSE(refused.ok());
}

// GitOps: a rollout declared in config.pbtxt starts when a poll applies the change.
class ServeDeclaredRolloutTest : public SharedServerSuite<ServeDeclaredRolloutTest> {
 protected:
  static void SetUpTestSuite() {
    StartSharedServer(
        [](const fs::path& repo) {
          return AddTinyBert(repo, "m",
                             "backend: \"onnxruntime\"\nmax_batch_size: 8\nversion_policy { all { } }\n"
                             "parameters { key: \"max_sequence_length\" value { string_value: \"64\" } }\n");
        },
        {"--model-control-mode", "poll", "--repository-poll-secs", "1", "--log-level", "info"});
  }
};

TEST_F(ServeDeclaredRolloutTest, APollModeRepositoryChangeStartsTheDeclaredRollout) {
  auto client = NewClient();
  EXPECT_EQ(ParseJson(client->Get("/v2/models/m/rollout").body).value("state", ""), "idle");
  // Version 2 (the same weights) and the declaration, each moved in by one rename.
  auto tiny = ExportedTinyBert();
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  const fs::path repo = scratch_dir() / "repo" / "m";
  const fs::path staged = scratch_dir() / "staged-2";
  fs::create_directories(staged);
  fs::create_symlink(fs::absolute(*tiny / "1" / "model.onnx"), staged / "model.onnx");
  fs::rename(staged, repo / "2");
  {
    std::ofstream out(scratch_dir() / "config.pbtxt.new");
    out << "backend: \"onnxruntime\"\nmax_batch_size: 8\nversion_policy { all { } }\n"
           "parameters { key: \"max_sequence_length\" value { string_value: \"64\" } }\n"
           "parameters { key: \"rollout\" value { string_value: "
           "'{\"candidate\": \"2\", \"stable\": \"1\", \"mode\": \"canary\", \"percent\": 50}' } }\n";
  }
  fs::rename(scratch_dir() / "config.pbtxt.new", repo / "config.pbtxt");
  ASSERT_TRUE(WaitFor([&] { return ParseJson(client->Get("/v2/models/m/rollout").body).value("state", "") == "running"; },
                      std::chrono::seconds(40)))
      << client->Get("/v2/models/m/rollout").body;
  const json status = ParseJson(client->Get("/v2/models/m/rollout").body);
  EXPECT_EQ(status.value("stable", ""), "1");
  EXPECT_EQ(status.value("candidate", ""), "2");
  EXPECT_EQ(status.value("mode", ""), "canary");
  std::map<std::string, int> by_version;
  for (int i = 0; i < 100; ++i) {
    auto r = client->Post("/rerank", RerankBody(i));
    ASSERT_EQ(r.status, 200) << r.body;
    ++by_version[std::string(r.header("x-tide-model-version"))];
  }
  EXPECT_GT(by_version["1"], 20);
  EXPECT_GT(by_version["2"], 20);
}

}  // namespace
}  // namespace tide::blackbox

