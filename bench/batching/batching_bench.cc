// Batching benchmark: the server at saturation against the raw engine, in one run on the
// same machine, the same model and the same (query, document) pairs.
//
//  1. Workload: a fixed seed draws `--requests` rerank requests, each one query of
//     `--query-tokens` tokens and `--documents` documents whose token lengths follow a log-normal
//     fitted to the SciFact figures (p50 314, p90 500; its p99 is ~730); the server truncates each
//     pair to the model's max_sequence_length. Texts are whole vocabulary words of the model's
//     tokenizer, each one token, so token counts are exact.
//  2. Raw engine: OrtBackend on the same pairs, sorted by length, each batch padded only to its own
//     longest row, for rows per batch 4/8/16/32, with 1 session x 2 threads and with 2 sessions x
//     1 thread (two threads taking batches from one shared cursor). Its best pairs/s is the
//     reference.
//  3. Server: `tide serve` on a temporary model repository per configuration (instance count x
//     intra_op_threads, batch_grouping length | fifo), `--clients` closed-loop clients (one thread
//     and one keep-alive HttpClient each) cycling through the same requests; after `--warmup-s`,
//     completions during `--duration-s` are counted. Reports pairs/s, latency percentiles, client
//     and server CPU time.
//  4. Useful GFLOP/s counts real (unpadded) tokens only:
//       per pair of L tokens: 2 x L x W + layers x 4 x L^2 x hidden
//     where W = encoder weights per layer x layers (Q,K,V,O: 4 h^2 + 4 h; FFN: 2 h i + i + h;
//     two LayerNorms: 4 h), against a nominal peak = cores x clock x FLOP/cycle.
// Not a test: it asserts nothing; its output goes to bench/results/batching.txt and the README.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <fstream>
#include <mutex>
#include <numeric>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "config/model_config.h"
#include "config/tide_parameters.h"
#include "http_client.h"
#ifdef TIDE_HAVE_ROOFLINE
#include "roofline/roofline.h"
#endif
#include "nlohmann/json.hpp"
#include "optimize/fusion_check.h"
#include "runtime/ort_backend.h"
#include "serving/ort_options.h"
#include "tokenizer/tokenizer.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "batching_bench: %s\n", what.c_str());
  std::exit(1);
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

double CpuSeconds(int who) {
  rusage u{};
  getrusage(who, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// utime + stime of another process, from /proc/<pid>/stat.
double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0.0;
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

// ---- workload ----

struct Workload {
  std::vector<std::string> queries;                  // one per request
  std::vector<std::vector<std::string>> documents;   // [request][document]
  std::vector<std::string> bodies;                   // JSON request bodies
  std::vector<tide::tokenizer::Encoding> pairs;      // every pair of every request, truncated
  std::vector<size_t> request_tokens;                // real tokens of each request
};

// Vocabulary words that are a single token on their own.
std::vector<std::string> SingleTokenWords(const tide::tokenizer::Tokenizer& tok) {
  std::vector<std::string> words;
  std::vector<int64_t> ids;
  for (int64_t id = 1000; id < static_cast<int64_t>(tok.vocab_size()); ++id) {
    auto word = tok.IdToToken(id);
    if (!word || word->size() < 2) continue;
    if (!std::all_of(word->begin(), word->end(), [](unsigned char c) { return std::islower(c); })) continue;
    ids.clear();
    if (!tok.Tokenize(*word, &ids).ok() || ids.size() != 1) continue;
    words.push_back(*word);
  }
  return words;
}

std::string Words(const std::vector<std::string>& vocab, size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<size_t> pick(0, vocab.size() - 1);
  std::string text;
  for (size_t i = 0; i < n; ++i) {
    if (i) text += ' ';
    text += vocab[pick(rng)];
  }
  return text;
}

Workload MakeWorkload(const tide::tokenizer::Tokenizer& tok, size_t max_length, int requests, int documents,
                      int query_tokens, double median, double p90, uint32_t seed) {
  const std::vector<std::string> vocab = SingleTokenWords(tok);
  if (vocab.size() < 100) Die("the tokenizer has too few single-token words");
  std::mt19937 rng(seed);
  // Log-normal through the median and the 90th percentile (z = 1.2816).
  std::lognormal_distribution<double> length(std::log(median), std::log(p90 / median) / 1.2815516);
  Workload w;
  tide::tokenizer::EncodeOptions eo;
  eo.max_length = max_length;
  for (int r = 0; r < requests; ++r) {
    w.queries.push_back(Words(vocab, static_cast<size_t>(query_tokens), rng));
    std::vector<std::string> docs;
    for (int d = 0; d < documents; ++d) {
      docs.push_back(Words(vocab, static_cast<size_t>(std::clamp(std::lround(length(rng)), 8L, 4000L)), rng));
    }
    std::vector<std::string_view> views(docs.begin(), docs.end());
    std::vector<tide::tokenizer::Encoding> rows;
    if (auto s = tok.EncodePairs(w.queries.back(), views, eo, &rows); !s.ok()) Die(s.ToString());
    size_t tokens = 0;
    for (auto& row : rows) {
      tokens += row.ids.size();
      w.pairs.push_back(std::move(row));
    }
    w.request_tokens.push_back(tokens);
    w.bodies.push_back(nlohmann::json{{"query", w.queries.back()}, {"texts", docs}}.dump());
    w.documents.push_back(std::move(docs));
  }
  return w;
}

// ---- FLOPs and peak ----

struct ModelShape {
  int layers = 6;
  int hidden = 384;
  int intermediate = 1536;
  double WeightsPerLayer() const {
    const double h = hidden, i = intermediate;
    return 4 * h * h + 4 * h + 2 * h * i + i + h + 4 * h;
  }
  // Useful FLOPs of one pair of `len` real tokens.
  double PairFlops(double len) const {
    return 2.0 * len * WeightsPerLayer() * layers + layers * 4.0 * len * len * hidden;
  }
};

struct Ceilings {  // measured through ONNX Runtime (bench/roofline); 0: not measured
  double fp32 = 0;
  double int8 = 0;
  double fp32_per_cpu_s = 0;  // GFLOP per CPU-second, 1 thread: compare with the GFLOP/CPU-s columns
};

struct Peak {
  int cores = 1;
  double ghz = 0;
  std::string ghz_source;
  int flops_per_cycle = 8;
  std::string fpc_source;
  double gflops() const { return cores * ghz * flops_per_cycle; }
};

Peak NominalPeak() {
  Peak p;
  p.cores = static_cast<int>(std::thread::hardware_concurrency());
  std::ifstream in("/proc/cpuinfo");
  std::string line, model, flags;
  double mhz = 0;
  while (std::getline(in, line)) {
    auto value = [&] { return line.substr(line.find(':') + 2); };
    if (model.empty() && line.rfind("model name", 0) == 0) model = value();
    if (mhz == 0 && line.rfind("cpu MHz", 0) == 0) mhz = std::stod(value());
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = " " + value() + " ";
  }
  std::smatch m;
  if (std::regex_search(model, m, std::regex(R"(([0-9.]+)\s*GHz)"))) {
    p.ghz = std::stod(m[1]);
    p.ghz_source = "model name \"" + model + "\"";
  } else {
    p.ghz = mhz / 1000.0;
    p.ghz_source = "/proc/cpuinfo cpu MHz (model name \"" + model + "\" gives none)";
  }
  auto has = [&](const char* f) { return flags.find(std::string(" ") + f + " ") != std::string::npos; };
  if (has("avx512f")) {
    p.flops_per_cycle = 64;
    p.fpc_source = "AVX-512 + FMA: 2 FMA units x 16 fp32 lanes x 2";
  } else if (has("avx2") && has("fma")) {
    p.flops_per_cycle = 32;
    p.fpc_source = "AVX2 + FMA: 2 FMA units x 8 fp32 lanes x 2";
  } else if (has("avx")) {
    p.flops_per_cycle = 16;
    p.fpc_source = "AVX: 1 add + 1 mul unit x 8 fp32 lanes";
  } else {
    p.flops_per_cycle = 8;
    p.fpc_source = "SSE: 1 add + 1 mul unit x 4 fp32 lanes";
  }
  return p;
}

// ---- raw engine ----

tide::runtime::TokenBatch MakeBatch(const std::vector<const tide::tokenizer::Encoding*>& rows, bool types,
                                    int64_t pad_id) {
  int64_t seq = 0;
  for (const auto* r : rows) seq = std::max<int64_t>(seq, static_cast<int64_t>(r->ids.size()));
  tide::runtime::TokenBatch b;
  b.Resize(static_cast<int64_t>(rows.size()), seq, types);
  std::fill(b.input_ids.begin(), b.input_ids.end(), pad_id);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::copy(rows[i]->ids.begin(), rows[i]->ids.end(), b.input_ids.begin() + i * seq);
    std::copy(rows[i]->attention_mask.begin(), rows[i]->attention_mask.end(), b.attention_mask.begin() + i * seq);
    if (types) std::copy(rows[i]->type_ids.begin(), rows[i]->type_ids.end(), b.token_type_ids.begin() + i * seq);
  }
  return b;
}

struct RawResult {
  int sessions = 0, threads = 0, rows = 0;
  double pairs_per_s = 0, seconds = 0, cpu_s = 0;
};

// Runs every batch `passes` times; `sessions` threads share one cursor over the batches.
RawResult RunRaw(const std::vector<std::unique_ptr<tide::runtime::OrtBackend>>& backends,
                 const std::vector<tide::runtime::TokenBatch>& batches, size_t pairs, int passes, int threads,
                 int rows) {
  // Warm-up: the largest batch once on each session, so the arena has its final size.
  const auto largest = std::max_element(batches.begin(), batches.end(), [](const auto& a, const auto& b) {
    return a.batch * a.seq_len < b.batch * b.seq_len;
  });
  for (const auto& be : backends) {
    tide::runtime::Logits out;
    if (auto s = be->Run(*largest, &out); !s.ok()) Die(s.ToString());
  }
  std::atomic<size_t> next{0};
  const size_t total = batches.size() * static_cast<size_t>(passes);
  const auto t0 = Clock::now();
  const double cpu0 = CpuSeconds(RUSAGE_SELF);
  std::vector<std::thread> workers;
  for (const auto& be : backends) {
    workers.emplace_back([&, backend = be.get()] {
      tide::runtime::Logits out;
      for (size_t i; (i = next.fetch_add(1)) < total;) {
        if (auto s = backend->Run(batches[i % batches.size()], &out); !s.ok()) Die(s.ToString());
      }
    });
  }
  for (auto& t : workers) t.join();
  RawResult r;
  r.sessions = static_cast<int>(backends.size());
  r.threads = threads;
  r.rows = rows;
  r.seconds = Seconds(Clock::now() - t0);
  r.cpu_s = CpuSeconds(RUSAGE_SELF) - cpu0;
  r.pairs_per_s = static_cast<double>(pairs * passes) / r.seconds;
  return r;
}

// ---- server ----

struct ServerConfig {
  int instances = 1;
  int threads = 2;
  std::string grouping = "length";
  std::string name() const {
    return std::to_string(instances) + "x" + std::to_string(threads) + " " + grouping;
  }
};

struct ServerResult {
  ServerConfig config;
  double scored_per_s = 0;  // pairs the server ran in the window (its inference_count)
  double pairs_per_s = 0, tokens_per_s = 0, p50 = 0, p95 = 0, p99 = 0;
  size_t requests = 0, errors = 0;
  double client_cpu_s = 0, server_cpu_s = 0, window_s = 0;
};

void WriteRepository(const fs::path& repo, const fs::path& model_dir, const ServerConfig& c, int max_batch_size,
                     int delay_us, int64_t max_length) {
  const fs::path m = repo / "minilm-l6";
  fs::create_directories(m / "1");
  fs::create_symlink(fs::absolute(model_dir / "1" / "model.onnx"), m / "1" / "model.onnx");
  fs::create_symlink(fs::absolute(model_dir / "tokenizer.json"), m / "tokenizer.json");
  std::ofstream out(m / "config.pbtxt");
  out << "name: \"minilm-l6\"\nbackend: \"onnxruntime\"\nmax_batch_size: " << max_batch_size << "\n"
      << "dynamic_batching { max_queue_delay_microseconds: " << delay_us << " }\n"
      << "instance_group [ { count: " << c.instances << " kind: KIND_CPU } ]\n"
      << "parameters { key: \"task\" value { string_value: \"rerank\" } }\n"
      << "parameters { key: \"tokenizer\" value { string_value: \"tokenizer.json\" } }\n"
      << "parameters { key: \"max_sequence_length\" value { string_value: \"" << max_length << "\" } }\n"
      << "parameters { key: \"intra_op_threads\" value { string_value: \"" << c.threads << "\" } }\n"
      << "parameters { key: \"batch_grouping\" value { string_value: \"" << c.grouping << "\" } }\n";
}

struct Server {
  pid_t pid = -1;
  uint16_t port = 0;
};

Server StartServer(const std::string& tide, const fs::path& repo, const fs::path& log) {
  // No deadline: a saturated closed loop of 50 clients queues for longer than the default 30 s, and
  // this measures throughput, not shedding.
  std::vector<std::string> args = {tide, "serve", "--model-repository", repo.string(), "--port", "0",
                                   "--log-level", "warn", "--default-timeout-ms", "0"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  Server s;
  if (posix_spawn(&s.pid, tide.c_str(), &fa, nullptr, argv.data(), environ) != 0) Die("cannot start " + tide);
  posix_spawn_file_actions_destroy(&fa);
  const std::regex listening(R"(listening on http://[^ :]+:([0-9]+))");
  for (int i = 0; i < 6000; ++i) {
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::smatch m;
    if (std::regex_search(text, m, listening)) {
      s.port = static_cast<uint16_t>(std::stoi(m[1]));
      return s;
    }
    int status = 0;
    if (waitpid(s.pid, &status, WNOHANG) == s.pid) Die("tide serve exited:\n" + text);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // polling a child's log, not a test
  }
  kill(s.pid, SIGKILL);
  Die("tide serve did not start within 600 s");
}

// The first "inference_count" anywhere in the model's statistics.
uint64_t InferenceCount(uint16_t port) {
  tide::testing::HttpClient client("127.0.0.1", port, std::chrono::milliseconds(60000));
  auto r = client.Get("/v2/models/minilm-l6/stats");
  if (r.status != 200) Die("stats answered " + std::to_string(r.status) + " " + r.error);
  std::function<std::optional<uint64_t>(const nlohmann::json&)> find =
      [&](const nlohmann::json& j) -> std::optional<uint64_t> {
    if (j.is_object()) {
      if (auto it = j.find("inference_count"); it != j.end() && it->is_number()) return it->get<uint64_t>();
    }
    if (j.is_structured()) {
      for (const auto& v : j) {
        if (auto f = find(v)) return f;
      }
    }
    return std::nullopt;
  };
  auto n = find(nlohmann::json::parse(r.body, nullptr, false));
  if (!n) Die("no inference_count in " + r.body.substr(0, 300));
  return *n;
}

ServerResult RunServer(const Server& server, const Workload& w, const ServerConfig& c, int clients, double warmup_s,
                       double duration_s, int documents) {
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<double> latencies_ms;
  size_t done = 0, tokens = 0, errors = 0;
  const auto start = Clock::now();
  const auto window_begin = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(warmup_s));
  const auto window_end =
      window_begin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(duration_s));
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      tide::testing::HttpClient client("127.0.0.1", server.port, std::chrono::milliseconds(1'800'000));
      for (size_t k = static_cast<size_t>(i); !stop.load(); ++k) {
        const size_t r = k % w.bodies.size();
        const auto t0 = Clock::now();
        auto resp = client.Post("/rerank", w.bodies[r]);
        const auto t1 = Clock::now();
        if (stop.load()) break;
        std::lock_guard<std::mutex> lock(mu);
        if (resp.status != 200) {
          ++errors;
          if (errors <= 3) std::fprintf(stderr, "  status %d: %s %s\n", resp.status, resp.error.c_str(), resp.body.substr(0, 200).c_str());
          continue;
        }
        if (t1 >= window_begin && t1 < window_end) {
          ++done;
          tokens += w.request_tokens[r];
          latencies_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        }
      }
    });
  }
  std::this_thread::sleep_until(window_begin);
  const double client_cpu0 = CpuSeconds(RUSAGE_SELF), server_cpu0 = ProcessCpuSeconds(server.pid);
  const uint64_t scored0 = InferenceCount(server.port);
  const auto scored_t0 = Clock::now();
  std::this_thread::sleep_until(window_end);
  ServerResult res;
  res.scored_per_s = static_cast<double>(InferenceCount(server.port) - scored0) / Seconds(Clock::now() - scored_t0);
  res.client_cpu_s = CpuSeconds(RUSAGE_SELF) - client_cpu0;
  res.server_cpu_s = ProcessCpuSeconds(server.pid) - server_cpu0;
  stop.store(true);
  kill(server.pid, SIGKILL);  // in-flight requests fail; their clients see `stop` and leave
  int status = 0;
  waitpid(server.pid, &status, 0);
  for (auto& t : threads) t.join();
  res.config = c;
  res.window_s = duration_s;
  res.requests = done;
  res.errors = errors;
  res.pairs_per_s = static_cast<double>(done * static_cast<size_t>(documents)) / duration_s;
  res.tokens_per_s = static_cast<double>(tokens) / duration_s;
  res.p50 = Percentile(latencies_ms, 0.50);
  res.p95 = Percentile(latencies_ms, 0.95);
  res.p99 = Percentile(latencies_ms, 0.99);
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tide batching benchmark"};
  std::string tide = "build/tide", model_dir = "models/minilm-l6", work_dir;
  int requests = 8, documents = 16, query_tokens = 21, clients = 50, raw_passes = 1, max_batch_size = 32,
      delay_us = 5000;
  double median = 314, p90 = 500, warmup_s = 20, duration_s = 60;
  uint32_t seed = 42;
  ModelShape shape;
  std::vector<std::string> configs = {"1x2:length", "2x1:length", "1x2:fifo", "2x1:fifo"};
  std::vector<int> raw_rows = {4, 8, 16, 32};
  double roofline_s = 1.0;
  app.add_option("--roofline-s", roofline_s,
                 "seconds per kernel of the measured FP32 / INT8 ceilings at the start and the end (0: skip)");
  app.add_option("--tide", tide, "the tide binary");
  app.add_option("--model-dir", model_dir, "model folder (config.pbtxt, tokenizer.json, 1/model.onnx)");
  app.add_option("--work-dir", work_dir, "where temporary model repositories go (default: a new temp folder)");
  app.add_option("--requests", requests, "distinct requests, cycled by the clients; the raw engine runs all");
  app.add_option("--documents", documents);
  app.add_option("--query-tokens", query_tokens);
  app.add_option("--doc-median-tokens", median);
  app.add_option("--doc-p90-tokens", p90);
  app.add_option("--seed", seed);
  app.add_option("--clients", clients);
  app.add_option("--warmup-s", warmup_s);
  app.add_option("--duration-s", duration_s);
  app.add_option("--raw-passes", raw_passes, "passes over the pairs per raw-engine setting");
  app.add_option("--raw-rows", raw_rows, "rows per batch tried on the raw engine");
  app.add_option("--configs", configs, "server configurations INSTANCESxTHREADS:length|fifo");
  app.add_option("--max-batch-size", max_batch_size);
  app.add_option("--max-queue-delay-us", delay_us);
  app.add_option("--layers", shape.layers);
  app.add_option("--hidden", shape.hidden);
  app.add_option("--intermediate", shape.intermediate);
  CLI11_PARSE(app, argc, argv);

  auto config = tide::config::ReadModelConfigFile(model_dir + "/config.pbtxt");
  if (!config.ok()) Die(config.status().ToString());
  auto params = tide::config::TideParameters::FromConfig(*config, model_dir + "/config.pbtxt");
  if (!params.ok()) Die(params.status().ToString());
  auto tok = tide::tokenizer::Tokenizer::FromFile(model_dir + "/" + params->tokenizer);
  if (!tok.ok()) Die(tok.status().ToString());
  const int64_t max_length = params->EffectiveMaxSequenceLength((*tok)->default_max_length());

  std::printf("load average at start: %s (%u cores; the machine is shared with other builds)\n",
              LoadAverage().c_str(), std::thread::hardware_concurrency());
  const Workload w = MakeWorkload(**tok, static_cast<size_t>(max_length), requests, documents, query_tokens, median,
                                  p90, seed);
  // The raw engine runs the graph the server serves: with graph_fusion = auto (the default) the
  // server fuses attention and skip-layernorm at load, so the raw engine gets the same fused model.
  const std::string model_file = model_dir + "/1/model.onnx";
  std::string raw_model_data;  // empty: the file as exported
  std::string raw_graph = "as exported (graph_fusion off)";
  if (params->graph_fusion == tide::config::GraphFusion::kAuto) {
    auto signature = tide::runtime::OrtBackend::ReadSignature(model_file);
    if (!signature.ok()) Die(signature.status().ToString());
    tide::optimize::FusedModel fused = tide::optimize::PrepareFusedModel(
        tide::serving::MakeOrtOptions(*params, model_file),
        tide::optimize::ProbeBatch(*signature, static_cast<int64_t>((*tok)->vocab_size()), max_length));
    raw_graph = fused.fused ? "fused like the server's: " + fused.report.Summary() : "as exported: " + fused.reason;
    if (fused.fused) raw_model_data = std::move(fused.model_data);
  }
  std::printf("raw engine graph: %s\n", raw_graph.c_str());
  std::vector<double> lens;
  double real_tokens = 0, flops = 0;
  for (const auto& p : w.pairs) {
    lens.push_back(static_cast<double>(p.ids.size()));
    real_tokens += static_cast<double>(p.ids.size());
    flops += shape.PairFlops(static_cast<double>(p.ids.size()));
  }
  const double flops_per_pair = flops / static_cast<double>(w.pairs.size());
  std::printf("workload: seed %u, %d requests x (1 query of %d tokens + %d documents, log-normal lengths p50 %.0f "
              "p90 %.0f), truncated at %lld\n",
              seed, requests, query_tokens, documents, median, p90, static_cast<long long>(max_length));
  std::printf("  pair lengths (with special tokens): p50 %.0f, p90 %.0f, p99 %.0f, max %.0f, mean %.1f\n",
              Percentile(lens, 0.5), Percentile(lens, 0.9), Percentile(lens, 0.99), Percentile(lens, 1.0),
              real_tokens / static_cast<double>(lens.size()));
  std::printf("useful FLOPs per pair of L real tokens = 2 x L x layers x W + layers x 4 x L^2 x hidden\n");
  std::printf("  layers %d, hidden %d, intermediate %d -> W = 4h^2+4h + 2hi+i+h + 4h = %.0f weights/layer\n",
              shape.layers, shape.hidden, shape.intermediate, shape.WeightsPerLayer());
  std::printf("  mean over the workload: %.1f MFLOP per pair\n", flops_per_pair / 1e6);
  const Peak peak = NominalPeak();
  std::printf("nominal FP32 peak = %d cores x %.3f GHz (%s) x %d FLOP/cycle (%s) = %.1f GFLOP/s\n", peak.cores,
              peak.ghz, peak.ghz_source.c_str(), peak.flops_per_cycle, peak.fpc_source.c_str(), peak.gflops());
  // Measured ceilings (bench/roofline): at the start, and again at the end; the per-row columns
  // use the start's, the ratios both.
  const int all_threads = static_cast<int>(std::thread::hardware_concurrency());
  auto measure_ceilings = [&](const char* when) -> Ceilings {
    Ceilings c;
    if (roofline_s <= 0) return c;
#ifndef TIDE_HAVE_ROOFLINE
    std::printf("measured ceilings (%s): unavailable (built without libonnx-dev)\n", when);
    return c;
#else
    tide::bench::RooflineOptions ro;
    ro.kernels = {tide::bench::RooflineKernel::kFp32MatMul, tide::bench::RooflineKernel::kDynamicQuantizeMatMul};
    ro.threads = {1, all_threads};
    ro.allow_spinning = false;  // as the server runs; spinning would count idle waits as CPU time
    ro.rounds = 1;
    ro.seconds_per_round = roofline_s;
    auto rows = tide::bench::MeasureRoofline(ro);
    if (!rows.ok()) {
      std::printf("measured ceilings (%s): unavailable: %s\n", when, std::string(rows.status().message()).c_str());
      return c;
    }
    c.fp32 = tide::bench::RooflineCeiling(*rows, tide::bench::RooflineKernel::kFp32MatMul, all_threads);
    c.int8 = tide::bench::RooflineCeiling(*rows, tide::bench::RooflineKernel::kDynamicQuantizeMatMul, all_threads);
    for (const auto& r : *rows) {
      if (r.kernel == tide::bench::RooflineKernel::kFp32MatMul && r.threads == 1) c.fp32_per_cpu_s = r.gflops_per_cpu_s;
    }
    std::printf("measured ceilings (%s; %d threads, [1024 x 1024] MatMul through ONNX Runtime; load %s): FP32 %.1f "
                "GFLOP/s (%.1f%% of nominal), INT8 DynamicQuantizeMatMul %.1f GOP/s; FP32 per CPU-second (1 thread) %.1f "
                "GFLOP/CPU-s\n",
                when, all_threads, LoadAverage().c_str(), c.fp32, 100.0 * c.fp32 / peak.gflops(), c.int8,
                c.fp32_per_cpu_s);
    return c;
#endif
  };
  const Ceilings start_ceilings = measure_ceilings("start");
  auto of_fp32 = [&](double gflops) { return start_ceilings.fp32 > 0 ? 100.0 * gflops / start_ceilings.fp32 : 0.0; };

  // Raw engine.
  std::vector<const tide::tokenizer::Encoding*> sorted;
  for (const auto& p : w.pairs) sorted.push_back(&p);
  std::stable_sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->ids.size() < b->ids.size(); });
  std::printf("\nraw engine (OrtBackend, pairs sorted by length, each batch padded to its longest row; %zu pairs x %d "
              "passes):\n",
              sorted.size(), raw_passes);
  std::printf("  %-22s %10s %10s %10s %10s %14s %9s\n", "sessions x threads", "rows", "pairs/s", "GFLOP/s", "CPU s",
              "GFLOP/CPU-s", "%fp32ceil");
  RawResult best;
  for (const auto& [sessions, threads] : std::vector<std::pair<int, int>>{{1, 2}, {2, 1}}) {
    tide::config::TideParameters p = *params;
    p.intra_op_threads = threads;
    std::vector<std::unique_ptr<tide::runtime::OrtBackend>> backends;
    for (int i = 0; i < sessions; ++i) {
      tide::runtime::OrtOptions o = tide::serving::MakeOrtOptions(p, model_file);
      if (!raw_model_data.empty()) {
        o.model_path.clear();
        o.model_data = raw_model_data;
      }
      auto be = tide::runtime::OrtBackend::Create(o);
      if (!be.ok()) Die(be.status().ToString());
      backends.push_back(*std::move(be));
    }
    const bool types = !backends[0]->signature().token_type_ids_name.empty();
    for (int rows : raw_rows) {
      std::vector<tide::runtime::TokenBatch> batches;
      for (size_t i = 0; i < sorted.size(); i += static_cast<size_t>(rows)) {
        std::vector<const tide::tokenizer::Encoding*> chunk(
            sorted.begin() + static_cast<ptrdiff_t>(i),
            sorted.begin() + static_cast<ptrdiff_t>(std::min(sorted.size(), i + static_cast<size_t>(rows))));
        batches.push_back(MakeBatch(chunk, types, (*tok)->pad_id()));
      }
      RawResult r = RunRaw(backends, batches, sorted.size(), raw_passes, threads, rows);
      std::printf("  %-22s %10d %10.2f %10.1f %10.1f %14.1f %8.1f%%\n",
                  (std::to_string(sessions) + " x " + std::to_string(threads)).c_str(), rows, r.pairs_per_s,
                  r.pairs_per_s * flops_per_pair / 1e9, r.cpu_s,
                  static_cast<double>(sorted.size() * raw_passes) * flops_per_pair / 1e9 / r.cpu_s,
                  of_fp32(r.pairs_per_s * flops_per_pair / 1e9));
      std::fflush(stdout);
      if (r.pairs_per_s > best.pairs_per_s) best = r;
    }
  }
  std::printf("  best: %d x %d, %d rows: %.2f pairs/s\n", best.sessions, best.threads, best.rows, best.pairs_per_s);

  // Server.
  fs::path work = work_dir.empty() ? fs::temp_directory_path() / ("tide-batching-" + std::to_string(getpid()))
                                   : fs::path(work_dir);
  std::vector<ServerResult> results;
  std::printf("\nserver at saturation: %d closed-loop clients, %.0f s warm-up, %.0f s window, max_batch_size %d, "
              "max_queue_delay %d us\n",
              clients, warmup_s, duration_s, max_batch_size, delay_us);
  std::printf("  (pairs/s: pairs the server scored in the window, from its inference_count; done/s: pairs of the\n"
              "   requests completed in the window; GFLOP/CPU-s: useful FLOPs per second of the server's CPU time)\n");
  std::printf("  %-12s %8s %7s %8s %8s %9s %8s %8s %5s %4s %8s %8s %11s %s\n", "config", "pairs/s", "xraw", "done/s",
              "GFLOP/s", "%fp32ceil", "P50 ms", "P95 ms", "reqs", "err", "client s", "server s", "GFLOP/CPU-s", "load");
  for (const std::string& spec : configs) {
    ServerConfig c;
    std::smatch m;
    if (!std::regex_match(spec, m, std::regex(R"(([0-9]+)x([0-9]+):(length|fifo))"))) Die("bad --configs " + spec);
    c.instances = std::stoi(m[1]);
    c.threads = std::stoi(m[2]);
    c.grouping = m[3];
    const fs::path repo = work / (std::to_string(c.instances) + "x" + std::to_string(c.threads) + "-" + c.grouping);
    fs::remove_all(repo);
    WriteRepository(repo, model_dir, c, max_batch_size, delay_us, max_length);
    Server s = StartServer(tide, repo, work / (repo.filename().string() + ".log"));
    ServerResult r = RunServer(s, w, c, clients, warmup_s, duration_s, documents);
    results.push_back(r);
    std::printf("  %-12s %8.2f %7.3f %8.2f %8.1f %8.1f%% %8.0f %8.0f %5zu %4zu %8.2f %8.1f %11.1f %s\n", c.name().c_str(),
                r.scored_per_s, r.scored_per_s / best.pairs_per_s, r.pairs_per_s, r.scored_per_s * flops_per_pair / 1e9,
                of_fp32(r.scored_per_s * flops_per_pair / 1e9), r.p50, r.p95, r.requests, r.errors, r.client_cpu_s, r.server_cpu_s,
                r.scored_per_s * r.window_s * flops_per_pair / 1e9 / std::max(r.server_cpu_s, 1e-9),
                LoadAverage().c_str());
    std::fflush(stdout);
  }
  std::printf("  (P99 of each: ");
  for (const auto& r : results) std::printf("%s %.0f ms; ", r.config.name().c_str(), r.p99);
  std::printf(")\n");
  fs::remove_all(work);

  auto find = [&](int n, int t, const char* g) -> const ServerResult* {
    for (const auto& r : results) {
      if (r.config.instances == n && r.config.threads == t && r.config.grouping == g) return &r;
    }
    return nullptr;
  };
  const ServerResult* top = nullptr;
  for (const auto& r : results) {
    if (!top || r.scored_per_s > top->scored_per_s) top = &r;
  }
  const Ceilings end_ceilings = measure_ceilings("end");
  std::printf("\nratios:\n");
  if (top) {
    const double gflops = top->scored_per_s * flops_per_pair / 1e9;
    std::printf("  server best (%s) / raw engine best: %.3f (target >= 0.95)\n", top->config.name().c_str(),
                top->scored_per_s / best.pairs_per_s);
    std::printf("  server best useful GFLOP/s / nominal peak: %.1f / %.1f = %.1f%% (target >= 75%%)\n", gflops,
                peak.gflops(), 100.0 * gflops / peak.gflops());
    std::printf("  raw engine best useful GFLOP/s / nominal peak: %.1f / %.1f = %.1f%%\n",
                best.pairs_per_s * flops_per_pair / 1e9, peak.gflops(),
                100.0 * best.pairs_per_s * flops_per_pair / 1e9 / peak.gflops());
    for (const auto& [when, c] : {std::pair<const char*, Ceilings>{"start", start_ceilings}, {"end", end_ceilings}}) {
      if (c.fp32 <= 0) continue;
      std::printf("  server best useful GFLOP/s / measured FP32 ceiling (%s): %.1f / %.1f = %.1f%%; raw engine best: "
                  "%.1f%%; INT8 ceiling %.1f GOP/s (server best / it: %.1f%%)\n",
                  when, gflops, c.fp32, 100.0 * gflops / c.fp32, 100.0 * best.pairs_per_s * flops_per_pair / 1e9 / c.fp32,
                  c.int8, c.int8 > 0 ? 100.0 * gflops / c.int8 : 0.0);
      if (c.fp32_per_cpu_s > 0) {
        std::printf("  server best GFLOP/CPU-s / measured FP32 GFLOP/CPU-s (%s, 1 thread): %.1f / %.1f = %.1f%%\n", when,
                    top->scored_per_s * top->window_s * flops_per_pair / 1e9 / std::max(top->server_cpu_s, 1e-9),
                    c.fp32_per_cpu_s,
                    100.0 * top->scored_per_s * top->window_s * flops_per_pair / 1e9 /
                        std::max(top->server_cpu_s, 1e-9) / c.fp32_per_cpu_s);
      }
    }
  }
  for (auto [n, t] : std::vector<std::pair<int, int>>{{1, 2}, {2, 1}}) {
    const ServerResult *len = find(n, t, "length"), *fifo = find(n, t, "fifo");
    if (len && fifo && fifo->scored_per_s > 0) {
      std::printf("  %dx%d: length-sorted / fifo pairs/s: %.3f\n", n, t, len->scored_per_s / fifo->scored_per_s);
    }
  }
  for (const char* g : {"length", "fifo"}) {
    const ServerResult *a = find(2, 1, g), *b = find(1, 2, g);
    if (a && b && b->scored_per_s > 0) {
      std::printf("  %s: 2x1 / 1x2 pairs/s: %.3f, P50 latency %.3f\n", g, a->scored_per_s / b->scored_per_s,
                  b->p50 > 0 ? a->p50 / b->p50 : 0.0);
    }
  }
  std::printf("  per-core peak %.1f GFLOP/s: GFLOP/CPU-s above divided by it is the efficiency per CPU second\n"
              "  actually received, which the other builds on the machine do not change\n",
              peak.ghz * peak.flops_per_cycle);
  std::printf("load average at end: %s\n", LoadAverage().c_str());
  return 0;
}
