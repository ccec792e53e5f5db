#include "quantize/fp16_converter.h"

#include <cmath>
#include <map>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "onnx_graph/graph_util.h"

namespace tide::quantize {

using onnx_graph::ReadFloatTensor;
using onnx_graph::FloatToHalf;
using onnx_graph::CheckNotQuantized;
using onnx_graph::Namer;
using onnx_graph::NodeFilter;
using onnx_graph::DropUnusedInitializers;
using onnx_graph::TensorBytes;
using onnx_graph::WeightMatMul;
using onnx_graph::FindWeightMatMuls;
using onnx_graph::InitializerBytes;

namespace {

constexpr float kHalfMax = 65504.0f;

absl::StatusOr<std::string> AddHalfCopy(const onnx::TensorProto& t, Namer* namer, onnx::GraphProto* g) {
  absl::StatusOr<std::vector<float>> v = ReadFloatTensor(t);
  if (!v.ok()) return v.status();
  for (float x : *v) {
    // Beyond float16's largest finite value a weight would silently become infinity.
    if (std::isfinite(x) && std::fabs(x) > kHalfMax) {
      return absl::InvalidArgumentError(absl::StrCat("weight ", t.name(), " holds ", x,
                                                     ", outside float16's range (+-65504); exclude it with --exclude"));
    }
  }
  std::string raw(v->size() * 2, '\0');
  for (size_t i = 0; i < v->size(); ++i) {
    const uint16_t h = FloatToHalf((*v)[i]);
    raw[2 * i] = static_cast<char>(h & 0xff);
    raw[2 * i + 1] = static_cast<char>(h >> 8);
  }
  onnx::TensorProto* out = g->add_initializer();
  out->set_name(namer->Fresh(t.name() + "_fp16"));
  out->set_data_type(onnx::TensorProto::FLOAT16);
  for (int64_t d : t.dims()) out->add_dims(d);
  out->set_raw_data(std::move(raw));
  return out->name();
}

onnx::NodeProto Cast(const std::string& name, const std::string& in, const std::string& out, int to) {
  onnx::NodeProto n;
  n.set_op_type("Cast");
  n.set_name(name);
  n.add_input(in);
  n.add_output(out);
  auto* a = n.add_attribute();
  a->set_name("to");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(to);
  return n;
}

}  // namespace

absl::StatusOr<QuantizeReport> ConvertFp16(const Fp16Options& options, onnx::ModelProto* model) {
  if (!model->has_graph()) return absl::InvalidArgumentError("ONNX model has no graph");
  if (absl::Status s = CheckNotQuantized(*model); !s.ok()) return s;
  absl::StatusOr<NodeFilter> filter = NodeFilter::Create(options.include_patterns, options.exclude_patterns);
  if (!filter.ok()) return filter.status();
  onnx::GraphProto* g = model->mutable_graph();
  QuantizeReport report;
  report.weight_bytes_before = InitializerBytes(*g);
  std::vector<WeightMatMul> candidates = FindWeightMatMuls(*g, &report.skipped_nodes);
  std::map<int, WeightMatMul> selected;
  for (const WeightMatMul& c : candidates) {
    const onnx::NodeProto& n = g->node(c.node_index);
    if (!filter->Selected({n.name(), c.weight})) {
      report.skipped_nodes.push_back(absl::StrCat(n.name().empty() ? n.output(0) : n.name(), ": excluded by name pattern"));
      continue;
    }
    selected.emplace(c.node_index, c);
  }
  if (selected.empty()) {
    return absl::FailedPreconditionError("nothing to convert: no selected MatMul/Gemm has a constant float32 weight matrix");
  }
  // Copy the tensors first: adding initializers invalidates pointers into the repeated field.
  std::unordered_map<std::string, onnx::TensorProto> originals;
  for (const auto& t : g->initializer()) {
    for (const auto& [i, c] : selected) {
      if (t.name() == c.weight || t.name() == c.bias) originals.emplace(t.name(), t);
    }
  }
  Namer namer(*g);
  std::unordered_map<std::string, std::string> half;  // float initializer -> its float16 copy
  auto half_of = [&](const std::string& name) -> absl::StatusOr<std::string> {
    auto it = half.find(name);
    if (it != half.end()) return it->second;
    absl::StatusOr<std::string> h = AddHalfCopy(originals.at(name), &namer, g);
    if (!h.ok()) return h.status();
    half.emplace(name, *h);
    return *h;
  };

  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  std::unordered_map<std::string, std::string> restored;  // kWeightsOnly: float initializer -> Cast output
  google::protobuf::RepeatedPtrField<onnx::NodeProto> weight_casts;
  for (int i = 0; i < g->node_size(); ++i) {
    auto it = selected.find(i);
    if (it == selected.end()) {
      *nodes.Add() = g->node(i);
      continue;
    }
    const WeightMatMul& c = it->second;
    onnx::NodeProto n = g->node(i);
    const std::string base = n.name().empty() ? n.output(0) : n.name();
    std::vector<std::string> floats = {c.weight};
    if (!c.bias.empty()) floats.push_back(c.bias);
    if (options.mode == Fp16Mode::kWeightsOnly) {
      for (const std::string& f : floats) {
        if (!restored.count(f)) {
          absl::StatusOr<std::string> h = half_of(f);
          if (!h.ok()) return h.status();
          const std::string out = namer.Fresh(f + "_fp32");
          *weight_casts.Add() = Cast(namer.Fresh(f + "_cast"), *h, out, onnx::TensorProto::FLOAT);
          restored.emplace(f, out);
        }
      }
      n.set_input(1, restored.at(c.weight));
      if (!c.bias.empty()) n.set_input(2, restored.at(c.bias));
      *nodes.Add() = std::move(n);
    } else {
      const std::string a16 = namer.Fresh(base + "_input_fp16");
      const std::string y16 = namer.Fresh(base + "_output_fp16");
      *nodes.Add() = Cast(namer.Fresh(base + "_input_cast"), n.input(0), a16, onnx::TensorProto::FLOAT16);
      absl::StatusOr<std::string> w = half_of(c.weight);
      if (!w.ok()) return w.status();
      n.set_input(0, a16);
      n.set_input(1, *w);
      if (!c.bias.empty()) {
        absl::StatusOr<std::string> b = half_of(c.bias);
        if (!b.ok()) return b.status();
        n.set_input(2, *b);
      }
      const std::string y = n.output(0);
      n.set_output(0, y16);
      *nodes.Add() = std::move(n);
      *nodes.Add() = Cast(namer.Fresh(base + "_output_cast"), y16, y, onnx::TensorProto::FLOAT);
    }
    report.converted_nodes.push_back(base);
  }
  // Weight casts read only initializers: they go first, which keeps the node list sorted.
  for (auto& n : nodes) *weight_casts.Add() = std::move(n);
  g->mutable_node()->Swap(&weight_casts);
  DropUnusedInitializers(g);
  report.weight_bytes_after = InitializerBytes(*g);
  return report;
}

}  // namespace tide::quantize
