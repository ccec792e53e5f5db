#include "optimize/pooled_token.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "optimize/graph_index.h"
#include "optimize/graph_rewrite.h"
#include "optimize/tide_attention.h"
#include "optimize/tide_elementwise.h"

namespace tide::optimize {
namespace {

// A constant that broadcasts the same way onto every position: at most its last axis is > 1.
bool SameForEveryPosition(const onnx::TensorProto& t) {
  for (int i = 0; i + 1 < t.dims_size(); ++i) {
    if (t.dims(i) != 1) return false;
  }
  return true;
}

bool IsConstantInput(const GraphIndex& ix, const onnx::NodeProto& n, int i) {
  return i >= n.input_size() || n.input(i).empty() || ix.Constant(n.input(i)) != nullptr;
}

// The inputs `n` reads position by position when it is row-wise (a narrowed `n` reads their first
// position only); nullopt when it is not row-wise (pooled_token.h lists the operators).
std::optional<std::vector<int>> RowWiseInputs(const GraphIndex& ix, const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  auto constants_from = [&](int first) {
    for (int i = first; i < n.input_size(); ++i) {
      if (!IsConstantInput(ix, n, i)) return false;
    }
    return true;
  };
  // First input dynamic, the rest constant.
  auto first_only = [&]() -> std::optional<std::vector<int>> {
    if (n.input_size() == 0 || IsConstantInput(ix, n, 0) || !constants_from(1)) return std::nullopt;
    return std::vector<int>{0};
  };
  if (IsDefaultDomain(n)) {
    if (op == "MatMul") {
      const onnx::TensorProto* w = n.input_size() == 2 ? ix.Constant(n.input(1)) : nullptr;
      if (w == nullptr || w->dims_size() != 2) return std::nullopt;
      return first_only();
    }
    if (op == "Erf" || op == "Tanh" || op == "Relu" || op == "Sigmoid" || op == "Gelu" || op == "Cast") {
      return first_only();
    }
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
      if (n.input_size() != 2) return std::nullopt;
      std::vector<int> dynamic;
      for (int i = 0; i < 2; ++i) {
        if (IsConstantInput(ix, n, i)) {
          if (!SameForEveryPosition(*ix.Constant(n.input(i)))) return std::nullopt;
        } else {
          dynamic.push_back(i);
        }
      }
      if (dynamic.empty()) return std::nullopt;
      return dynamic;
    }
    if (op == "LayerNormalization") {
      const std::optional<int64_t> axis = IntAttribute(n, "axis");
      if (axis.has_value() && *axis != -1) return std::nullopt;
      return first_only();
    }
    return std::nullopt;
  }
  if (n.domain() == "com.microsoft") {
    if (op == "DynamicQuantizeMatMul") {
      const onnx::TensorProto* w = n.input_size() >= 2 ? ix.Constant(n.input(1)) : nullptr;
      if (w == nullptr || w->dims_size() != 2) return std::nullopt;
      return first_only();
    }
    if (op == "BiasGelu" || op == "Gelu" || op == "FastGelu") return first_only();
    if (op == "SkipLayerNormalization") {
      if (n.input_size() < 2 || IsConstantInput(ix, n, 0) || IsConstantInput(ix, n, 1) || !constants_from(2)) {
        return std::nullopt;
      }
      return std::vector<int>{0, 1};
    }
    return std::nullopt;
  }
  if (n.domain() == kTideDomain) {
    if (op == kTideBiasGelu || op == kTideLayerNorm) return first_only();
    if (op == kTideSkipLayerNorm) {
      if (n.input_size() < 2 || IsConstantInput(ix, n, 0) || IsConstantInput(ix, n, 1) || !constants_from(2)) {
        return std::nullopt;
      }
      return std::vector<int>{0, 1};
    }
    // The query alone: keys, values, bias and mask stay whole.
    if (op == kTidePaddedAttention && n.input_size() >= 1 && !IsConstantInput(ix, n, 0)) return std::vector<int>{0};
  }
  return std::nullopt;
}

// Gather(data, 0, axis 1): the head reading the first position.
bool IsFirstPositionGather(const GraphIndex& ix, const onnx::NodeProto& n) {
  if (!IsDefaultDomain(n) || n.op_type() != "Gather" || n.input_size() != 2) return false;
  const std::optional<int64_t> axis = IntAttribute(n, "axis");
  const std::optional<double> at = ix.ScalarConstant(n.input(1));
  return axis.has_value() && *axis == 1 && at.has_value() && *at == 0.0;
}

}  // namespace

int PruneLastLayer(onnx::ModelProto* model, std::vector<std::string>* skipped) {
  onnx::GraphProto* g = model->mutable_graph();
  const GraphIndex ix(*g);
  const int n_nodes = g->node_size();
  std::vector<char> pool(static_cast<size_t>(n_nodes), 0), narrowed(static_cast<size_t>(n_nodes), 0);
  std::vector<std::vector<int>> rows(static_cast<size_t>(n_nodes));
  bool any_pool = false;
  for (int i = 0; i < n_nodes; ++i) {
    if (IsFirstPositionGather(ix, g->node(i))) pool[static_cast<size_t>(i)] = any_pool = true;
  }
  if (!any_pool) {
    skipped->push_back("pooled token: the last layer stays whole: no Gather(hidden, 0, axis 1) reads a first position");
    return 0;
  }
  // Whether every read of `value` by node c is at a position c reads row by row when narrowed.
  auto reads_first_position = [&](int c, const std::string& value) {
    const onnx::NodeProto& reader = g->node(c);
    for (int k = 0; k < reader.input_size(); ++k) {
      if (reader.input(k) != value) continue;
      if (pool[static_cast<size_t>(c)]) {
        if (k != 0) return false;
      } else {
        const std::vector<int>& r = rows[static_cast<size_t>(c)];
        if (!narrowed[static_cast<size_t>(c)] || std::find(r.begin(), r.end(), k) == r.end()) return false;
      }
    }
    return true;
  };
  // Reverse topological order: a node's readers are decided before it.
  bool any_attention = false;
  int count = 0;
  for (int i = n_nodes - 1; i >= 0; --i) {
    const onnx::NodeProto& n = g->node(i);
    std::optional<std::vector<int>> r = RowWiseInputs(ix, n);
    if (!r.has_value()) continue;
    bool ok = true, read = false;
    for (const std::string& out : n.output()) {
      if (out.empty()) continue;
      if (ix.IsGraphOutput(out)) ok = false;
      int main_reads = 0;
      for (int c : ix.Consumers(out)) {
        read = true;
        for (const std::string& in : g->node(c).input()) main_reads += in == out ? 1 : 0;
        if (!reads_first_position(c, out)) ok = false;
      }
      if (main_reads != ix.ReadCount(out)) ok = false;  // read by a subgraph or as a graph output
    }
    if (!ok || !read) continue;
    narrowed[static_cast<size_t>(i)] = 1;
    rows[static_cast<size_t>(i)] = *std::move(r);
    ++count;
    if (n.domain() == kTideDomain && n.op_type() == kTidePaddedAttention) any_attention = true;
  }
  if (!any_attention) {
    skipped->push_back(
        "pooled token: the last layer stays whole: no ai.tide.PaddedAttention feeds the first-position Gather through "
        "row-wise operators alone");
    return 0;
  }

  // The values narrowed nodes read whole-shaped: each gets one Gather(value, [0], axis 1) -> [batch,
  // 1, ...], placed right after its producer (or first, for a graph input). (A Slice there aborts
  // ONNX Runtime 1.29's session creation in a std::clamp assertion.)
  const std::string first = "tide_pooled_token_position";
  std::map<std::string, std::string> slice_of;
  std::unordered_set<std::string> narrowed_value;
  for (int i = 0; i < n_nodes; ++i) {
    if (!narrowed[static_cast<size_t>(i)]) continue;
    for (const std::string& out : g->node(i).output()) narrowed_value.insert(out);
  }
  for (int i = 0; i < n_nodes; ++i) {
    if (!narrowed[static_cast<size_t>(i)]) continue;
    for (int k : rows[static_cast<size_t>(i)]) {
      const std::string& in = g->node(i).input(k);
      if (in.empty() || narrowed_value.count(in) > 0) continue;
      slice_of.emplace(in, absl::StrCat(in, "_tide_pooled_token"));
    }
  }
  auto slice_node = [&](const std::string& value) {
    onnx::NodeProto s;
    s.set_op_type("Gather");
    s.set_name(slice_of.at(value));
    s.add_input(value);
    s.add_input(first);
    s.add_output(slice_of.at(value));
    onnx::AttributeProto* axis = s.add_attribute();
    axis->set_name("axis");
    axis->set_type(onnx::AttributeProto::INT);
    axis->set_i(1);
    return s;
  };
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  std::set<std::string> placed;
  for (const auto& [value, slice] : slice_of) {
    if (!ix.Producer(value).has_value()) {
      *nodes.Add() = slice_node(value);
      placed.insert(value);
    }
  }
  for (int i = 0; i < n_nodes; ++i) {
    onnx::NodeProto n = g->node(i);
    if (narrowed[static_cast<size_t>(i)]) {
      for (int k : rows[static_cast<size_t>(i)]) {
        auto it = slice_of.find(n.input(k));
        if (it != slice_of.end()) n.set_input(k, it->second);
      }
    }
    *nodes.Add() = std::move(n);
    for (const std::string& out : g->node(i).output()) {
      if (slice_of.count(out) > 0 && placed.insert(out).second) *nodes.Add() = slice_node(out);
    }
  }
  g->mutable_node()->Swap(&nodes);
  *g->add_initializer() = MakeInt64Vector(first, {0});
  // Narrowed values are [batch, 1, ...] now: drop what the graph said of their shapes.
  auto* info = g->mutable_value_info();
  info->erase(std::remove_if(info->begin(), info->end(),
                             [&](const onnx::ValueInfoProto& v) { return narrowed_value.count(v.name()) > 0; }),
              info->end());
  return count;
}

}  // namespace tide::optimize
