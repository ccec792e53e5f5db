// `tide bench`: flag parsers, and a short black-box run against a real `tide serve` on the tiny
// DistilBERT export from ../shared/assets (label loadgen; skipped when ../shared is absent).
#include "cli/bench_command.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server_process.h"
#include "shared_assets.h"

namespace tide::cli {
namespace {

namespace fs = std::filesystem;

TEST(ParseSweep, EverySpelling) {
  EXPECT_EQ(*ParseSweep("4"), std::vector<double>({4}));
  EXPECT_EQ(*ParseSweep("1:64:x2"), std::vector<double>({1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(*ParseSweep("1:10:x3"), std::vector<double>({1, 3, 9}));
  EXPECT_EQ(*ParseSweep("8:32:+8"), std::vector<double>({8, 16, 24, 32}));
  EXPECT_EQ(*ParseSweep("1,3,9"), std::vector<double>({1, 3, 9}));
  EXPECT_EQ(*ParseSweep("2.5"), std::vector<double>({2.5}));
  for (const char* bad : {"", "0", "-1", "1:64", "1:64:x1", "64:1:x2", "1:8:*2", "a,b", "1,,2", "1:8:+0"})
    EXPECT_FALSE(ParseSweep(bad).ok()) << bad;
}

TEST(ParseDurationNs, UnitsAndPlainSeconds) {
  EXPECT_EQ(*ParseDurationNs("5s"), 5'000'000'000);
  EXPECT_EQ(*ParseDurationNs("250ms"), 250'000'000);
  EXPECT_EQ(*ParseDurationNs("2m"), 120'000'000'000);
  EXPECT_EQ(*ParseDurationNs("1.5"), 1'500'000'000);
  EXPECT_EQ(*ParseDurationNs("0s"), 0);
  for (const char* bad : {"", "s", "five", "-1s", "3h"}) EXPECT_FALSE(ParseDurationNs(bad).ok()) << bad;
}

TEST(ParseFraction, PercentOrFraction) {
  EXPECT_DOUBLE_EQ(*ParseFraction("10%"), 0.10);
  EXPECT_DOUBLE_EQ(*ParseFraction("0.05"), 0.05);
  EXPECT_FALSE(ParseFraction("0%").ok());
  EXPECT_FALSE(ParseFraction("%").ok());
}

TEST(RunBenchCommand, RejectsBadFlagsWithExitCode2) {
  std::ostringstream out, err;
  BenchCommandOptions o;
  o.url = "ftp://example.com";
  EXPECT_EQ(RunBenchCommand(o, out, err), 2);
  EXPECT_NE(err.str().find("http:// or https://"), std::string::npos);
  o = {};
  o.tls_ca_file = "ca.crt";  // TLS flags need an https:// or grpcs:// URL
  EXPECT_EQ(RunBenchCommand(o, out, err), 2);
  EXPECT_NE(err.str().find("need an https:// or grpcs:// --url"), std::string::npos);
  o = {};
  o.url = "https://127.0.0.1:1";
  o.tls_ca_file = "/nonexistent/ca.crt";
  EXPECT_EQ(RunBenchCommand(o, out, err), 2);
  o = {};
  o.url = "https://127.0.0.1:1";
  o.tls_cert_file = "client.crt";  // without its key
  EXPECT_EQ(RunBenchCommand(o, out, err), 2);
  o = {};
  o.endpoint = "kserve";  // without --model
  EXPECT_EQ(RunBenchCommand(o, out, err), 2);
  o = {};
  o.concurrency = "1:4";
  EXPECT_EQ(RunBenchCommand(o, out, err), 2);
}

std::string ReadFile(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// --dump-requests writes the pool a run would send (one body per line) without contacting any
// server: the port below is closed, and nothing listens there.
TEST(RunBenchCommand, DumpRequestsWritesThePoolAndSendsNothing) {
  char tmpl[] = "/tmp/tide-bench-dump-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const fs::path tmp = tmpl;
  auto dump = [&](uint64_t seed, const std::string& name) {
    BenchCommandOptions o;
    o.url = "http://127.0.0.1:1";
    o.documents = 5;
    o.request_pool = 7;
    o.seed = seed;
    o.dump_requests = (tmp / name).string();
    std::ostringstream out, err;
    EXPECT_EQ(RunBenchCommand(o, out, err), 0) << err.str();
    EXPECT_NE(err.str().find("wrote 7 request bodies"), std::string::npos) << err.str();
    return ReadFile(tmp / name);
  };
  const std::string a = dump(42, "a.jsonl"), again = dump(42, "again.jsonl"), other = dump(43, "b.jsonl");
  EXPECT_EQ(a, again);  // deterministic for a seed
  EXPECT_NE(a, other);
  std::istringstream lines(a);
  std::string line;
  std::set<std::string> distinct;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    ASSERT_TRUE(j["query"].is_string()) << line;
    EXPECT_FALSE(j["query"].get<std::string>().empty());
    ASSERT_TRUE(j["texts"].is_array()) << line;
    EXPECT_EQ(j["texts"].size(), 5u);
    distinct.insert(line);
  }
  EXPECT_EQ(n, 7);
  EXPECT_EQ(distinct.size(), 7u);

  // The embedding endpoints: each body is the batch of texts to embed (no query).
  for (const auto& [endpoint, key] : {std::pair{"embed", "inputs"}, std::pair{"v1-embeddings", "input"}}) {
    BenchCommandOptions e;
    e.url = "http://127.0.0.1:1";
    e.endpoint = endpoint;
    e.documents = 32;
    e.request_pool = 2;
    e.dump_requests = (tmp / (std::string(endpoint) + ".jsonl")).string();
    std::ostringstream out, err;
    ASSERT_EQ(RunBenchCommand(e, out, err), 0) << err.str();
    std::istringstream embed_lines(ReadFile(tmp / (std::string(endpoint) + ".jsonl")));
    int bodies = 0;
    while (std::getline(embed_lines, line)) {
      ++bodies;
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      ASSERT_TRUE(j.is_object() && j[key].is_array()) << line;
      EXPECT_EQ(j[key].size(), 32u);
      EXPECT_FALSE(j.contains("query")) << line;
    }
    EXPECT_EQ(bodies, 2);
    e.protocol = "grpc";  // tei.v1 Embed is not a tide bench RPC
    e.url = "grpc://127.0.0.1:1";
    e.dump_requests.clear();
    std::ostringstream out2, err2;
    EXPECT_EQ(RunBenchCommand(e, out2, err2), 2) << err2.str();
  }

  BenchCommandOptions o;  // an unwritable file is exit code 1 with the path named
  o.dump_requests = (tmp / "missing-dir" / "x.jsonl").string();
  std::ostringstream out, err;
  EXPECT_EQ(RunBenchCommand(o, out, err), 1);
  EXPECT_NE(err.str().find("missing-dir"), std::string::npos) << err.str();

  // A body template spanning lines cannot be written one body per line: a flag error.
  std::ofstream(tmp / "multi.tmpl") << "{\n\"query\": {{query_json}}, \"texts\": {{documents_json}}\n}";
  o = {};
  o.body_template = (tmp / "multi.tmpl").string();
  o.dump_requests = (tmp / "multi.jsonl").string();
  std::ostringstream out2, err2;
  EXPECT_EQ(RunBenchCommand(o, out2, err2), 2);
  EXPECT_NE(err2.str().find("spans lines"), std::string::npos) << err2.str();
  fs::remove_all(tmp);
}

// A model repository with the shared tiny DistilBERT export as model "distil" (version 1).
void WriteDistilRepository(const fs::path& repo) {
  fs::create_directories(repo / "distil" / "1");
  fs::copy_file(tide::testing::SharedAssetPath(tide::testing::kTinyDistilBertModel), repo / "distil" / "1" / "model.onnx");
  fs::copy_file(tide::testing::SharedAssetPath(tide::testing::kBertBaseUncasedTokenizer),
                repo / "distil" / "tokenizer.json");
  std::ofstream(repo / "distil" / "config.pbtxt")
      << "backend: \"onnxruntime\"\nmax_batch_size: 16\n"
         "dynamic_batching { max_queue_delay_microseconds: 2000 }\n";
}

TEST(TideBenchBlackBox, ShortRunAgainstARealServer) {
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kBertBaseUncasedTokenizer);
  char tmpl[] = "/tmp/tide-bench-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const fs::path tmp = tmpl;
  WriteDistilRepository(tmp / "repo");
  const fs::path tokenizer = tide::testing::SharedAssetPath(tide::testing::kBertBaseUncasedTokenizer);

  tide::testing::ServerProcessOptions so;
  so.binary = TIDE_BINARY_PATH;
  so.args = {"serve", "--model-repository", (tmp / "repo").string(), "--log-level", "warn"};
  so.startup_timeout = std::chrono::milliseconds(120000);
  auto server = tide::testing::ServerProcess::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->WaitReady().ok()) << (*server)->Diagnostics();

  const fs::path json_path = tmp / "bench.json";
  const fs::path html_path = tmp / "bench.html";
  const fs::path csv_path = tmp / "bench.csv";
  const std::string url = "http://" + (*server)->host() + ":" + std::to_string((*server)->port());
  // Flags on the command line, one through its environment twin.
  const std::string cmd = "TIDE_BENCH_DOCUMENTS=4 " + std::string(TIDE_BINARY_PATH) + " bench --url " + url +
                          " --tokenizer " + tokenizer.string() + " --concurrency 2 --warmup 500ms --duration 3s" +
                          " --max-doc-tokens 128 --json " + json_path.string() + " --html " +
                          html_path.string() + " --csv " + csv_path.string() + " > " + (tmp / "out").string() +
                          " 2> " + (tmp / "err").string();
  const int status = std::system(cmd.c_str());
  const std::string out = ReadFile(tmp / "out"), err = ReadFile(tmp / "err");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd << "\nstdout:\n" << out << "\nstderr:\n" << err;
  EXPECT_NE(out.find("c=2"), std::string::npos) << out;

  const nlohmann::json j = nlohmann::json::parse(ReadFile(json_path), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << ReadFile(json_path);
  EXPECT_EQ(j["workload"]["documents_per_request"], 4);
  ASSERT_EQ(j["runs"].size(), 1u);
  const auto& run = j["runs"][0];
  EXPECT_EQ(run["concurrency"], 2);
  EXPECT_EQ(run["error_count"], 0) << run["errors"].dump();
  EXPECT_GT(run["qps"].get<double>(), 0);
  EXPECT_GT(run["completed"].get<int>(), 0);
  EXPECT_DOUBLE_EQ(run["pairs_per_s"].get<double>(), 4 * run["qps"].get<double>());
  EXPECT_GT(run["latency_ms"]["p50"].get<double>(), 0);
  EXPECT_GE(run["latency_ms"]["p99"].get<double>(), run["latency_ms"]["p50"].get<double>());
  // The client's CPU share is its CPU seconds over the wall seconds it measured (no timing claim).
  const auto& cpu = run["client_cpu"];
  ASSERT_GT(cpu["wall_seconds"].get<double>(), 0);
  EXPECT_NEAR(cpu["percent_of_one_core"].get<double>(),
              100.0 * cpu["cpu_seconds"].get<double>() / cpu["wall_seconds"].get<double>(), 1e-6);
  // The server's own split came from /metrics.
  EXPECT_TRUE(run["server_metrics"].get<bool>());
  EXPECT_TRUE(run["server_stages_ms"].contains("inference")) << run["server_stages_ms"].dump();

  const std::string html = ReadFile(html_path);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(ReadFile(csv_path).rfind("mode,concurrency,", 0), 0u);

  (*server)->Stop().IgnoreError();
  fs::remove_all(tmp);
}

TEST(RunBenchCommand, GrpcFlagsThatDoNotApplyAreRejectedWithExitCode2) {
  std::ostringstream out, err;
  BenchCommandOptions o;
  o.protocol = "carrier-pigeon";
  EXPECT_EQ(RunBenchCommand(o, out, err), 2);
#ifdef TIDE_HAVE_GRPC
  o = {};
  o.protocol = "grpc";
  o.url = "http://127.0.0.1:8001";  // a gRPC URL is grpc://
  EXPECT_EQ(RunBenchCommand(o, out, err), 2);
  EXPECT_NE(err.str().find("grpc://"), std::string::npos) << err.str();
  o.url = "grpc://127.0.0.1:8001/rerank";
  EXPECT_EQ(RunBenchCommand(o, out, err), 2);
  o.url = "";
  for (const char* endpoint : {"v1-rerank", "template"}) {
    o.endpoint = endpoint;
    EXPECT_EQ(RunBenchCommand(o, out, err), 2) << endpoint;
  }
  o.endpoint = "kserve";  // without --model
  EXPECT_EQ(RunBenchCommand(o, out, err), 2);
  o.endpoint = "rerank";
  o.dump_requests = "/dev/null";
  EXPECT_EQ(RunBenchCommand(o, out, err), 2);
#endif
}

#ifdef TIDE_HAVE_GRPC
// A free loopback port for --grpc-port (bound, read, released: the server binds it right after).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

// `tide bench --protocol grpc` against a real `tide serve`: tei.v1 Rerank closed loop, KServe
// ModelInfer open loop; every call answered OK, the server's split read from the trailers.
TEST(TideBenchBlackBox, GrpcRerankAndModelInferAgainstARealServer) {
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kBertBaseUncasedTokenizer);
  char tmpl[] = "/tmp/tide-bench-grpc-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const fs::path tmp = tmpl;
  WriteDistilRepository(tmp / "repo");
  const fs::path tokenizer = tide::testing::SharedAssetPath(tide::testing::kBertBaseUncasedTokenizer);
  const int grpc_port = FreePort();
  ASSERT_GT(grpc_port, 0);
  tide::testing::ServerProcessOptions so;
  so.binary = TIDE_BINARY_PATH;
  so.args = {"serve", "--model-repository", (tmp / "repo").string(), "--grpc-port", std::to_string(grpc_port),
             "--log-level", "warn"};
  so.startup_timeout = std::chrono::milliseconds(120000);
  auto server = tide::testing::ServerProcess::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->WaitReady().ok()) << (*server)->Diagnostics();
  const std::string url = "grpc://127.0.0.1:" + std::to_string(grpc_port);

  struct Case {
    const char* endpoint;
    const char* load;
    const char* path;
  };
  for (const Case& c : {Case{"rerank", "--concurrency 2", "tei.v1.Rerank/Rerank"},
                        Case{"kserve", "--request-rate 20", "inference.GRPCInferenceService/ModelInfer"}}) {
    SCOPED_TRACE(c.endpoint);
    const fs::path json_path = tmp / (std::string(c.endpoint) + ".json");
    const std::string cmd = "TIDE_BENCH_PROTOCOL=grpc " + std::string(TIDE_BINARY_PATH) + " bench --url " + url +
                            " --endpoint " + c.endpoint + " --model distil --documents 4 --tokenizer " +
                            tokenizer.string() + " " + c.load + " --warmup 300ms --duration 2s" +
                            " --max-doc-tokens 64 --json " + json_path.string() + " > " + (tmp / "out").string() +
                            " 2> " + (tmp / "err").string();
    const int status = std::system(cmd.c_str());
    const std::string out = ReadFile(tmp / "out"), err = ReadFile(tmp / "err");
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd << "\nstdout:\n" << out << "\nstderr:\n" << err;
    EXPECT_NE(out.find(c.path), std::string::npos) << out;
    EXPECT_NE(out.find("server (mean per answer, from trailers)"), std::string::npos) << out;
    const nlohmann::json j = nlohmann::json::parse(ReadFile(json_path), nullptr, false);
    ASSERT_FALSE(j.is_discarded());
    EXPECT_EQ(j["protocol"], "grpc");
    EXPECT_EQ(j["path"], c.path);
    ASSERT_EQ(j["runs"].size(), 1u);
    const auto& run = j["runs"][0];
    EXPECT_EQ(run["error_count"], 0) << run["errors"].dump();
    EXPECT_GT(run["completed"].get<int>(), 0);
    EXPECT_DOUBLE_EQ(run["pairs_per_s"].get<double>(), 4 * run["qps"].get<double>());
    EXPECT_GT(run["latency_ms"]["p50"].get<double>(), 0);
    EXPECT_EQ(run["server_stages_source"], "trailers");
    ASSERT_TRUE(run["server_stages_ms"].contains("inference")) << run["server_stages_ms"].dump();
    EXPECT_GT(run["server_stages_ms"]["inference"]["mean_ms"].get<double>(), 0);
    // One trailer per OK answer: at least the measured ones (warm-up answers count too).
    EXPECT_GE(run["server_stages_ms"]["inference"]["count"].get<double>(), run["completed"].get<double>());
  }
  (*server)->Stop().IgnoreError();
  fs::remove_all(tmp);
}
#endif

TEST(RequestOrder, RoundRobinOrZipfPopularity) {
  auto rr = RequestOrder("round-robin", 4, 1024, 1);
  ASSERT_TRUE(rr.ok());
  EXPECT_EQ(*rr, (std::vector<size_t>{0, 1, 2, 3}));
  auto zipf = RequestOrder("zipf:1.1", 64, 1024, 7);
  ASSERT_TRUE(zipf.ok()) << zipf.status();
  ASSERT_EQ(zipf->size(), 1024u);
  std::vector<int> counts(64, 0);
  for (size_t i : *zipf) ++counts.at(i);
  // Rank 1 ~ 1/H(64, 1.1) ~ 22% of the draws; rank 1 beats rank 2 beats rank 10.
  EXPECT_GT(counts[0], 150);
  EXPECT_GT(counts[0], counts[1]);
  EXPECT_GT(counts[1], counts[9]);
  EXPECT_EQ(*RequestOrder("zipf:1.1", 64, 1024, 7), *zipf);  // deterministic for a seed
  for (const char* bad : {"zipf", "zipf:0", "zipf:-1", "zipf:x", "uniform"}) {
    EXPECT_EQ(RequestOrder(bad, 8, 16, 1).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace tide::cli
