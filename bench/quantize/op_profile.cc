// Where a model's time goes, per operator type, through ONNX Runtime's own profiler: each variant
// is fused the way `tide serve` fuses it at load (graph_fusion = auto: src/optimize), opened with
// the server's session settings (1 intra-op thread per instance, no spinning, all graph
// optimisations), and run on one full batch in alternating rounds (variant A, variant B, A, B...),
// so other load on a shared machine spreads over every variant alike.
//
//   op_profile --variant fp32=models/minilm-l6/1/model.onnx --variant int8=/tmp/int8.onnx
//              [--tide-variant NAME=MODEL]  (fused with tide's kernels, attention_kernel and
//                                            elementwise_kernel "tide", the server's default with
//                                            AVX-512; --variant: ONNX Runtime's operators, both
//                                            "onnxruntime")
//              [--tide-attention-variant NAME=MODEL]  (tide's attention kernel only)
//              [--tide-bf16-variant NAME=MODEL]  (as --tide-variant, attention precision "bf16": what
//                                                 the server runs for an INT8 model with AVX512_BF16)
//              [--tide-pruned-variant NAME=MODEL]  (the server's default load, from
//                                                   serving::LoadFusionOptions: tide's kernels, the
//                                                   last layer on the pooled token (prune_last_layer),
//                                                   BF16 attention products for an INT8 model with
//                                                   AVX512_BF16; the other tide variants run the
//                                                   last layer whole)
//              [--batch 16] [--seq 320] [--threads 1] [--rounds 3] [--iters 2] [--no-fuse]
//              [--optimized-dir DIR]   (writes ONNX Runtime's optimized graph of each variant there)
//              [--keep-profile]        (keeps ONNX Runtime's profile JSON of each variant, per node)
//              [--session-config KEY=VALUE ...]  (an ONNX Runtime session config entry, every variant)
//
// Prints, per variant, ms per run by operator type (the kernels ONNX Runtime actually ran after its
// own fusions), their share and count per run, then one table of every operator type side by side
// with the ratio to the first variant. The first two runs of each session (warm-up) are not
// counted: ONNX Runtime plans a shape's memory pattern on the first run at that shape and allocates
// it on the second, whose first touches of the new arena memory (page faults) land in whichever
// kernels write there first (a decoder's SwiGLU Mul took 15x its steady time in that run).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "config/tide_parameters.h"
#include "onnx_graph/graph_util.h"
#include "onnx_graph/model_io.h"
#include "onnxruntime_cxx_api.h"
#include "optimize/transformer_fusion.h"
#include "runtime/tide_ops.h"
#include "serving/model_loader.h"

namespace {

struct Variant {
  std::string name, path;
  bool tide_attention = false;    // --tide-variant, --tide-attention-variant: ai.tide.PaddedAttention
  bool tide_elementwise = false;  // --tide-variant: ai.tide.BiasGelu, LayerNorm, SkipLayerNorm
  bool tide_attention_bf16 = false;  // --tide-bf16-variant: also attention products in BF16
  bool prune_last_layer = false;     // --tide-pruned-variant: the last layer on the pooled token
};

struct Args {
  std::vector<Variant> variants;
  int64_t batch = 16, seq = 320;
  int threads = 1, rounds = 3, iters = 2;
  bool fuse = true;
  bool drop_attention_mask = false;  // timing experiment only: results differ on padded rows
  bool keep_profile = false;
  std::vector<std::pair<std::string, std::string>> session_config;
  std::string optimized_dir;
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "op_profile: %s\nusage: op_profile --variant NAME=MODEL [--variant NAME=MODEL ...] [--tide-variant NAME=MODEL ...] [--tide-attention-variant NAME=MODEL ...] [--tide-bf16-variant NAME=MODEL ...] [--tide-pruned-variant NAME=MODEL ...] [--batch 16] "
               "[--seq 320] [--threads 1] [--rounds 3] [--iters 2] [--no-fuse] [--optimized-dir DIR] [--keep-profile] [--session-config KEY=VALUE]\n",
               why.c_str());
  std::exit(2);
}

int PositiveInt(const std::string& v, const char* flag) {
  int n = 0;
  if (!absl::SimpleAtoi(v, &n) || n < 1) Usage(std::string(flag) + " wants a positive integer");
  return n;
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--no-fuse") {
      a.fuse = false;
      continue;
    }
    if (flag == "--drop-attention-mask") {
      a.drop_attention_mask = true;
      continue;
    }
    if (flag == "--keep-profile") {
      a.keep_profile = true;
      continue;
    }
    if (i + 1 >= argc) Usage(flag + " lacks its value");
    const std::string v = argv[++i];
    if (flag == "--variant" || flag == "--tide-variant" || flag == "--tide-attention-variant" ||
        flag == "--tide-bf16-variant" || flag == "--tide-pruned-variant") {
      std::vector<std::string> kv = absl::StrSplit(v, absl::MaxSplits('=', 1));
      if (kv.size() != 2 || kv[0].empty() || kv[1].empty()) Usage(flag + " wants NAME=MODEL");
      const bool all_tide = flag == "--tide-variant" || flag == "--tide-bf16-variant" || flag == "--tide-pruned-variant";
      a.variants.push_back(
          {kv[0], kv[1], flag != "--variant", all_tide, flag == "--tide-bf16-variant", flag == "--tide-pruned-variant"});
    } else if (flag == "--batch") {
      a.batch = PositiveInt(v, "--batch");
    } else if (flag == "--seq") {
      a.seq = PositiveInt(v, "--seq");
    } else if (flag == "--threads") {
      a.threads = PositiveInt(v, "--threads");
    } else if (flag == "--rounds") {
      a.rounds = PositiveInt(v, "--rounds");
    } else if (flag == "--iters") {
      a.iters = PositiveInt(v, "--iters");
    } else if (flag == "--session-config") {
      std::vector<std::string> kv = absl::StrSplit(v, absl::MaxSplits('=', 1));
      if (kv.size() != 2 || kv[0].empty()) Usage("--session-config wants KEY=VALUE");
      a.session_config.emplace_back(kv[0], kv[1]);
    } else if (flag == "--optimized-dir") {
      a.optimized_dir = v;
    } else {
      Usage("unknown flag " + flag);
    }
  }
  if (a.variants.empty()) Usage("no --variant");
  return a;
}

Ort::Env& Env() {
  static Ort::Env* env = new Ort::Env(ORT_LOGGING_LEVEL_WARNING, "tide-op-profile");
  return *env;
}

struct Session {
  Variant variant;
  std::string fusion;  // the fusion report, or why nothing was fused
  std::unique_ptr<Ort::Session> session;
  std::vector<std::string> input_names;
  std::string output_name;
  std::vector<double> run_ms;  // timed runs (wall clock)
  std::vector<double> cpu_ms;  // timed runs (this thread's CPU time: with 1 intra-op thread, the whole run)
};

Session Open(const Args& args, const Variant& v) {
  Session s;
  s.variant = v;
  Ort::SessionOptions so;
  so.SetIntraOpNumThreads(args.threads);
  so.SetInterOpNumThreads(1);
  so.SetExecutionMode(ORT_SEQUENTIAL);
  so.AddConfigEntry("session.intra_op.allow_spinning", "0");
  so.AddConfigEntry("session.inter_op.allow_spinning", "0");
  so.SetGraphOptimizationLevel(ORT_ENABLE_ALL);
  for (const auto& [key, value] : args.session_config) so.AddConfigEntry(key.c_str(), value.c_str());
  so.EnableProfiling(("op_profile_" + v.name).c_str());
  tide::runtime::RegisterTideOps(so);
  if (!args.optimized_dir.empty()) {
    so.SetOptimizedModelFilePath((args.optimized_dir + "/" + v.name + ".onnx").c_str());
  }
  if (!args.fuse) {
    // Opened from its file as it is: a model with external data (a decoder past 2 GB) works too.
    s.fusion = "not fused (--no-fuse)";
    s.session = std::make_unique<Ort::Session>(Env(), v.path.c_str(), so);
  } else {
    auto model = tide::onnx_graph::LoadModel(v.path);
    if (!model.ok()) Usage(v.path + ": " + std::string(model.status().message()));
    tide::optimize::FusionOptions fusion;
    fusion.tide_attention = v.tide_attention;
    fusion.tide_elementwise = v.tide_elementwise;
    fusion.tide_attention_bf16 = v.tide_attention_bf16;
    fusion.tide_causal_attention_bf16 = v.tide_attention_bf16;
    // --tide-pruned-variant: the server's default load, as `tide serve` derives it.
    if (v.prune_last_layer) {
      fusion = tide::serving::LoadFusionOptions(tide::config::TideParameters{}, tide::onnx_graph::GraphPrecision(*model));
    }
    auto report = tide::optimize::FuseTransformer(fusion, &*model);
    s.fusion = report.ok() ? report->Summary() : std::string(report.status().message());
    if (args.drop_attention_mask) {
      for (auto& n : *model->mutable_graph()->mutable_node()) {
        if (n.op_type() == "MultiHeadAttention" && n.input_size() > 4) n.mutable_input()->DeleteSubrange(4, n.input_size() - 4);
      }
      s.fusion += " (attention masks dropped: timing only)";
    }
    std::string bytes;
    if (!model->SerializeToString(&bytes)) Usage(v.path + ": too large to serialise (--no-fuse opens it from its file)");
    s.session = std::make_unique<Ort::Session>(Env(), bytes.data(), bytes.size(), so);
  }
  Ort::AllocatorWithDefaultOptions alloc;
  for (size_t i = 0; i < s.session->GetInputCount(); ++i) {
    s.input_names.push_back(s.session->GetInputNameAllocated(i, alloc).get());
  }
  s.output_name = s.session->GetOutputNameAllocated(0, alloc).get();
  return s;
}

double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void RunOnce(Session& s, const Args& args, std::vector<int64_t>& ids, std::vector<int64_t>& mask,
             std::vector<int64_t>& types, bool timed) {
  const Ort::MemoryInfo cpu = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  const std::vector<int64_t> shape = {args.batch, args.seq};
  std::vector<Ort::Value> inputs;
  std::vector<const char*> names;
  for (const std::string& n : s.input_names) {
    std::vector<int64_t>* buf = n == "input_ids" ? &ids : n == "attention_mask" ? &mask : n == "token_type_ids" ? &types : nullptr;
    if (buf == nullptr) Usage(s.variant.path + ": unexpected input " + n);
    inputs.push_back(Ort::Value::CreateTensor<int64_t>(cpu, buf->data(), buf->size(), shape.data(), shape.size()));
    names.push_back(n.c_str());
  }
  const char* out = s.output_name.c_str();
  const double cpu_start = ThreadCpuMs();
  const auto start = std::chrono::steady_clock::now();
  s.session->Run(Ort::RunOptions{nullptr}, names.data(), inputs.data(), inputs.size(), &out, 1);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (timed) {
    s.run_ms.push_back(ms);
    s.cpu_ms.push_back(ThreadCpuMs() - cpu_start);
  }
}

// Untimed runs per session before the timed ones (see the file comment: the second allocates the
// memory pattern).
constexpr int kWarmupRuns = 2;

struct OpStats {
  double us = 0;
  int64_t count = 0;
};

// Kernel time per op type over every model_run after the first kWarmupRuns (the warm-up).
std::map<std::string, OpStats> Aggregate(const std::string& profile_path, int* runs_counted) {
  std::ifstream in(profile_path);
  const nlohmann::json events = nlohmann::json::parse(in);
  std::vector<std::pair<int64_t, int64_t>> runs;  // [ts, ts + dur) of each model_run
  for (const auto& e : events) {
    if (e.value("cat", "") == "Session" && e.value("name", "") == "model_run") {
      runs.emplace_back(e["ts"].get<int64_t>(), e["ts"].get<int64_t>() + e["dur"].get<int64_t>());
    }
  }
  std::sort(runs.begin(), runs.end());
  *runs_counted = std::max(0, static_cast<int>(runs.size()) - kWarmupRuns);
  std::map<std::string, OpStats> by_op;
  if (*runs_counted == 0) return by_op;
  const int64_t counted_from = runs[kWarmupRuns].first;
  for (const auto& e : events) {
    if (e.value("cat", "") != "Node") continue;
    const std::string name = e.value("name", "");
    if (name.size() < 12 || name.compare(name.size() - 12, 12, "_kernel_time") != 0) continue;
    if (e["ts"].get<int64_t>() < counted_from) continue;
    const std::string op = e["args"].value("op_name", "?");
    by_op[op].us += e["dur"].get<double>();
    by_op[op].count += 1;
  }
  return by_op;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  try {
    std::vector<Session> sessions;
    for (const Variant& v : args.variants) sessions.push_back(Open(args, v));
    std::vector<int64_t> ids(args.batch * args.seq), mask(ids.size(), 1), types(ids.size(), 0);
    std::mt19937 rng(1);
    std::uniform_int_distribution<int64_t> id(1000, 20000);
    for (auto& x : ids) x = id(rng);
    std::printf("# op_profile: batch %lldx%lld (full rows), %d intra-op thread(s), %d alternating rounds x %d runs, "
                "load average at start %s",
                static_cast<long long>(args.batch), static_cast<long long>(args.seq), args.threads, args.rounds,
                args.iters, [] {
                  static char buf[64] = "?\n";
                  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
                    if (!std::fgets(buf, sizeof buf, f)) buf[0] = 0;
                    std::fclose(f);
                  }
                  return buf;
                }());
    for (int w = 0; w < kWarmupRuns; ++w) {
      for (Session& s : sessions) RunOnce(s, args, ids, mask, types, false);  // warm-up
    }
    for (int r = 0; r < args.rounds; ++r) {
      for (Session& s : sessions) {
        for (int i = 0; i < args.iters; ++i) RunOnce(s, args, ids, mask, types, true);
      }
    }
    std::vector<std::map<std::string, OpStats>> stats;
    std::vector<double> wall, cpu;
    for (Session& s : sessions) {
      const std::string path = s.session->EndProfilingAllocated(Ort::AllocatorWithDefaultOptions()).get();
      int runs = 0;
      stats.push_back(Aggregate(path, &runs));
      if (args.keep_profile) {
        std::printf("%s: ONNX Runtime's profile (every node's kernel time): %s\n", s.variant.name.c_str(), path.c_str());
      } else {
        std::remove(path.c_str());
      }
      for (auto& [op, st] : stats.back()) {
        st.us /= std::max(1, runs);
        st.count /= std::max(1, runs);
      }
      wall.push_back(Median(s.run_ms));
      cpu.push_back(Median(s.cpu_ms));
    }
    for (size_t v = 0; v < sessions.size(); ++v) {
      double total = 0;
      for (const auto& [op, st] : stats[v]) total += st.us;
      std::printf("\n## %s: %s\n# fusion at load: %s\n# median per run: wall %.1f ms, CPU %.1f ms, kernels %.1f ms\n",
                  sessions[v].variant.name.c_str(), sessions[v].variant.path.c_str(), sessions[v].fusion.c_str(), wall[v],
                  cpu[v], total / 1000);
      std::vector<std::pair<std::string, OpStats>> rows(stats[v].begin(), stats[v].end());
      std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.us > b.second.us; });
      std::printf("%-34s %10s %7s %6s\n", "op type", "ms/run", "share", "count");
      for (const auto& [op, st] : rows) {
        std::printf("%-34s %10.2f %6.1f%% %6lld\n", op.c_str(), st.us / 1000, 100 * st.us / total,
                    static_cast<long long>(st.count));
      }
    }
    std::printf("\n## side by side (ms per run; ratio = variant / %s)\n%-34s", sessions[0].variant.name.c_str(), "op type");
    for (const Session& s : sessions) std::printf(" %12s", s.variant.name.c_str());
    std::printf("\n");
    std::map<std::string, bool> all_ops;
    for (const auto& m : stats) {
      for (const auto& [op, st] : m) all_ops[op] = true;
    }
    for (const auto& [op, unused] : all_ops) {
      std::printf("%-34s", op.c_str());
      for (const auto& m : stats) {
        auto it = m.find(op);
        std::printf(" %12.2f", it == m.end() ? 0.0 : it->second.us / 1000);
      }
      std::printf("\n");
    }
    std::printf("%-34s", "wall (median run)");
    for (double w : wall) std::printf(" %12.1f", w);
    std::printf("\n%-34s", "speed-up vs first (wall)");
    for (double w : wall) std::printf(" %11.2fx", wall[0] / w);
    std::printf("\n%-34s", "CPU ms (median run)");
    for (double c : cpu) std::printf(" %12.1f", c);
    std::printf("\n%-34s", "speed-up vs first (CPU)");
    for (double c : cpu) std::printf(" %11.2fx", cpu[0] / c);
    std::printf("\n");
  } catch (const Ort::Exception& e) {
    std::fprintf(stderr, "op_profile: ONNX Runtime: %s\n", e.what());
    return 1;
  }
  return 0;
}
