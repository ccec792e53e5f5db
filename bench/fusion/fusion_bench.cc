// Raw engine time of a model before and after transformer graph fusion (src/optimize), FP32 and
// INT8 (tide quantize --int8 applied in-process), per thread count and batch shape. Each
// configuration runs the unfused and the fused session in alternating rounds in the same process,
// so the printed ratio compares like with like on a shared machine.
//
//   fusion_bench --model models/minilm-l6/1/model.onnx [--threads 1,2] [--shapes 1x352,4x256]
//                [--rounds 5] [--iters 4] [--precisions fp32,int8]
//
// Prints one line per configuration: ms/run unfused, ms/run fused (median of the rounds' means),
// speedup (unfused / fused) and the largest logit difference on the timed batch.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "onnx_graph/model_io.h"
#include "optimize/fusion_check.h"
#include "quantize/int8_quantizer.h"
#include "runtime/ort_backend.h"

namespace {

using tide::runtime::Logits;
using tide::runtime::OrtBackend;
using tide::runtime::OrtOptions;
using tide::runtime::TokenBatch;

struct Args {
  std::string model = "models/minilm-l6/1/model.onnx";
  std::vector<int> threads = {1, 2};
  std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 352}, {4, 256}};
  std::vector<std::string> precisions = {"fp32", "int8"};
  int rounds = 5;
  int iters = 4;
};

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr, "fusion_bench: %s\nusage: fusion_bench --model M [--threads 1,2] [--shapes 1x352,4x256] "
                       "[--rounds 5] [--iters 4] [--precisions fp32,int8]\n", why);
  std::exit(2);
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Usage("a flag lacks its value");
    const std::string v = argv[++i];
    if (flag == "--model") {
      a.model = v;
    } else if (flag == "--threads") {
      a.threads.clear();
      for (auto p : absl::StrSplit(v, ',')) {
        int t = 0;
        if (!absl::SimpleAtoi(p, &t) || t < 1) Usage("--threads wants positive integers");
        a.threads.push_back(t);
      }
    } else if (flag == "--shapes") {
      a.shapes.clear();
      for (auto p : absl::StrSplit(v, ',')) {
        std::vector<std::string> bs = absl::StrSplit(p, 'x');
        int64_t b = 0, s = 0;
        if (bs.size() != 2 || !absl::SimpleAtoi(bs[0], &b) || !absl::SimpleAtoi(bs[1], &s) || b < 1 || s < 2) {
          Usage("--shapes wants BxS,BxS");
        }
        a.shapes.push_back({b, s});
      }
    } else if (flag == "--precisions") {
      a.precisions = absl::StrSplit(v, ',');
    } else if (flag == "--rounds" || flag == "--iters") {
      int n = 0;
      if (!absl::SimpleAtoi(v, &n) || n < 1) Usage("--rounds/--iters want a positive integer");
      (flag == "--rounds" ? a.rounds : a.iters) = n;
    } else {
      Usage("unknown flag");
    }
  }
  return a;
}

// Full rows of random ids (a padded batch would time the same GEMMs).
TokenBatch MakeBatch(const tide::ModelSignature& sig, int64_t b, int64_t s) {
  TokenBatch t;
  t.Resize(b, s, !sig.token_type_ids_name.empty());
  std::mt19937 rng(1);
  std::uniform_int_distribution<int64_t> id(1000, 20000);
  for (auto& x : t.input_ids) x = id(rng);
  std::fill(t.attention_mask.begin(), t.attention_mask.end(), 1);
  return t;
}

double TimeRuns(OrtBackend* backend, const TokenBatch& batch, int iters, Logits* out) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    if (!backend->Run(batch, out).ok()) {
      std::fprintf(stderr, "fusion_bench: Run failed\n");
      std::exit(1);
    }
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / iters;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  auto loaded = tide::onnx_graph::LoadModel(args.model);
  if (!loaded.ok()) Usage(std::string(loaded.status().message()).c_str());
  auto sig = OrtBackend::ReadSignature(args.model);
  if (!sig.ok()) Usage(std::string(sig.status().message()).c_str());
  std::printf("# fusion_bench %s: rounds %d x %d runs each, unfused and fused alternating\n", args.model.c_str(),
              args.rounds, args.iters);
  std::printf("%-5s %-7s %-7s %12s %12s %8s %10s  %s\n", "prec", "threads", "shape", "unfused_ms", "fused_ms", "speedup",
              "max_diff", "fused");
  for (const std::string& precision : args.precisions) {
    onnx::ModelProto original = *loaded;
    if (precision == "int8") {
      auto q = tide::quantize::QuantizeInt8(tide::quantize::Int8Options{}, &original);
      if (!q.ok()) Usage(std::string(q.status().message()).c_str());
    } else if (precision != "fp32") {
      Usage("--precisions wants fp32 and/or int8");
    }
    onnx::ModelProto fused = original;
    auto report = tide::optimize::FuseTransformer({}, &fused);
    if (!report.ok()) Usage(std::string(report.status().message()).c_str());
    OrtOptions base;
    if (!original.SerializeToString(&base.model_data)) Usage("model too large to serialise");
    OrtOptions fused_options;
    if (!fused.SerializeToString(&fused_options.model_data)) Usage("model too large to serialise");
    for (int threads : args.threads) {
      base.intra_op_threads = fused_options.intra_op_threads = threads;
      base.inter_op_threads = fused_options.inter_op_threads = 1;
      auto a = OrtBackend::Create(base);
      auto b = OrtBackend::Create(fused_options);
      if (!a.ok() || !b.ok()) Usage("session creation failed");
      for (const auto& [rows, seq] : args.shapes) {
        const TokenBatch batch = MakeBatch(*sig, rows, seq);
        Logits la, lb;
        TimeRuns(a->get(), batch, 1, &la);  // warm-up (memory plans, arena)
        TimeRuns(b->get(), batch, 1, &lb);
        std::vector<double> ta, tb;
        for (int r = 0; r < args.rounds; ++r) {
          ta.push_back(TimeRuns(a->get(), batch, args.iters, &la));
          tb.push_back(TimeRuns(b->get(), batch, args.iters, &lb));
        }
        double diff = 0;
        for (size_t i = 0; i < la.values.size(); ++i) diff = std::max(diff, static_cast<double>(std::fabs(la.values[i] - lb.values[i])));
        const double ua = Median(ta), ub = Median(tb);
        const std::string shape = std::to_string(rows) + "x" + std::to_string(seq);
        std::printf("%-5s %-7d %-7s %12.2f %12.2f %7.3fx %10.3g  %s\n", precision.c_str(), threads, shape.c_str(), ua, ub,
                    ua / ub, diff, report->Summary().c_str());
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
