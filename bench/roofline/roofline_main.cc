// roofline_bench: prints the measured FP32 and INT8 ceilings of this machine (see roofline.h)
// beside the nominal FP32 peak, with the load average before and after.
//
// usage: roofline_bench [--size N | --shape MxKxN] [--rounds R] [--seconds S] [--threads 1,2]
//                       [--no-spinning]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "roofline/roofline.h"

namespace {

std::string LoadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

double CpuinfoGhz() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("cpu MHz", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return std::atof(line.c_str() + colon + 1) / 1000.0;
    }
  }
  return 0;
}

int Usage(const char* why) {
  std::fprintf(stderr, "roofline_bench: %s\nusage: roofline_bench [--size N | --shape MxKxN] [--rounds R] "
                       "[--seconds S] [--threads 1,2] [--no-spinning]\n", why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using tide::bench::RooflineKernel;
  tide::bench::RooflineOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--size" && has_value) {
      int64_t n = 0;
      if (!absl::SimpleAtoi(argv[++i], &n) || n <= 0) return Usage("--size: a positive integer");
      o.m = o.k = o.n = n;
    } else if (a == "--shape" && has_value) {
      std::vector<std::string> p = absl::StrSplit(argv[++i], 'x');
      if (p.size() != 3 || !absl::SimpleAtoi(p[0], &o.m) || !absl::SimpleAtoi(p[1], &o.k) ||
          !absl::SimpleAtoi(p[2], &o.n)) {
        return Usage("--shape: MxKxN");
      }
    } else if (a == "--rounds" && has_value) {
      if (!absl::SimpleAtoi(argv[++i], &o.rounds) || o.rounds <= 0) return Usage("--rounds: a positive integer");
    } else if (a == "--seconds" && has_value) {
      if (!absl::SimpleAtod(argv[++i], &o.seconds_per_round) || o.seconds_per_round <= 0) {
        return Usage("--seconds: a positive number");
      }
    } else if (a == "--threads" && has_value) {
      o.threads.clear();
      for (absl::string_view t : absl::StrSplit(argv[++i], ',')) {
        int n = 0;
        if (!absl::SimpleAtoi(t, &n) || n <= 0) return Usage("--threads: positive integers, comma-separated");
        o.threads.push_back(n);
      }
    } else if (a == "--no-spinning") {
      o.allow_spinning = false;
    } else {
      return Usage(("unknown or incomplete flag " + a).c_str());
    }
  }
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const double ghz = CpuinfoGhz();
  const double nominal = cores * ghz * 32;
  std::printf("load average at start: %s (%d cores; the machine may be shared: ratios within this run only)\n",
              LoadAverage().c_str(), cores);
  std::printf("nominal FP32 peak = %d cores x %.3f GHz (/proc/cpuinfo cpu MHz) x 32 FLOP/cycle (AVX2 + FMA) = %.1f "
              "GFLOP/s\n", cores, ghz, nominal);
  auto rows = tide::bench::MeasureRoofline(o);
  if (!rows.ok()) {
    std::fprintf(stderr, "roofline_bench: %s\n", std::string(rows.status().message()).c_str());
    return 1;
  }
  std::printf("%s", tide::bench::FormatRoofline(o, *rows).c_str());
  const int most = *std::max_element(o.threads.begin(), o.threads.end());
  const double fp32 = tide::bench::RooflineCeiling(*rows, RooflineKernel::kFp32MatMul, most);
  double int8 = 0;
  const char* int8_name = "";
  for (RooflineKernel k : {RooflineKernel::kMatMulIntegerU8S8, RooflineKernel::kMatMulIntegerU8U8,
                           RooflineKernel::kDynamicQuantizeMatMul}) {
    const double c = tide::bench::RooflineCeiling(*rows, k, most);
    if (c > int8) { int8 = c; int8_name = tide::bench::RooflineKernelName(k); }
  }
  std::printf("ratios (%d threads):\n", most);
  if (nominal > 0) std::printf("  measured FP32 ceiling / nominal FP32 peak: %.1f / %.1f = %.3f\n", fp32, nominal, fp32 / nominal);
  if (fp32 > 0) std::printf("  INT8 ceiling (%s) / FP32 ceiling: %.1f / %.1f = %.3f\n", int8_name, int8, fp32, int8 / fp32);
  const double s8 = tide::bench::RooflineCeiling(*rows, RooflineKernel::kMatMulIntegerU8S8, most);
  const double u8 = tide::bench::RooflineCeiling(*rows, RooflineKernel::kMatMulIntegerU8U8, most);
  if (s8 > 0 && u8 > 0) std::printf("  MatMulInteger u8u8 / u8s8: %.1f / %.1f = %.3f\n", u8, s8, u8 / s8);
  const double one = tide::bench::RooflineCeiling(*rows, RooflineKernel::kFp32MatMul, 1);
  if (one > 0 && most > 1) std::printf("  FP32 %d threads / 1 thread: %.3f\n", most, fp32 / one);
  const double fp32_cpu = [&] {
    for (const auto& r : *rows) {
      if (r.kernel == RooflineKernel::kFp32MatMul && r.threads == 1) return r.gflops_per_cpu_s;
    }
    return 0.0;
  }();
  std::printf("machine-readable: fp32_ceiling_gflops=%.1f int8_ceiling_gflops=%.1f nominal_gflops=%.1f "
              "fp32_1thread_gflops_per_cpu_s=%.1f\n", fp32, int8, nominal, fp32_cpu);
  std::printf("load average at end: %s\n", LoadAverage().c_str());
  return 0;
}
