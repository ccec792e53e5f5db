// BiasGelu and LayerNorm against their reference loops (row widths with and without a tail, large
// and negative inputs, optional inputs absent, in place, split over units), and ai.tide.BiasGelu /
// LayerNorm / SkipLayerNorm through ONNX Runtime against ONNX Runtime's own Add + Gelu,
// LayerNormalization and com.microsoft.SkipLayerNormalization on the same inputs.
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
#include "onnxruntime_cxx_api.h"
#include "runtime/bias_gelu.h"
#include "runtime/layer_norm.h"
#include "runtime/tide_ops.h"

namespace tide::runtime {
namespace {

std::vector<float> Random(size_t n, float stddev, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// max |a - b| / max(1, |b|)
double MaxRelativeDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]) / std::max(1.0, std::fabs(static_cast<double>(b[i])));
    worst = std::max(worst, std::isnan(d) ? 1e30 : d);
  }
  return worst;
}

// Runs units in reverse order, counting them: the result must not depend on the split.
ParallelFor Reversed(size_t* seen) {
  return [seen](size_t units, const std::function<void(size_t)>& fn) {
    for (size_t u = units; u-- > 0;) fn(u);
    *seen += units;
  };
}

TEST(BiasGeluTest, MatchesTheExactGeluOnEveryRowWidth) {
  for (int64_t cols : {1, 15, 16, 17, 48, 384, 1536}) {
    const int64_t rows = 7;
    std::vector<float> x = Random(static_cast<size_t>(rows * cols), 3.0f, static_cast<unsigned>(cols));
    x[0] = -12.0f;  // far in the tail: GELU ~ 0
    if (x.size() > 1) x[1] = 9.5f;
    const std::vector<float> bias = Random(static_cast<size_t>(cols), 0.5f, 7);
    for (bool with_bias : {true, false}) {
      std::vector<float> got(x.size(), -1.0f), want(x.size(), -2.0f);
      BiasGelu(rows, cols, x.data(), with_bias ? bias.data() : nullptr, got.data());
      BiasGeluReference(rows, cols, x.data(), with_bias ? bias.data() : nullptr, want.data());
      EXPECT_LT(MaxRelativeDiff(got, want), 1e-6) << "cols " << cols << " bias " << with_bias;
      EXPECT_NEAR(want[0], 0.0f, 1e-20);
    }
  }
  EXPECT_EQ(BiasGeluIsVectorized(), __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"));
}

TEST(BiasGeluTest, InPlaceAndSplitOverUnitsGiveTheSameResult) {
  const int64_t rows = 40, cols = 1536;  // several units of work
  std::vector<float> x = Random(static_cast<size_t>(rows * cols), 2.0f, 3);
  const std::vector<float> bias = Random(static_cast<size_t>(cols), 0.5f, 4);
  std::vector<float> serial(x.size());
  BiasGelu(rows, cols, x.data(), bias.data(), serial.data());
  size_t seen = 0;
  std::vector<float> in_place = x;
  BiasGelu(rows, cols, in_place.data(), bias.data(), in_place.data(), Reversed(&seen));
  EXPECT_GT(seen, 1u);
  EXPECT_EQ(in_place, serial);
}

struct NormCase {
  bool skip, bias, beta;
};

TEST(LayerNormTest, MatchesTheReferenceWithAndWithoutEachOptionalInput) {
  for (int64_t cols : {1, 15, 16, 33, 64, 384, 768}) {
    const int64_t rows = 5;
    const size_t n = static_cast<size_t>(rows * cols);
    std::vector<float> x = Random(n, 2.0f, static_cast<unsigned>(cols));
    for (int64_t c = 0; c < cols; ++c) x[static_cast<size_t>(c)] += 40.0f;  // a row far from zero mean
    const std::vector<float> skip = Random(n, 1.0f, 11), bias = Random(static_cast<size_t>(cols), 0.3f, 12);
    const std::vector<float> gamma = Random(static_cast<size_t>(cols), 1.0f, 13), beta = Random(static_cast<size_t>(cols), 0.2f, 14);
    for (NormCase k : {NormCase{true, true, true}, NormCase{false, false, true}, NormCase{true, false, false},
                       NormCase{false, true, false}}) {
      LayerNormInputs in;
      in.x = x.data();
      in.skip = k.skip ? skip.data() : nullptr;
      in.bias = k.bias ? bias.data() : nullptr;
      in.gamma = gamma.data();
      in.beta = k.beta ? beta.data() : nullptr;
      std::vector<float> got(n, -1.0f), want(n, -2.0f);
      LayerNorm(rows, cols, 1e-12f, in, got.data());
      LayerNormReference(rows, cols, 1e-12f, in, want.data());
      EXPECT_LT(MaxRelativeDiff(got, want), 1e-5)
          << "cols " << cols << " skip " << k.skip << " bias " << k.bias << " beta " << k.beta;
    }
  }
}

TEST(LayerNormTest, AConstantRowIsBetaAndInPlaceSplitsAgree) {
  // A constant row has variance 0: y = 0 * rsqrt(epsilon) * gamma + beta = beta, never NaN.
  const int64_t cols = 40;
  std::vector<float> x(static_cast<size_t>(cols), 3.25f), gamma(static_cast<size_t>(cols), 2.0f), beta(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) beta[static_cast<size_t>(c)] = 0.1f * static_cast<float>(c);
  std::vector<float> y(x.size());
  LayerNormInputs in;
  in.x = x.data();
  in.gamma = gamma.data();
  in.beta = beta.data();
  LayerNorm(1, cols, 1e-5f, in, y.data());
  for (int64_t c = 0; c < cols; ++c) EXPECT_FLOAT_EQ(y[static_cast<size_t>(c)], beta[static_cast<size_t>(c)]);

  const int64_t rows = 100, wide = 384;
  std::vector<float> big = Random(static_cast<size_t>(rows * wide), 1.0f, 5), skip = Random(big.size(), 1.0f, 6);
  std::vector<float> g = Random(static_cast<size_t>(wide), 1.0f, 7);
  LayerNormInputs b;
  b.x = big.data();
  b.skip = skip.data();
  b.gamma = g.data();
  std::vector<float> serial(big.size());
  LayerNorm(rows, wide, 1e-12f, b, serial.data());
  size_t seen = 0;
  LayerNorm(rows, wide, 1e-12f, b, big.data(), Reversed(&seen));  // in place over x
  EXPECT_GT(seen, 1u);
  EXPECT_EQ(big, serial);
}

// --- through ONNX Runtime --------------------------------------------------------------------

struct Node {
  std::string domain, op;
  std::vector<std::string> inputs, outputs;
  std::map<std::string, float> float_attributes;
};

// A graph over float inputs `inputs` (name -> rank, dynamic dims) through `nodes` to output "y".
std::string Model(const std::map<std::string, int>& inputs, const std::vector<Node>& nodes) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(17);
  for (const char* domain : {"com.microsoft", kTideOpDomain}) {
    auto* c = m.add_opset_import();
    c->set_domain(domain);
    c->set_version(1);
  }
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("elementwise");
  for (const auto& [name, rank] : inputs) {
    auto* in = g->add_input();
    in->set_name(name);
    auto* t = in->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int i = 0; i < rank; ++i) t->mutable_shape()->add_dim()->set_dim_param(name + std::to_string(i));
  }
  auto* out = g->add_output();
  out->set_name("y");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (const Node& n : nodes) {
    onnx::NodeProto* p = g->add_node();
    p->set_domain(n.domain);
    p->set_op_type(n.op);
    for (const auto& i : n.inputs) p->add_input(i);
    for (const auto& i : n.outputs) p->add_output(i);
    for (const auto& [name, value] : n.float_attributes) {
      auto* a = p->add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::FLOAT);
      a->set_f(value);
    }
  }
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

Ort::Env& Env() {
  static Ort::Env* env = new Ort::Env(ORT_LOGGING_LEVEL_ERROR, "tide_elementwise_ops_test");
  return *env;
}

struct Feed {
  std::string name;
  std::vector<float>* data;
  std::vector<int64_t> dims;
};

std::vector<float> RunModel(const std::string& model, const std::vector<Feed>& feeds, int threads = 1) {
  Ort::SessionOptions so;
  so.SetIntraOpNumThreads(threads);
  RegisterTideOps(so);
  Ort::Session session(Env(), model.data(), model.size(), so);
  const Ort::MemoryInfo mem = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  std::vector<Ort::Value> values;
  std::vector<const char*> names;
  for (const Feed& f : feeds) {
    values.push_back(Ort::Value::CreateTensor<float>(mem, f.data->data(), f.data->size(), f.dims.data(), f.dims.size()));
    names.push_back(f.name.c_str());
  }
  const char* out_name[] = {"y"};
  auto out = session.Run(Ort::RunOptions{nullptr}, names.data(), values.data(), values.size(), out_name, 1);
  const float* p = out[0].GetTensorData<float>();
  return std::vector<float>(p, p + out[0].GetTensorTypeAndShapeInfo().GetElementCount());
}

TEST(TideElementwiseOpTest, BiasGeluMatchesOnnxRuntimesAddAndGelu) {
  const int64_t b = 3, s = 11, n = 1536;
  std::vector<float> x = Random(static_cast<size_t>(b * s * n), 2.5f, 21), bias = Random(static_cast<size_t>(n), 0.5f, 22);
  const std::vector<Feed> feeds = {{"x", &x, {b, s, n}}, {"bias", &bias, {n}}};
  const std::vector<float> ort = RunModel(Model({{"x", 3}, {"bias", 1}}, {{"", "Add", {"x", "bias"}, {"a"}, {}},
                                                                   {"com.microsoft", "Gelu", {"a"}, {"y"}, {}}}),
                                     feeds);
  for (int threads : {1, 2}) {
    const std::vector<float> tide =
        RunModel(Model({{"x", 3}, {"bias", 1}}, {{kTideOpDomain, kBiasGeluOp, {"x", "bias"}, {"y"}, {}}}), feeds, threads);
    ASSERT_EQ(tide.size(), ort.size());
    EXPECT_LT(MaxRelativeDiff(tide, ort), 2e-6) << threads << " threads";
  }
}

TEST(TideElementwiseOpTest, LayerNormsMatchOnnxRuntimes) {
  const int64_t b = 2, s = 9, n = 384;
  std::vector<float> x = Random(static_cast<size_t>(b * s * n), 3.0f, 31), skip = Random(x.size(), 2.0f, 32);
  std::vector<float> gamma = Random(static_cast<size_t>(n), 1.0f, 33), beta = Random(static_cast<size_t>(n), 0.2f, 34);
  std::vector<float> bias = Random(static_cast<size_t>(n), 0.3f, 35);
  const std::vector<Feed> five = {{"x", &x, {b, s, n}}, {"skip", &skip, {b, s, n}}, {"gamma", &gamma, {n}},
                                  {"beta", &beta, {n}}, {"bias", &bias, {n}}};
  const std::map<std::string, int> ranks = {{"x", 3}, {"skip", 3}, {"gamma", 1}, {"beta", 1}, {"bias", 1}};
  const std::vector<std::string> in5 = {"x", "skip", "gamma", "beta", "bias"};
  const std::vector<float> ort_skip =
      RunModel(Model(ranks, {{"com.microsoft", "SkipLayerNormalization", in5, {"y"}, {{"epsilon", 1e-12f}}}}), five);
  const std::vector<float> tide_skip = RunModel(Model(ranks, {{kTideOpDomain, kSkipLayerNormOp, in5, {"y"}, {{"epsilon", 1e-12f}}}}), five, 2);
  EXPECT_LT(MaxRelativeDiff(tide_skip, ort_skip), 1e-5);

  const std::vector<Feed> three = {{"x", &x, {b, s, n}}, {"gamma", &gamma, {n}}, {"beta", &beta, {n}}};
  const std::map<std::string, int> ranks3 = {{"x", 3}, {"gamma", 1}, {"beta", 1}};
  const std::vector<float> ort_ln =
      RunModel(Model(ranks3, {{"", "LayerNormalization", {"x", "gamma", "beta"}, {"y"}, {{"epsilon", 1e-5f}}}}), three);
  const std::vector<float> tide_ln =
      RunModel(Model(ranks3, {{kTideOpDomain, kLayerNormOp, {"x", "gamma", "beta"}, {"y"}, {{"epsilon", 1e-5f}}}}), three);
  EXPECT_LT(MaxRelativeDiff(tide_ln, ort_ln), 1e-5);
}

TEST(TideElementwiseOpTest, WrongShapesAreAnErrorNotACrash) {
  std::vector<float> x(2 * 3 * 8, 1.0f), bias(7, 0.0f), gamma(8, 1.0f), skip(2 * 3 * 7, 0.0f);
  auto expect_error = [](const std::string& model, const std::vector<Feed>& feeds, const std::string& message) {
    try {
      RunModel(model, feeds);
      ADD_FAILURE() << "ran: " << message;
    } catch (const Ort::Exception& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  expect_error(Model({{"x", 3}, {"bias", 1}}, {{kTideOpDomain, kBiasGeluOp, {"x", "bias"}, {"y"}, {}}}),
               {{"x", &x, {2, 3, 8}}, {"bias", &bias, {7}}}, "ai.tide.BiasGelu: bias [7] is not [8]");
  expect_error(Model({{"x", 3}, {"skip", 3}, {"gamma", 1}},
                     {{kTideOpDomain, kSkipLayerNormOp, {"x", "skip", "gamma", "gamma", "gamma"}, {"y"}, {{"epsilon", 1e-5f}}}}),
               {{"x", &x, {2, 3, 8}}, {"skip", &skip, {2, 3, 7}}, {"gamma", &gamma, {8}}},
               "ai.tide.SkipLayerNorm: skip [2, 3, 7] is not the input's shape [2, 3, 8]");
  expect_error(Model({{"x", 3}, {"gamma", 1}, {"bias", 1}},
                     {{kTideOpDomain, kLayerNormOp, {"x", "gamma", "bias"}, {"y"}, {{"epsilon", 1e-5f}}}}),
               {{"x", &x, {2, 3, 8}}, {"gamma", &gamma, {8}}, {"bias", &bias, {7}}},
               "ai.tide.LayerNorm: beta [7] is not [8]");
  expect_error(Model({{"x", 3}, {"gamma", 1}}, {{kTideOpDomain, kLayerNormOp, {"x", "gamma", "gamma"}, {"y"}, {{"epsilon", 0.0f}}}}),
               {{"x", &x, {2, 3, 8}}, {"gamma", &gamma, {8}}}, "ai.tide.LayerNorm: epsilon is not positive");
}

}  // namespace
}  // namespace tide::runtime
