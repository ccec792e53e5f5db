// Black-box test of the structured access log (`--access-log PATH`) against the
// real binary: one JSON line per answered request from the HTTP edge and (when built with gRPC) the
// gRPC edge, with the API key's name (never the key), pairs, cache hits, status and error_type,
// timings and the request id (the client's x-request-id, echoed, else one tide made); a key over
// its quota is logged by name; SIGHUP reopens the file after a logrotate-style rename; the dropped
// counter is exported. The writer and its queue are unit-tested in src/serving/access_log_test.cc.
#include "gtest/gtest.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "blackbox_support.h"
#include "raw_socket.h"
#include "http_client.h"

#ifdef TIDE_HAVE_GRPC
#include "grpc_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#endif

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using tide::testing::ClientResponse;
using tide::testing::HeaderList;

constexpr char kSecret[] = "alpha-secret-key-1";
constexpr char kKeys[] =
    "alpha-secret-key-1 name=alpha requests_per_second=1000\n"
    "slow-secret-key-2 name=slowpoke requests_per_second=0.01\n";

std::vector<json> ReadLines(const fs::path& path) {
  std::vector<json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    json j = ParseJson(line);
    EXPECT_FALSE(j.is_discarded()) << "not JSON: " << line;
    if (!j.is_discarded()) out.push_back(std::move(j));
  }
  return out;
}

// Polls until `path` holds at least `n` lines (the writer is asynchronous), up to 20 s.
std::vector<json> WaitForLines(const fs::path& path, size_t n) {
  std::vector<json> lines;
  WaitFor(
      [&] {
        lines = ReadLines(path);
        return lines.size() >= n;
      },
      std::chrono::seconds(20));
  return lines;
}

const json* FindById(const std::vector<json>& lines, const std::string& id) {
  for (const json& j : lines) {
    if (j.value("request_id", "") == id) return &j;
  }
  return nullptr;
}

TEST(ServeAccessLogTest, OneLinePerAnswerFromEveryEdgeByKeyNameAndReopenedOnSighup) {
  TempDir dir;
  const fs::path repo = dir.path() / "repo";
  ASSERT_TRUE(AddTinyBert(repo, "m", TinyBertConfig()).ok());
  const fs::path keys = dir.path() / "keys.txt";
  std::ofstream(keys) << kKeys;
  const fs::path log = dir.path() / "access.log";
  std::vector<std::string> args = {"--api-keys", keys.string(), "--access-log", log.string(),
                                   "--score-cache-bytes", "1048576", "--log-level", "warn"};
#ifdef TIDE_HAVE_GRPC
  const int grpc_port = FreePort();
  ASSERT_NE(grpc_port, 0);
  args.insert(args.end(), {"--grpc-port", std::to_string(grpc_port)});
#endif
  auto server = StartTideServe(repo, args);
  ASSERT_TRUE(server.ok()) << server.status();
  tide::testing::HttpClient client((*server)->host(), (*server)->port(), std::chrono::seconds(60));
  const HeaderList auth = {{"Authorization", std::string("Bearer ") + kSecret}};
  auto with = [&](HeaderList h, const std::string& id) {
    h.emplace_back("x-request-id", id);
    return h;
  };
  const std::string body = R"({"query": "what is a panda?", "texts": ["a bear", "a city", "a river"]})";

  // 1. A rerank (3 misses), the same again (3 hits), a 400 (no texts), a 401 and a key over its quota.
  const ClientResponse first = client.Post("/rerank", body, with(auth, "req-first"));
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.header("x-request-id"), "req-first");
  const ClientResponse again = client.Post("/rerank", body, with(auth, "req-again"));
  ASSERT_EQ(again.status, 200) << again.body;
  const ClientResponse bad = client.Post("/rerank", R"({"query": "q", "texts": []})", with(auth, "req-bad"));
  EXPECT_EQ(bad.status, 400) << bad.body;
  const ClientResponse anonymous = client.Post("/rerank", body, {{"x-request-id", "req-nokey"}});
  EXPECT_EQ(anonymous.status, 401);
  const HeaderList slow = {{"Authorization", "Bearer slow-secret-key-2"}};
  client.Post("/rerank", body, with(slow, "req-slow-1"));  // takes the bucket's one token
  const ClientResponse over = client.Post("/rerank", body, with(slow, "req-slow-2"));
  EXPECT_EQ(over.status, 429) << over.body;
  const ClientResponse unnamed = client.Post("/rerank", body, auth);  // tide names it
  ASSERT_EQ(unnamed.status, 200);
  const std::string made_id(unnamed.header("x-request-id"));
  EXPECT_FALSE(made_id.empty());

  std::vector<json> lines = WaitForLines(log, 7);
  ASSERT_GE(lines.size(), 7u);
  for (const json& j : lines) {
    for (const char* field : {"time", "protocol", "route", "model", "version", "status", "error_type", "key", "pairs",
                              "cache_hits", "degraded", "queue_ms", "inference_ms", "total_ms", "request_id"}) {
      EXPECT_TRUE(j.contains(field)) << field << " missing in " << j;
    }
  }
  const std::string all = [&] {
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }();
  EXPECT_EQ(all.find(kSecret), std::string::npos) << "the key itself must never be logged";
  EXPECT_EQ(all.find("slow-secret-key-2"), std::string::npos);

  const json* f = FindById(lines, "req-first");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ((*f)["protocol"], "http");
  EXPECT_EQ((*f)["route"], "rerank");
  EXPECT_EQ((*f)["model"], "m");
  EXPECT_EQ((*f)["version"], "1");
  EXPECT_EQ((*f)["status"], 200);
  EXPECT_EQ((*f)["error_type"], "");
  EXPECT_EQ((*f)["key"], "alpha");
  EXPECT_EQ((*f)["pairs"], 3);
  EXPECT_EQ((*f)["cache_hits"], 0);
  EXPECT_EQ((*f)["degraded"], false);
  EXPECT_TRUE((*f)["queue_ms"].is_number()) << *f;
  EXPECT_TRUE((*f)["inference_ms"].is_number()) << *f;
  EXPECT_GE((*f)["total_ms"].get<double>(), (*f)["inference_ms"].get<double>());
  const json* a = FindById(lines, "req-again");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ((*a)["cache_hits"], 3);
  EXPECT_EQ((*a)["pairs"], 3);
  const json* b = FindById(lines, "req-bad");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ((*b)["status"], 400);
  EXPECT_EQ((*b)["error_type"], "empty");
  EXPECT_EQ((*b)["key"], "alpha");
  const json* n = FindById(lines, "req-nokey");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ((*n)["status"], 401);
  EXPECT_EQ((*n)["key"], "");
  const json* o = FindById(lines, "req-slow-2");
  ASSERT_NE(o, nullptr);
  EXPECT_EQ((*o)["status"], 429);
  EXPECT_EQ((*o)["error_type"], "overloaded");
  EXPECT_EQ((*o)["key"], "slowpoke");  // refused before admission, still by name
  EXPECT_NE(FindById(lines, made_id), nullptr);

#ifdef TIDE_HAVE_GRPC
  // 2. gRPC: a KServe ModelInfer of text tensors, logged with its metadata's request id.
  {
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port), grpc::InsecureChannelCredentials());
    auto kserve = inference::GRPCInferenceService::NewStub(channel);
    inference::ModelInferRequest r;
    r.set_model_name("m");
    for (const char* name : {"text", "text_pair"}) {
      auto* in = r.add_inputs();
      in->set_name(name);
      in->set_datatype("BYTES");
      in->add_shape(2);
      in->mutable_contents()->add_bytes_contents(std::string(name) == "text" ? "q" : "a bear");
      in->mutable_contents()->add_bytes_contents(std::string(name) == "text" ? "q" : "a city");
    }
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", std::string("Bearer ") + kSecret);
    ctx.AddMetadata("x-request-id", "grpc-1");
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    inference::ModelInferResponse out;
    const grpc::Status s = kserve->ModelInfer(&ctx, r, &out);
    ASSERT_TRUE(s.ok()) << s.error_message();
    const std::vector<json> with_grpc = WaitForLines(log, lines.size() + 1);
    const json* g = FindById(with_grpc, "grpc-1");
    ASSERT_NE(g, nullptr);
    EXPECT_EQ((*g)["protocol"], "grpc");
    EXPECT_EQ((*g)["route"], "infer");
    EXPECT_EQ((*g)["model"], "m");
    EXPECT_EQ((*g)["status"], 200);
    EXPECT_EQ((*g)["key"], "alpha");
    EXPECT_EQ((*g)["pairs"], 2);
    EXPECT_TRUE((*g)["inference_ms"].is_number()) << *g;
  }
#endif

  // 3. logrotate: rename, SIGHUP, and the next lines go to a new file at the same path.
  const size_t before_rotate = ReadLines(log).size();
  fs::rename(log, dir.path() / "access.log.1");
  ASSERT_TRUE((*server)->Signal(SIGHUP).ok());
  int after = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        client.Post("/rerank", body, with(auth, "req-after-" + std::to_string(after++)));
        return fs::exists(log) && !ReadLines(log).empty();
      },
      std::chrono::seconds(10), "a new access.log after SIGHUP"));
  const std::vector<json> rotated = ReadLines(dir.path() / "access.log.1");
  EXPECT_GE(rotated.size(), before_rotate);  // the old file kept its lines (and got no new file's)
  const std::vector<json> fresh = ReadLines(log);
  ASSERT_FALSE(fresh.empty());
  EXPECT_EQ(fresh.back()["request_id"].get<std::string>().rfind("req-after-", 0), 0u);

  const std::string metrics = client.Get("/metrics").body;
  EXPECT_NE(metrics.find("tide_access_log_dropped_total 0"), std::string::npos)
      << "the dropped counter is exported (and nothing was dropped)";
}

}  // namespace
}  // namespace tide::blackbox
