#include "optimize/padding_mask_in_keys.h"

#include <cmath>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "onnx_graph/graph_util.h"
#include "optimize/graph_index.h"
#include "optimize/graph_rewrite.h"

namespace tide::optimize {
namespace {

using onnx_graph::NodeName;

onnx::NodeProto Op(const std::string& op, const std::string& name, std::vector<std::string> inputs,
                   const std::string& output) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(name);
  for (auto& i : inputs) n.add_input(std::move(i));
  n.add_output(output);
  return n;
}

struct Candidate {
  int64_t heads = 0, head_size = 0;
  float scale = 0, fill = 0;
  std::string mask_input;  // the rank-2 graph input behind key_padding_mask
  const onnx::TensorProto* bias = nullptr;
};

std::optional<Candidate> Match(const GraphIndex& ix, const onnx::NodeProto& n, std::string* why) {
  if (n.input_size() != 5 || n.output_size() != 1) {
    *why = "not (q, k, v, bias, key_padding_mask) -> output";
    return std::nullopt;
  }
  for (const auto& in : n.input()) {
    if (in.empty()) {
      *why = "an input is absent";
      return std::nullopt;
    }
  }
  if (IntAttribute(n, "unidirectional").value_or(0) != 0) {
    *why = "unidirectional";
    return std::nullopt;
  }
  Candidate c;
  c.heads = IntAttribute(n, "num_heads").value_or(0);
  c.bias = ix.Constant(n.input(3));
  if (c.heads <= 0 || c.bias == nullptr || c.bias->data_type() != onnx::TensorProto::FLOAT ||
      c.bias->dims_size() != 1 || c.bias->dims(0) % (3 * c.heads) != 0) {
    *why = "no num_heads or no constant float bias [3 x heads x head_size]";
    return std::nullopt;
  }
  c.head_size = c.bias->dims(0) / (3 * c.heads);
  const onnx::AttributeProto* scale = FindAttribute(n, "scale");
  c.scale = scale != nullptr ? scale->f() : 1.0f / std::sqrt(static_cast<float>(c.head_size));
  const onnx::AttributeProto* fill = FindAttribute(n, "mask_filter_value");
  c.fill = fill != nullptr ? fill->f() : -10000.0f;
  if (!(c.scale > 0.0f) || !std::isfinite(c.fill)) {
    *why = "scale is not positive or mask_filter_value is not finite";
    return std::nullopt;
  }
  std::string mask = n.input(4);
  if (const onnx::NodeProto* cast = ix.ProducerOp(mask, "Cast")) mask = cast->input(0);
  const onnx::ValueInfoProto* in = ix.IsGraphInput(mask) ? ix.GraphInput(mask) : nullptr;
  if (in == nullptr || !in->type().tensor_type().has_shape() || in->type().tensor_type().shape().dim_size() != 2) {
    *why = "key_padding_mask is not a rank-2 graph input (or its Cast)";
    return std::nullopt;
  }
  c.mask_input = mask;
  return c;
}

}  // namespace

int MovePaddingMaskIntoKeys(onnx::GraphProto* g, int opset, std::vector<std::string>* skipped) {
  std::vector<int> targets;
  for (int i = 0; i < g->node_size(); ++i) {
    const onnx::NodeProto& n = g->node(i);
    if (n.op_type() == "MultiHeadAttention" && n.domain() == "com.microsoft") targets.push_back(i);
  }
  if (targets.empty()) return 0;
  if (opset < 11) {
    skipped->push_back(absl::StrCat("MultiHeadAttention: padding mask kept (opset ", opset, " < 11 has no Pad with pads as input)"));
    return 0;
  }
  GraphIndex ix(*g);
  onnx_graph::Namer namer(*g);
  std::vector<onnx::NodeProto> prepend;
  std::map<int, std::vector<onnx::NodeProto>> replace;
  std::vector<onnx::TensorProto> initializers;
  std::map<std::vector<int64_t>, std::string> int_constants;
  auto ints = [&](const std::string& hint, const std::vector<int64_t>& v) -> std::string {
    std::string& name = int_constants[v];
    if (name.empty()) {
      name = namer.Fresh(hint);
      initializers.push_back(MakeInt64Vector(name, v));
    }
    return name;
  };
  auto scalar = [&](const std::string& hint, float v) {
    const std::string name = namer.Fresh(hint);
    initializers.push_back(MakeFloatTensor(name, {}, {v}));
    return name;
  };
  // Key column m [B, S, N, 1] per (mask input, fill / scale, heads).
  std::map<std::tuple<std::string, float, int64_t>, std::string> key_columns;
  for (int index : targets) {
    const onnx::NodeProto& n = g->node(index);
    std::string why;
    std::optional<Candidate> c = Match(ix, n, &why);
    if (!c) {
      skipped->push_back(absl::StrCat(NodeName(n), ": padding mask kept: ", why));
      continue;
    }
    const int64_t N = c->heads, d = c->head_size;
    const float coefficient = c->fill / c->scale;
    std::string& column = key_columns[{c->mask_input, coefficient, N}];
    if (column.empty()) {
      const std::string base = namer.Fresh(absl::StrCat(c->mask_input, "_key_column"));
      const std::string as_float = namer.Fresh(base + "_float");
      onnx::NodeProto cast = Op("Cast", namer.Fresh(base + "_cast"), {c->mask_input}, as_float);
      AddIntAttribute(&cast, "to", onnx::TensorProto::FLOAT);
      prepend.push_back(std::move(cast));
      const std::string bs11 = namer.Fresh(base + "_bs11");
      prepend.push_back(Op("Reshape", namer.Fresh(base + "_reshape"), {as_float, ints("shape_0_0_1_1", {0, 0, 1, 1})}, bs11));
      const std::string inverted = namer.Fresh(base + "_inverted");
      prepend.push_back(Op("Sub", namer.Fresh(base + "_sub"), {scalar(base + "_one", 1.0f), bs11}, inverted));
      const std::string scaled = namer.Fresh(base + "_scaled");
      prepend.push_back(Op("Mul", namer.Fresh(base + "_mul"), {inverted, scalar(base + "_coefficient", coefficient)}, scaled));
      column = namer.Fresh(base);
      prepend.push_back(Op("Expand", namer.Fresh(base + "_expand"), {scaled, ints("shape_1_1_heads_1", {1, 1, N, 1})}, column));
    }
    const std::string base = NodeName(n);
    const std::string split_heads = ints("shape_0_0_heads_d", {0, 0, N, d});
    const std::string merge_heads = ints("shape_0_0_heads_x_d1", {0, 0, N * (d + 1)});
    std::vector<onnx::NodeProto> nodes;
    // q' = [q_head, 1] per head.
    const std::string q4 = namer.Fresh(base + "_q_heads");
    nodes.push_back(Op("Reshape", namer.Fresh(base + "_q_split"), {n.input(0), split_heads}, q4));
    const std::string q5 = namer.Fresh(base + "_q_padded");
    nodes.push_back(Op("Pad", namer.Fresh(base + "_q_pad"),
                       {q4, ints("pads_last_axis_plus_1", {0, 0, 0, 0, 0, 0, 0, 1}), scalar(base + "_q_pad_value", 1.0f)}, q5));
    const std::string q_new = namer.Fresh(base + "_q_with_one");
    nodes.push_back(Op("Reshape", namer.Fresh(base + "_q_merge"), {q5, merge_heads}, q_new));
    // k' = [k_head, m] per head.
    const std::string k4 = namer.Fresh(base + "_k_heads");
    nodes.push_back(Op("Reshape", namer.Fresh(base + "_k_split"), {n.input(1), split_heads}, k4));
    const std::string k5 = namer.Fresh(base + "_k_masked");
    onnx::NodeProto concat = Op("Concat", namer.Fresh(base + "_k_concat"), {k4, column}, k5);
    AddIntAttribute(&concat, "axis", 3);
    nodes.push_back(std::move(concat));
    const std::string k_new = namer.Fresh(base + "_k_with_mask");
    nodes.push_back(Op("Reshape", namer.Fresh(base + "_k_merge"), {k5, merge_heads}, k_new));
    // The bias gets a 0 after each q and k head; v's part is unchanged.
    std::vector<float> old_bias(static_cast<size_t>(3 * N * d)), new_bias;
    {
      auto values = ix.ConstantValues(n.input(3));
      if (!values || values->size() != old_bias.size()) {
        skipped->push_back(absl::StrCat(base, ": padding mask kept: bias values unreadable"));
        continue;
      }
      for (size_t i = 0; i < old_bias.size(); ++i) old_bias[i] = static_cast<float>((*values)[i]);
    }
    for (int64_t part = 0; part < 2; ++part) {
      for (int64_t h = 0; h < N; ++h) {
        for (int64_t j = 0; j < d; ++j) new_bias.push_back(old_bias[static_cast<size_t>(part * N * d + h * d + j)]);
        new_bias.push_back(0.0f);
      }
    }
    new_bias.insert(new_bias.end(), old_bias.begin() + 2 * N * d, old_bias.end());
    const std::string bias = namer.Fresh(base + "_bias_with_mask_column");
    initializers.push_back(MakeFloatTensor(bias, {static_cast<int64_t>(new_bias.size())}, new_bias));

    onnx::NodeProto mha = n;
    mha.clear_input();
    for (const std::string& in : {q_new, k_new, n.input(2), bias}) mha.add_input(in);
    mha.clear_attribute();
    for (const auto& a : n.attribute()) {
      if (a.name() != "scale") *mha.add_attribute() = a;
    }
    AddFloatAttribute(&mha, "scale", c->scale);  // explicit: the default would use d + 1
    nodes.push_back(std::move(mha));
    replace[index] = std::move(nodes);
  }
  if (replace.empty()) return 0;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> out;
  for (auto& p : prepend) *out.Add() = std::move(p);
  for (int i = 0; i < g->node_size(); ++i) {
    auto it = replace.find(i);
    if (it == replace.end()) {
      *out.Add() = g->node(i);
      continue;
    }
    for (auto& r : it->second) *out.Add() = std::move(r);
  }
  g->mutable_node()->Swap(&out);
  for (auto& t : initializers) *g->add_initializer() = std::move(t);
  return static_cast<int>(replace.size());
}

}  // namespace tide::optimize
