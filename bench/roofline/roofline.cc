#include "roofline/roofline.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>

#include <time.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "onnx/onnx_pb.h"
#include "onnxruntime_cxx_api.h"

namespace tide::bench {
namespace {

Ort::Env& RooflineEnv() {
  static Ort::Env* env = new Ort::Env(ORT_LOGGING_LEVEL_WARNING, "tide-roofline");
  return *env;
}

void AddTensorInput(onnx::GraphProto* g, const std::string& name, int type, std::vector<int64_t> dims) {
  auto* in = g->add_input();
  in->set_name(name);
  auto* t = in->mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

template <typename T>
void AddInitializer(onnx::GraphProto* g, const std::string& name, int type, std::vector<int64_t> dims,
                    const std::vector<T>& values) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)));
}

// The one-node graph of `kernel` with B ([K, N]) as an initializer, serialized.
std::string BuildModel(RooflineKernel kernel, int64_t m, int64_t k, int64_t n) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("roofline");
  std::mt19937 rng(7);
  const size_t kn = static_cast<size_t>(k * n);
  onnx::NodeProto* node = g->add_node();
  node->add_input("A");
  node->add_input("B");
  node->add_output("Y");
  int out_type = onnx::TensorProto::FLOAT;
  switch (kernel) {
    case RooflineKernel::kFp32MatMul: {
      std::uniform_real_distribution<float> d(-1, 1);
      std::vector<float> b(kn);
      for (float& x : b) x = d(rng);
      AddTensorInput(g, "A", onnx::TensorProto::FLOAT, {m, k});
      AddInitializer(g, "B", onnx::TensorProto::FLOAT, {k, n}, b);
      node->set_op_type("MatMul");
      break;
    }
    case RooflineKernel::kMatMulIntegerU8S8:
    case RooflineKernel::kMatMulIntegerU8U8: {
      const bool u8u8 = kernel == RooflineKernel::kMatMulIntegerU8U8;
      std::uniform_int_distribution<int> d(u8u8 ? 0 : -127, u8u8 ? 255 : 127);
      std::vector<uint8_t> b(kn);
      for (uint8_t& x : b) x = static_cast<uint8_t>(d(rng));
      AddTensorInput(g, "A", onnx::TensorProto::UINT8, {m, k});
      AddInitializer(g, "B", u8u8 ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8, {k, n}, b);
      node->set_op_type("MatMulInteger");
      out_type = onnx::TensorProto::INT32;
      break;
    }
    case RooflineKernel::kDynamicQuantizeMatMul: {
      std::uniform_int_distribution<int> d(-127, 127);
      std::vector<int8_t> b(kn);
      for (int8_t& x : b) x = static_cast<int8_t>(d(rng));
      AddTensorInput(g, "A", onnx::TensorProto::FLOAT, {m, k});
      AddInitializer(g, "B", onnx::TensorProto::INT8, {k, n}, b);
      AddInitializer(g, "b_scale", onnx::TensorProto::FLOAT, {}, std::vector<float>{0.01f});
      node->add_input("b_scale");
      node->set_op_type("DynamicQuantizeMatMul");
      node->set_domain("com.microsoft");
      auto* ms = model.add_opset_import();
      ms->set_domain("com.microsoft");
      ms->set_version(1);
      break;
    }
  }
  auto* out = g->add_output();
  out->set_name("Y");
  auto* t = out->mutable_type()->mutable_tensor_type();
  t->set_elem_type(out_type);
  t->mutable_shape()->add_dim()->set_dim_value(m);
  t->mutable_shape()->add_dim()->set_dim_value(n);
  return model.SerializeAsString();
}

struct Row {
  RooflineKernel kernel;
  int threads;
  std::unique_ptr<Ort::Session> session;
  std::vector<uint8_t> a_bytes;  // A's data, typed by the kernel
  Ort::Value a{nullptr};
  std::vector<double> rounds;
  std::vector<double> rounds_per_cpu_s;
};

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

const char* RooflineKernelName(RooflineKernel kernel) {
  switch (kernel) {
    case RooflineKernel::kFp32MatMul: return "fp32 MatMul";
    case RooflineKernel::kMatMulIntegerU8S8: return "int8 MatMulInteger u8s8";
    case RooflineKernel::kMatMulIntegerU8U8: return "int8 MatMulInteger u8u8";
    case RooflineKernel::kDynamicQuantizeMatMul: return "int8 DynamicQuantizeMatMul";
  }
  return "?";
}

absl::StatusOr<std::vector<RooflineRow>> MeasureRoofline(const RooflineOptions& o) {
  if (o.m <= 0 || o.k <= 0 || o.n <= 0 || o.rounds <= 0 || o.seconds_per_round <= 0) {
    return absl::InvalidArgumentError("roofline: shape, rounds and seconds must be positive");
  }
  const double gop = 2.0 * static_cast<double>(o.m) * static_cast<double>(o.k) * static_cast<double>(o.n) / 1e9;
  std::vector<Row> rows;
  try {
    const Ort::MemoryInfo cpu = Ort::MemoryInfo::CreateCpu(OrtDeviceAllocator, OrtMemTypeDefault);
    const std::array<int64_t, 2> a_shape{o.m, o.k};
    const size_t mk = static_cast<size_t>(o.m * o.k);
    for (RooflineKernel kernel : o.kernels) {
      const std::string model = BuildModel(kernel, o.m, o.k, o.n);
      for (int threads : o.threads) {
        Row r{kernel, threads, nullptr, {}, Ort::Value(nullptr), {}, {}};
        Ort::SessionOptions so;
        so.SetIntraOpNumThreads(threads);
        so.SetInterOpNumThreads(1);
        so.SetExecutionMode(ORT_SEQUENTIAL);
        so.AddConfigEntry("session.intra_op.allow_spinning", o.allow_spinning ? "1" : "0");
        r.session = std::make_unique<Ort::Session>(RooflineEnv(), model.data(), model.size(), so);
        std::mt19937 rng(11);
        const bool float_a = kernel == RooflineKernel::kFp32MatMul || kernel == RooflineKernel::kDynamicQuantizeMatMul;
        if (float_a) {
          std::uniform_real_distribution<float> d(-1, 1);
          r.a_bytes.resize(mk * sizeof(float));
          auto* a = reinterpret_cast<float*>(r.a_bytes.data());
          for (size_t i = 0; i < mk; ++i) a[i] = d(rng);
          r.a = Ort::Value::CreateTensor<float>(cpu, a, mk, a_shape.data(), a_shape.size());
        } else {
          std::uniform_int_distribution<int> d(0, 255);
          r.a_bytes.resize(mk);
          for (uint8_t& x : r.a_bytes) x = static_cast<uint8_t>(d(rng));
          r.a = Ort::Value::CreateTensor<uint8_t>(cpu, r.a_bytes.data(), mk, a_shape.data(), a_shape.size());
        }
        rows.push_back(std::move(r));
      }
    }
    const char* in_names[] = {"A"};
    const char* out_names[] = {"Y"};
    Ort::RunOptions run;
    for (Row& r : rows) r.session->Run(run, in_names, &r.a, 1, out_names, 1);  // warm-up
    for (int round = 0; round < o.rounds; ++round) {
      for (Row& r : rows) {
        const auto start = std::chrono::steady_clock::now();
        const double cpu_start = ProcessCpuSeconds();
        double elapsed = 0;
        int runs = 0;
        do {
          r.session->Run(run, in_names, &r.a, 1, out_names, 1);
          ++runs;
          elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        } while (elapsed < o.seconds_per_round);
        r.rounds.push_back(gop * runs / elapsed);
        r.rounds_per_cpu_s.push_back(gop * runs / std::max(ProcessCpuSeconds() - cpu_start, 1e-9));
      }
    }
  } catch (const Ort::Exception& e) {
    return absl::InternalError(absl::StrCat("roofline: onnxruntime: ", e.what()));
  }
  std::vector<RooflineRow> out;
  for (Row& r : rows) {
    out.push_back({r.kernel, r.threads, Median(r.rounds), r.rounds, Median(r.rounds_per_cpu_s), r.rounds_per_cpu_s});
  }
  return out;
}

double RooflineCeiling(const std::vector<RooflineRow>& rows, RooflineKernel kernel, int threads) {
  for (const RooflineRow& r : rows) {
    if (r.kernel == kernel && r.threads == threads) return r.gflops;
  }
  return 0;
}

std::string FormatRoofline(const RooflineOptions& o, const std::vector<RooflineRow>& rows) {
  std::string s = absl::StrFormat(
      "measured ceilings (ONNX Runtime kernels, [%d x %d] x [%d x %d] MatMul, B an initializer; median of %d "
      "alternating rounds of %.1f s; spinning %s):\n",
      o.m, o.k, o.k, o.n, o.rounds, o.seconds_per_round, o.allow_spinning ? "on" : "off");
  absl::StrAppendFormat(&s, "  %-28s %7s %10s %12s   %s\n", "kernel", "threads", "GFLOP/s", "GFLOP/CPU-s",
                        "rounds (GFLOP/s)");
  for (const RooflineRow& r : rows) {
    absl::StrAppendFormat(&s, "  %-28s %7d %10.1f %12.1f   [%s]\n", RooflineKernelName(r.kernel), r.threads, r.gflops,
                          r.gflops_per_cpu_s,
                          absl::StrJoin(r.round_gflops, ", ", [](std::string* out, double v) {
                            absl::StrAppendFormat(out, "%.1f", v);
                          }));
  }
  return s;
}

}  // namespace tide::bench
