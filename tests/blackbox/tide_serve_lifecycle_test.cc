// Black-box tests of model control: the real binary, the exported tiny
// model, closed-loop clients running throughout and every answer checked.
//
//  - poll mode (--repository-poll-secs 1): a new version is picked up, then removed, then the
//    config.pbtxt is edited, with zero non-200 answers; a corrupt version, and a config.pbtxt that
//    does not parse, leave what serves untouched and the index shows why;
//  - explicit mode (--load-model a, --admin-api-key): load and unload with and without the admin
//    key, a load with a JSON config override, and an unload with requests in flight (they finish
//    200 on the version they started on; new ones get 404).
//
// Waiting for a poll to be applied is waiting for another process: the tests poll the repository
// index and /metrics with a deadline.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
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
using ::testing::HasSubstr;
using tide::testing::HeaderList;
using tide::testing::HttpClient;

constexpr std::chrono::seconds kApplyTimeout{40};  // a poll (1 s) plus a load and warm-up on a busy machine

const std::string kInferBody = R"({"inputs": [
    {"name": "text", "shape": [2], "datatype": "BYTES", "data": ["what is a panda?", "what is a bear?"]},
    {"name": "text_pair", "shape": [2], "datatype": "BYTES", "data": ["a bear", "a city"]}]})";

::testing::AssertionResult WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout = kApplyTimeout) {
  return tide::test_support::WaitFor(done, timeout);
}

// The entry (name, version) of a repository index, or null.
json IndexEntry(const json& index, const std::string& name, const std::string& version) {
  if (!index.is_array()) return nullptr;
  for (const json& e : index) {
    if (e.value("name", "") == name && e.value("version", "") == version) return e;
  }
  return nullptr;
}

std::string StateOf(const json& index, const std::string& name, const std::string& version) {
  json e = IndexEntry(index, name, version);
  return e.is_null() ? "" : e.value("state", "");
}

// Closed-loop clients: `kserve` clients send a 2-pair KServe text request to /v2/models/m/infer
// (no version: the newest served), `tei` clients a 2-document /rerank; each checks its answer
// (200, two logits / two ranked documents) and the KServe ones count the model_version served.
class ClosedLoop {
 public:
  ClosedLoop(const tide::testing::ServerProcess& server, int kserve, int tei) {
    for (int i = 0; i < kserve + tei; ++i) {
      threads_.emplace_back([this, &server, kserve_client = i < kserve] {
        HttpClient client(server.host(), server.port(), std::chrono::milliseconds(60000));
        while (!stop_.load()) {
          auto r = kserve_client ? client.Post("/v2/models/m/infer", kInferBody)
                                 : client.Post("/rerank", R"({"query": "panda", "texts": ["a bear", "a city"]})");
          const json body = ParseJson(r.body);
          std::string version;
          bool good = r.status == 200;
          if (good && kserve_client) {
            version = body.value("model_version", "");
            good = body.contains("outputs") && body["outputs"].size() == 1 && body["outputs"][0]["data"].size() == 2;
          } else if (good) {
            good = body.is_array() && body.size() == 2;
          }
          std::lock_guard<std::mutex> lock(mu_);
          ++answers_;
          if (!good) {
            ++bad_;
            if (first_bad_.empty()) first_bad_ = absl::StrCat(r.status, " ", r.error, r.body.substr(0, 300));
          }
          if (!version.empty()) {
            ++versions_[version];
            last_version_ = version;
          }
        }
      });
    }
  }
  ~ClosedLoop() { Stop(); }
  void Stop() {
    stop_.store(true);
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  int answers() {
    std::lock_guard<std::mutex> lock(mu_);
    return answers_;
  }
  int bad() {
    std::lock_guard<std::mutex> lock(mu_);
    return bad_;
  }
  std::string first_bad() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_bad_;
  }
  int answered_by(const std::string& version) {
    std::lock_guard<std::mutex> lock(mu_);
    return versions_[version];
  }
  std::string last_version() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_version_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  std::mutex mu_;
  int answers_ = 0;
  int bad_ = 0;
  std::string first_bad_;
  std::map<std::string, int> versions_;
  std::string last_version_;
};

absl::Status Link(const fs::path& target, const fs::path& link) {
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  if (!ec) fs::create_symlink(fs::absolute(target), link, ec);
  return ec ? absl::InternalError(absl::StrCat("cannot link ", link.string(), ": ", ec.message())) : absl::OkStatus();
}

// ---- poll mode ----------------------------------------------------------------------------------

constexpr char kPollConfig[] =
    "backend: \"onnxruntime\"\nmax_batch_size: 8\n"
    "parameters { key: \"max_sequence_length\" value { string_value: \"64\" } }\n";

class ServeLifecyclePollTest : public SharedServerSuite<ServeLifecyclePollTest> {
 protected:
  static void SetUpTestSuite() {
    StartSharedServer([](const fs::path& repo) { return AddTinyBert(repo, "m", std::string(kPollConfig)); },
                      {"--model-control-mode", "poll", "--repository-poll-secs", "1", "--log-level", "info"});
  }

  static json Index() { return ParseJson(NewClient()->Post("/v2/repository/index", "").body); }

  // Moves a version folder made in the scratch directory into the repository in one rename, so a
  // poll never sees it half-written (what an operator should do too).
  static void AddVersion(const std::string& version, const fs::path& model_file) {
    const fs::path staged = scratch_dir() / ("staged-" + version);
    ASSERT_TRUE(Link(model_file, staged / "model.onnx").ok());
    fs::rename(staged, shared_repository() / "m" / version);
  }
  static fs::path shared_repository() { return scratch_dir() / "repo"; }
  static fs::path tiny_model() { return *ExportedTinyBert() / "1" / "model.onnx"; }
};

TEST_F(ServeLifecyclePollTest, NewVersionThenRemovedVersionThenEditedConfigWithZeroErrors) {
  ClosedLoop clients(server(), /*kserve=*/2, /*tei=*/1);
  ASSERT_TRUE(WaitFor([&] { return clients.answered_by("1") >= 5; })) << clients.first_bad();

  // A new version: served in place of version 1 (version_policy latest: 1) once loaded.
  AddVersion("2", tiny_model());
  ASSERT_TRUE(WaitFor([&] {
    const json index = Index();
    return StateOf(index, "m", "2") == "READY" && StateOf(index, "m", "1") != "READY" &&
           clients.answered_by("2") >= 5;
  })) << Index().dump();
  EXPECT_EQ(NewClient()->Get("/v2/models/m/versions/1/ready").status, 404);  // no longer served

  // The new version removed: version 1 is loaded again and serves.
  const int by_one = clients.answered_by("1");
  fs::rename(shared_repository() / "m" / "2", scratch_dir() / "removed-2");
  ASSERT_TRUE(WaitFor([&] {
    const json index = Index();
    return StateOf(index, "m", "1") == "READY" && StateOf(index, "m", "2") == "UNAVAILABLE" &&
           clients.last_version() == "1" && clients.answered_by("1") >= by_one + 5;
  })) << Index().dump();
  EXPECT_EQ(IndexEntry(Index(), "m", "2").value("reason", ""), "unloaded");

  // An edited config.pbtxt reloads version 1 in place.
  {
    std::ofstream(shared_repository() / "m" / "config.pbtxt", std::ios::app)
        << "dynamic_batching { max_queue_delay_microseconds: 100 }\n";
  }
  auto loads = [&] {
    return MetricSum(NewClient()->Get("/metrics").body, "tide_model_loads_total",
                     {R"(model="m")", R"(version="1")", R"(result="success")"});
  };
  ASSERT_TRUE(WaitFor([&] { return loads() >= 3; })) << "version 1 loads: " << loads();
  const int after_reload = clients.answers();
  ASSERT_TRUE(WaitFor([&] { return clients.answers() >= after_reload + 10; }));
  clients.Stop();

  EXPECT_EQ(clients.bad(), 0) << "first non-200 or malformed answer: " << clients.first_bad();
  EXPECT_GT(clients.answers(), 30);
  const std::string metrics = NewClient()->Get("/metrics").body;
  EXPECT_EQ(MetricSum(metrics, "tide_model_ready", {R"(model="m")", R"(version="1")"}), 1);
  EXPECT_GT(MetricSum(metrics, "tide_model_load_rss_bytes", {R"(phase="loaded")"}), 0);
  std::cerr << "poll: " << clients.answers() << " answers, " << clients.bad() << " not 200; by version 1: "
            << clients.answered_by("1")
            << ", by version 2: " << clients.answered_by("2") << "\n";
}

TEST_F(ServeLifecyclePollTest, CorruptVersionLeavesThePreviousOneServingAndShowsWhy) {
  {
    std::error_code ec;
    fs::create_directories(scratch_dir() / "staged-3", ec);
    std::ofstream(scratch_dir() / "staged-3" / "model.onnx") << "not an ONNX model";
    fs::rename(scratch_dir() / "staged-3", shared_repository() / "m" / "3");
  }
  ASSERT_TRUE(WaitFor([&] { return StateOf(Index(), "m", "3") == "UNAVAILABLE"; })) << Index().dump();
  const json index = Index();
  EXPECT_THAT(IndexEntry(index, "m", "3").value("reason", ""), HasSubstr("3/model.onnx"));
  EXPECT_EQ(StateOf(index, "m", "1"), "READY");
  EXPECT_THAT(IndexEntry(index, "m", "1").value("reason", ""), HasSubstr("kept serving"));
  // {"ready": true} lists only what serves.
  const json ready = ParseJson(NewClient()->Post("/v2/repository/index", R"({"ready": true})").body);
  ASSERT_TRUE(ready.is_array());
  for (const json& e : ready) EXPECT_EQ(e.value("state", ""), "READY") << ready.dump();

  auto client = NewClient();
  for (int i = 0; i < 10; ++i) {
    auto r = client->Post("/v2/models/m/infer", kInferBody);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(ParseJson(r.body).value("model_version", ""), "1");
  }
  // Load and unload belong to explicit mode (Triton's rule).
  auto load = client->Post("/v2/repository/models/m/load", "");
  EXPECT_EQ(load.status, 403) << load.body;
  EXPECT_THAT(load.body, HasSubstr("explicit"));
}

TEST_F(ServeLifecyclePollTest, BadConfigKeepsTheModelServingAndNamesTheField) {
  const fs::path config = shared_repository() / "m" / "config.pbtxt";
  std::string original;
  {
    std::ifstream in(config);
    original.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::ofstream(config, std::ios::app) << "max_queue_size: 3\n";  // a misplaced field
  ASSERT_TRUE(WaitFor([&] { return StateOf(Index(), "m", "") == "UNAVAILABLE"; })) << Index().dump();
  EXPECT_THAT(IndexEntry(Index(), "m", "").value("reason", ""), HasSubstr("config.pbtxt:"));
  EXPECT_THAT(IndexEntry(Index(), "m", "").value("reason", ""), HasSubstr("max_queue_size"));
  EXPECT_EQ(StateOf(Index(), "m", "1"), "READY");
  auto client = NewClient();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(client->Post("/v2/models/m/infer", kInferBody).status, 200);
  std::ofstream(config, std::ios::trunc) << original;
  ASSERT_TRUE(WaitFor([&] { return IndexEntry(Index(), "m", "").is_null(); })) << Index().dump();
  EXPECT_EQ(StateOf(Index(), "m", "1"), "READY");
}

// ---- explicit mode ------------------------------------------------------------------------------

const HeaderList kAdmin = {{"Authorization", "Bearer adm1n"}};
const HeaderList kUser = {{"Authorization", "Bearer us3r"}};

class ServeLifecycleExplicitTest : public SharedServerSuite<ServeLifecycleExplicitTest> {
 protected:
  static void SetUpTestSuite() {
    // Model a keeps a request queued for up to 1 s (a batch waits to fill), so an unload finds
    // requests in flight.
    StartSharedServer(
        [](const fs::path& repo) -> absl::Status {
          if (absl::Status s = AddTinyBert(repo, "a", std::string(kPollConfig) +
                                                          "dynamic_batching { max_queue_delay_microseconds: 1000000 }\n");
              !s.ok()) {
            return s;
          }
          return AddTinyBert(repo, "b", std::string(kPollConfig));
        },
        {"--model-control-mode", "explicit", "--load-model", "a", "--api-key", "us3r", "--admin-api-key", "adm1n",
         "--log-level", "info"});
  }

  static json Index() { return ParseJson(NewClient()->Post("/v2/repository/index", "", kAdmin).body); }
};

TEST_F(ServeLifecycleExplicitTest, LoadAndUnloadNeedTheAdminKey) {
  auto client = NewClient();
  // No key: 401. The inference key is a tenant's, never an admin's: 403.
  for (const auto& [wrong, status] : {std::pair{HeaderList{}, 401}, std::pair{kUser, 403}}) {
    EXPECT_EQ(client->Post("/v2/repository/index", "", wrong).status, status);
    EXPECT_EQ(client->Post("/v2/repository/models/b/load", "", wrong).status, status);
    EXPECT_EQ(client->Post("/v2/repository/models/a/unload", "", wrong).status, status);
  }
  json index = Index();
  EXPECT_EQ(StateOf(index, "a", "1"), "READY") << index.dump();
  EXPECT_EQ(StateOf(index, "b", ""), "UNAVAILABLE") << index.dump();
  EXPECT_EQ(IndexEntry(index, "b", "").value("reason", ""), "not loaded");
  EXPECT_EQ(client->Post("/v2/models/b/infer", kInferBody, kUser).status, 404);

  auto load = client->Post("/v2/repository/models/b/load", "", kAdmin);
  ASSERT_EQ(load.status, 200) << load.body;
  EXPECT_EQ(ParseJson(load.body), json::object());
  EXPECT_EQ(StateOf(Index(), "b", "1"), "READY");
  EXPECT_EQ(client->Post("/v2/models/b/infer", kInferBody, kUser).status, 200);
  EXPECT_EQ(client->Post("/v2/repository/models/nope/load", "", kAdmin).status, 404);

  // A JSON config in place of config.pbtxt (Triton's load override).
  const json override_body = {
      {"parameters",
       {{"config", R"({"backend": "onnxruntime", "max_batch_size": 4,
                       "parameters": {"max_sequence_length": {"string_value": "32"}}})"}}}};
  auto reload = client->Post("/v2/repository/models/b/load", override_body.dump(), kAdmin);
  ASSERT_EQ(reload.status, 200) << reload.body;
  EXPECT_EQ(client->Post("/v2/models/b/infer", kInferBody, kUser).status, 200);
  const json bad_override = {{"parameters", {{"config", R"({"max_batch_size": 4, "ensemble_scheduling": {}})"}}}};
  auto bad = client->Post("/v2/repository/models/b/load", bad_override.dump(), kAdmin);
  EXPECT_EQ(bad.status, 422) << bad.body;
  EXPECT_THAT(bad.body, HasSubstr("ensemble_scheduling: unsupported"));

  auto unload = client->Post("/v2/repository/models/b/unload", "", kAdmin);
  ASSERT_EQ(unload.status, 200) << unload.body;
  EXPECT_EQ(client->Post("/v2/models/b/infer", kInferBody, kUser).status, 404);
  ASSERT_TRUE(WaitFor([&] { return StateOf(Index(), "b", "1") == "UNAVAILABLE"; })) << Index().dump();
  EXPECT_EQ(IndexEntry(Index(), "b", "1").value("reason", ""), "unloaded");
}

// Admin input out of its bounds gets a 4xx JSON error, never a crash and never a
// change to what serves; a model file name outside the version directory is answered exactly as a
// missing one, whatever exists at the path it names.
TEST_F(ServeLifecycleExplicitTest, AdminInputsOutOfBoundsAreRefusedAndChangeNothing) {
  auto client = NewClient();
  ASSERT_EQ(client->Post("/v2/repository/models/b/load", "", kAdmin).status, 200);
  auto config = [&] { return ParseJson(client->Get("/v2/models/b/config", kUser).body); };
  const json served_config = config();
  ASSERT_EQ(served_config["instance_group"][0].value("count", 0), 1) << served_config.dump();
  auto expect_unchanged = [&](const std::string& what) {
    EXPECT_EQ(StateOf(Index(), "b", "1"), "READY") << what;
    EXPECT_EQ(config(), served_config) << what;
    EXPECT_EQ(client->Post("/v2/models/b/infer", kInferBody, kUser).status, 200) << what;
  };
  auto load = [&](const std::string& body) { return client->Post("/v2/repository/models/b/load", body, kAdmin); };
  auto with_config = [](const std::string& config_json) {
    return json{{"parameters", {{"config", config_json}}}}.dump();
  };

  // A deep body, a deep parameters.config, an oversized body: refused before parsing.
  auto deep = load(std::string(10000, '[') + std::string(10000, ']'));
  EXPECT_EQ(deep.status, 422) << deep.body;
  EXPECT_THAT(ParseJson(deep.body).value("error", ""), HasSubstr("max_json_depth=16")) << deep.body;
  auto deep_config = load(with_config(std::string(10000, '{') + std::string(10000, '}')));
  EXPECT_EQ(deep_config.status, 422) << deep_config.body;
  EXPECT_THAT(deep_config.body, HasSubstr("parameters.config: request JSON nests"));
  auto big = load(with_config(std::string(2 << 20, ' ')));
  EXPECT_EQ(big.status, 413) << big.body.substr(0, 300);
  EXPECT_THAT(big.body, HasSubstr("the limit for admin input is 1048576"));
  EXPECT_EQ(client->Post("/v2/repository/index", std::string(100, '['), kAdmin).status, 422);
  EXPECT_EQ(client->Post("/v2/repository/models/b/unload", std::string(100, '{'), kAdmin).status, 422);
  expect_unchanged("deep and big bodies");

  // instance_group.count: 100000 in a load override.
  auto many = load(with_config(R"({"backend": "onnxruntime", "max_batch_size": 8,
                                   "instance_group": [{"count": 100000, "kind": "KIND_CPU"}]})"));
  EXPECT_EQ(many.status, 422) << many.body;
  EXPECT_THAT(ParseJson(many.body).value("error", ""), HasSubstr("instance_group[0].count: 100000 is outside 1..64"));
  expect_unchanged("instance_group.count 100000");

  // default_model_filename outside the version directory: one answer whether or not the path
  // exists (../config.pbtxt and /etc/hostname do), the same as for a name with no file.
  auto file_name = [&](const std::string& name) {
    return load(with_config(json{{"backend", "onnxruntime"}, {"max_batch_size", 8}, {"default_model_filename", name}}.dump()));
  };
  const auto missing = file_name("absent.onnx");
  EXPECT_EQ(missing.status, 422) << missing.body;
  EXPECT_THAT(missing.body, HasSubstr("default_model_filename: names no model file in version directory 1"));
  for (const std::string name : {"/etc/hostname", "/etc/tide-no-such-file", "../x", "../config.pbtxt", ".."}) {
    const auto r = file_name(name);
    EXPECT_EQ(r.status, missing.status) << name;
    EXPECT_EQ(r.body, missing.body) << name;
  }
  // The whole-model entry the failed loads left is cleared by a good load; version 1 served on.
  ASSERT_EQ(load("").status, 200);
  expect_unchanged("default_model_filename outside the version directory");
  ASSERT_EQ(client->Post("/v2/repository/models/b/unload", "", kAdmin).status, 200);
}

TEST_F(ServeLifecycleExplicitTest, UnloadWithRequestsInFlightFinishesThem) {
  // 3 requests of 2 rows: less than max_batch_size (8), so their batch waits the full second.
  constexpr int kInFlight = 3;
  std::vector<int> statuses(kInFlight, 0);
  std::atomic<int> finished{0};
  std::vector<std::thread> senders;
  struct JoinAll {
    std::vector<std::thread>& threads;
    ~JoinAll() {
      for (auto& t : threads) {
        if (t.joinable()) t.join();
      }
    }
  } join_all{senders};
  for (int i = 0; i < kInFlight; ++i) {
    senders.emplace_back([&, i] {
      auto c = NewClient();
      statuses[i] = c->Post("/v2/models/a/infer", kInferBody, kUser).status;
      finished.fetch_add(1);
    });
  }
  // Their rows wait in a's queue (a batch waits up to 1 s to fill).
  ASSERT_TRUE(WaitFor(
      [&] {
        return MetricSum(NewClient()->Get("/metrics").body, "tide_queue_tasks", {R"(model="a")"}) >= 2 * kInFlight;
      },
      std::chrono::milliseconds(20000)));
  auto client = NewClient();
  auto unload = client->Post("/v2/repository/models/a/unload", "", kAdmin);
  ASSERT_EQ(unload.status, 200) << unload.body;
  const json index = Index();
  const int finished_by_then = finished.load();
  if (finished_by_then == 0) EXPECT_EQ(StateOf(index, "a", "1"), "UNLOADING") << index.dump();
  EXPECT_EQ(client->Post("/v2/models/a/infer", kInferBody, kUser).status, 404);  // new ones: gone
  for (auto& t : senders) t.join();
  EXPECT_EQ(finished.load(), kInFlight);
  for (int s : statuses) EXPECT_EQ(s, 200);  // finished on the version they started on
  ASSERT_TRUE(WaitFor([&] { return StateOf(Index(), "a", "1") == "UNAVAILABLE"; })) << Index().dump();
  EXPECT_EQ(IndexEntry(Index(), "a", "1").value("reason", ""), "unloaded");
}

}  // namespace
}  // namespace tide::blackbox
