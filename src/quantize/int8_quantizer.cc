#include "quantize/int8_quantizer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "onnx_graph/graph_util.h"

namespace tide::quantize {

using onnx_graph::ReadFloatTensor;
using onnx_graph::CheckNotQuantized;
using onnx_graph::Namer;
using onnx_graph::NodeFilter;
using onnx_graph::DropUnusedInitializers;
using onnx_graph::TensorBytes;
using onnx_graph::InitializerBytes;
using onnx_graph::WeightMatMul;
using onnx_graph::FindWeightMatMuls;
using onnx_graph::EnsureOpset;
using onnx_graph::OpsetVersion;

namespace {

constexpr char kMsDomain[] = "com.microsoft";

struct QuantizedWeight {
  std::string values, scale, zero_point;
};

// B as [K, N] (transposed for Gemm transB=1, scaled by Gemm alpha), quantized symmetrically.
absl::StatusOr<QuantizedWeight> AddQuantizedWeight(const onnx::TensorProto& w, bool trans_b, float alpha,
                                                    const Int8Options& options, Namer* namer, onnx::GraphProto* g) {
  absl::StatusOr<std::vector<float>> values = ReadFloatTensor(w);
  if (!values.ok()) return values.status();
  const int64_t rows = w.dims(0), cols = w.dims(1);
  const int64_t K = trans_b ? cols : rows, N = trans_b ? rows : cols;
  auto at = [&](int64_t k, int64_t n) -> float {
    return alpha * (trans_b ? (*values)[n * cols + k] : (*values)[k * cols + n]);
  };
  for (float v : *values) {
    if (!std::isfinite(v)) return absl::InvalidArgumentError(absl::StrCat("weight ", w.name(), " holds inf or NaN"));
  }
  const float qmax = options.reduce_range ? 63.0f : 127.0f;
  const int64_t groups = options.per_channel ? N : 1;
  std::vector<float> scales(static_cast<size_t>(groups), 0.0f);
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t n = 0; n < N; ++n) {
      float& s = scales[options.per_channel ? n : 0];
      s = std::max(s, std::fabs(at(k, n)));
    }
  }
  for (float& s : scales) s = s > 0.0f ? s / qmax : 1.0f;
  std::string q(static_cast<size_t>(K * N), '\0');
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t n = 0; n < N; ++n) {
      const float s = scales[options.per_channel ? n : 0];
      const float r = std::nearbyint(at(k, n) / s);  // round half to even, like QuantizeLinear
      q[k * N + n] = static_cast<char>(static_cast<int8_t>(std::clamp(r, -qmax, qmax)));
    }
  }
  QuantizedWeight out;
  out.values = namer->Fresh(w.name() + "_quantized");
  out.scale = namer->Fresh(w.name() + "_scale");
  out.zero_point = namer->Fresh(w.name() + "_zero_point");
  onnx::TensorProto* tq = g->add_initializer();
  tq->set_name(out.values);
  tq->set_data_type(onnx::TensorProto::INT8);
  tq->add_dims(K);
  tq->add_dims(N);
  tq->set_raw_data(std::move(q));
  onnx::TensorProto* ts = g->add_initializer();
  ts->set_name(out.scale);
  ts->set_data_type(onnx::TensorProto::FLOAT);
  if (options.per_channel) ts->add_dims(N);
  ts->set_raw_data(std::string(reinterpret_cast<const char*>(scales.data()), scales.size() * sizeof(float)));
  onnx::TensorProto* tz = g->add_initializer();
  tz->set_name(out.zero_point);
  tz->set_data_type(onnx::TensorProto::INT8);
  if (options.per_channel) tz->add_dims(N);
  tz->set_raw_data(std::string(static_cast<size_t>(groups), '\0'));
  return out;
}

onnx::NodeProto MakeNode(const std::string& op, const std::string& domain, const std::string& name,
                         std::vector<std::string> inputs, std::vector<std::string> outputs) {
  onnx::NodeProto n;
  n.set_op_type(op);
  if (!domain.empty()) n.set_domain(domain);
  n.set_name(name);
  for (auto& i : inputs) n.add_input(std::move(i));
  for (auto& o : outputs) n.add_output(std::move(o));
  return n;
}

// Gemm bias C scaled by beta, as an initializer the Add can broadcast.
absl::StatusOr<std::string> AddScaledBias(const onnx::TensorProto& c, float beta, Namer* namer, onnx::GraphProto* g) {
  if (beta == 1.0f) return c.name();
  absl::StatusOr<std::vector<float>> v = ReadFloatTensor(c);
  if (!v.ok()) return v.status();
  for (float& x : *v) x *= beta;
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(namer->Fresh(c.name() + "_scaled"));
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : c.dims()) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v->data()), v->size() * sizeof(float)));
  return t->name();
}

}  // namespace

absl::StatusOr<QuantizeReport> QuantizeInt8(const Int8Options& options, onnx::ModelProto* model) {
  if (!model->has_graph()) return absl::InvalidArgumentError("ONNX model has no graph");
  if (absl::Status s = CheckNotQuantized(*model); !s.ok()) return s;
  absl::StatusOr<NodeFilter> filter = NodeFilter::Create(options.include_patterns, options.exclude_patterns);
  if (!filter.ok()) return filter.status();
  onnx::GraphProto* g = model->mutable_graph();
  const int64_t opset = OpsetVersion(*model, "");
  if (options.op_format == Int8OpFormat::kMatMulInteger && opset < 11) {
    return absl::InvalidArgumentError(absl::StrCat("the model imports ONNX opset ", opset,
                                                   "; DynamicQuantizeLinear needs opset 11 or later (use the "
                                                   "DynamicQuantizeMatMul format)"));
  }

  QuantizeReport report;
  report.weight_bytes_before = InitializerBytes(*g);
  std::vector<WeightMatMul> candidates = FindWeightMatMuls(*g, &report.skipped_nodes);
  std::unordered_map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : g->initializer()) inits[t.name()] = &t;

  // Decide first, then rewrite: adding initializers invalidates the pointers in `inits`.
  struct Plan {
    WeightMatMul op;
    onnx::TensorProto weight, bias;
  };
  std::map<int, Plan> plans;
  for (const WeightMatMul& c : candidates) {
    const onnx::NodeProto& n = g->node(c.node_index);
    const std::string label = n.name().empty() ? n.output(0) : n.name();
    if (!filter->Selected({n.name(), c.weight})) {
      report.skipped_nodes.push_back(absl::StrCat(label, ": excluded by name pattern"));
      continue;
    }
    if (c.gemm && !options.quantize_gemm) {
      report.skipped_nodes.push_back(absl::StrCat(label, ": Gemm (quantize_gemm off)"));
      continue;
    }
    Plan p{c, *inits.at(c.weight), {}};
    if (!c.bias.empty()) p.bias = *inits.at(c.bias);
    plans.emplace(c.node_index, std::move(p));
  }
  if (plans.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("nothing to quantize: no selected MatMul/Gemm has a constant float32 weight matrix (",
                     candidates.size(), " candidates, ", report.skipped_nodes.size(), " skipped)"));
  }

  Namer namer(*g);
  std::map<std::tuple<std::string, bool, float>, QuantizedWeight> cache;  // shared weights quantized once
  // Activations read by more than one selected MatMul: quantized once (DynamicQuantizeLinear), the
  // first time a reader is rewritten; each reader becomes MatMulIntegerToFloat.
  struct SharedInput {
    int readers = 0;
    std::string q, scale, zero_point;  // empty until quantized
  };
  std::map<std::string, SharedInput> shared_inputs;
  if (options.op_format == Int8OpFormat::kDynamicQuantizeMatMul && options.share_input_quantization && opset >= 11) {
    for (const auto& [index, plan] : plans) ++shared_inputs[g->node(index).input(0)].readers;
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (int i = 0; i < g->node_size(); ++i) {
    auto it = plans.find(i);
    if (it == plans.end()) {
      *nodes.Add() = g->node(i);
      continue;
    }
    const Plan& p = it->second;
    const onnx::NodeProto& n = g->node(i);
    const std::string base = n.name().empty() ? n.output(0) : n.name();
    const auto key = std::make_tuple(p.op.weight, p.op.trans_b, p.op.alpha);
    auto cached = cache.find(key);
    if (cached == cache.end()) {
      absl::StatusOr<QuantizedWeight> qw = AddQuantizedWeight(p.weight, p.op.trans_b, p.op.alpha, options, &namer, g);
      if (!qw.ok()) return qw.status();
      cached = cache.emplace(key, *qw).first;
    }
    const QuantizedWeight& qw = cached->second;
    const std::string& y = n.output(0);
    // With a Gemm bias the product goes to a fresh name and an Add writes the node's output.
    const std::string product = p.op.bias.empty() ? y : namer.Fresh(base + "_product");
    auto shared = shared_inputs.find(n.input(0));
    if (shared != shared_inputs.end() && shared->second.readers > 1) {
      SharedInput& in = shared->second;
      if (in.q.empty()) {
        in.q = namer.Fresh(n.input(0) + "_quantized");
        in.scale = namer.Fresh(n.input(0) + "_scale");
        in.zero_point = namer.Fresh(n.input(0) + "_zero_point");
        *nodes.Add() = MakeNode("DynamicQuantizeLinear", "", namer.Fresh(base + "_shared_input_quant"), {n.input(0)},
                                {in.q, in.scale, in.zero_point});
      }
      *nodes.Add() = MakeNode("MatMulIntegerToFloat", kMsDomain, namer.Fresh(base + "_quant"),
                              {in.q, qw.values, in.scale, qw.scale, in.zero_point, qw.zero_point}, {product});
    } else if (options.op_format == Int8OpFormat::kDynamicQuantizeMatMul) {
      *nodes.Add() = MakeNode("DynamicQuantizeMatMul", kMsDomain, namer.Fresh(base + "_quant"),
                              {n.input(0), qw.values, qw.scale, qw.zero_point}, {product});
    } else {
      const std::string a_q = namer.Fresh(base + "_input_quantized");
      const std::string a_scale = namer.Fresh(base + "_input_scale");
      const std::string a_zp = namer.Fresh(base + "_input_zero_point");
      const std::string acc = namer.Fresh(base + "_output_int32");
      const std::string acc_f = namer.Fresh(base + "_output_float");
      const std::string scale = namer.Fresh(base + "_output_scale");
      *nodes.Add() = MakeNode("DynamicQuantizeLinear", "", namer.Fresh(base + "_input_quant"), {n.input(0)},
                              {a_q, a_scale, a_zp});
      *nodes.Add() = MakeNode("MatMulInteger", "", namer.Fresh(base + "_matmul_int"),
                              {a_q, qw.values, a_zp, qw.zero_point}, {acc});
      onnx::NodeProto cast = MakeNode("Cast", "", namer.Fresh(base + "_cast"), {acc}, {acc_f});
      auto* to = cast.add_attribute();
      to->set_name("to");
      to->set_type(onnx::AttributeProto::INT);
      to->set_i(onnx::TensorProto::FLOAT);
      *nodes.Add() = std::move(cast);
      *nodes.Add() = MakeNode("Mul", "", namer.Fresh(base + "_scale_mul"), {a_scale, qw.scale}, {scale});
      *nodes.Add() = MakeNode("Mul", "", namer.Fresh(base + "_output_mul"), {acc_f, scale}, {product});
    }
    if (!p.op.bias.empty()) {
      absl::StatusOr<std::string> bias = AddScaledBias(p.bias, p.op.beta, &namer, g);
      if (!bias.ok()) return bias.status();
      *nodes.Add() = MakeNode("Add", "", namer.Fresh(base + "_bias_add"), {product, *bias}, {y});
    }
    report.converted_nodes.push_back(base);
  }
  g->mutable_node()->Swap(&nodes);
  if (options.op_format == Int8OpFormat::kDynamicQuantizeMatMul) EnsureOpset(model, kMsDomain, 1);
  DropUnusedInitializers(g);
  report.weight_bytes_after = InitializerBytes(*g);
  return report;
}

}  // namespace tide::quantize
