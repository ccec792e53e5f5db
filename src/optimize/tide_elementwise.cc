#include "optimize/tide_elementwise.h"

#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "onnx_graph/graph_util.h"
#include "optimize/graph_index.h"
#include "optimize/graph_rewrite.h"
#include "optimize/tide_attention.h"

namespace tide::optimize {
namespace {

bool Near(std::optional<double> v, double want) { return v.has_value() && std::fabs(*v - want) <= 1e-4 * std::fabs(want); }

// The node reading `value` when it is its only reader, else nullptr.
const onnx::NodeProto* SoleReader(const GraphIndex& ix, const std::string& value) {
  if (ix.ReadCount(value) != 1 || ix.Consumers(value).size() != 1) return nullptr;
  return &ix.graph().node(ix.Consumers(value)[0]);
}

bool IsOp(const onnx::NodeProto* n, const char* op) { return n != nullptr && n->op_type() == op && IsDefaultDomain(*n); }

// The other input of binary node `n` when one input is `value`, else "".
std::string OtherInput(const onnx::NodeProto& n, const std::string& value) {
  if (n.input_size() != 2) return "";
  if (n.input(0) == value) return n.input(1);
  if (n.input(1) == value) return n.input(0);
  return "";
}

// The constant float vector behind `value`, its length in *n; false otherwise.
bool FloatVector(const GraphIndex& ix, const std::string& value, int64_t* n) {
  const onnx::TensorProto* t = ix.Constant(value);
  if (t == nullptr || t->data_type() != onnx::TensorProto::FLOAT || t->dims_size() != 1) return false;
  *n = t->dims(0);
  return true;
}

struct GeluMatch {
  int last = -1;        // index of the node writing the GELU's output
  std::string output;
};

// The GELU of `a` (erf decomposition or a Gelu node) whose every reader of `a` belongs to it.
std::optional<GeluMatch> MatchGelu(const GraphIndex& ix, const std::string& a) {
  const std::vector<int>& readers = ix.Consumers(a);
  if (readers.size() == 1 && ix.ReadCount(a) == 1) {
    const onnx::NodeProto& n = ix.graph().node(readers[0]);
    const bool onnx_gelu = n.op_type() == "Gelu" && IsDefaultDomain(n) && FindAttribute(n, "approximate") == nullptr;
    const bool ms_gelu = n.op_type() == "Gelu" && n.domain() == "com.microsoft";
    if ((onnx_gelu || ms_gelu) && n.output_size() == 1) return GeluMatch{readers[0], n.output(0)};
    return std::nullopt;
  }
  if (readers.size() != 2 || ix.ReadCount(a) != 2) return std::nullopt;
  // One reader scales a by 1/sqrt 2 for Erf, the other multiplies it (by 0.5 or by 1 + erf).
  for (int side = 0; side < 2; ++side) {
    const onnx::NodeProto& scale = ix.graph().node(readers[static_cast<size_t>(side)]);
    const onnx::NodeProto& mul = ix.graph().node(readers[static_cast<size_t>(1 - side)]);
    if (scale.input_size() != 2 || scale.input(0) != a || !IsOp(&mul, "Mul")) continue;
    const bool div = IsOp(&scale, "Div") && Near(ix.ScalarConstant(scale.input(1)), std::sqrt(2.0));
    const bool mul_scale = IsOp(&scale, "Mul") && Near(ix.ScalarConstant(scale.input(1)), std::sqrt(0.5));
    if (!div && !mul_scale) continue;
    const onnx::NodeProto* erf = SoleReader(ix, scale.output(0));
    if (!IsOp(erf, "Erf")) continue;
    const onnx::NodeProto* plus = SoleReader(ix, erf->output(0));
    if (!IsOp(plus, "Add") || !Near(ix.ScalarConstant(OtherInput(*plus, erf->output(0))), 1.0)) continue;
    const onnx::NodeProto* times = SoleReader(ix, plus->output(0));  // * x or * (0.5 x)
    if (!IsOp(times, "Mul")) continue;
    const std::string other = OtherInput(mul, a);
    if (Near(ix.ScalarConstant(other), 0.5)) {
      // (0.5 x) * (1 + erf)
      if (OtherInput(*times, plus->output(0)) != mul.output(0) || SoleReader(ix, mul.output(0)) != times) continue;
      return GeluMatch{ix.Producer(times->output(0)).value_or(-1), times->output(0)};
    }
    // (x * (1 + erf)) * 0.5
    if (&mul != times) continue;
    const onnx::NodeProto* half = SoleReader(ix, mul.output(0));
    if (!IsOp(half, "Mul") || !Near(ix.ScalarConstant(OtherInput(*half, mul.output(0))), 0.5)) continue;
    return GeluMatch{ix.Producer(half->output(0)).value_or(-1), half->output(0)};
  }
  return std::nullopt;
}

// Only the first output is read (the others absent or unread).
bool OnlyFirstOutputRead(const GraphIndex& ix, const onnx::NodeProto& n) {
  for (int o = 1; o < n.output_size(); ++o) {
    if (!n.output(o).empty() && ix.ReadCount(n.output(o)) > 0) return false;
  }
  return true;
}

float EpsilonOf(const onnx::NodeProto& n, float fallback) {
  const onnx::AttributeProto* e = FindAttribute(n, "epsilon");
  return e != nullptr && e->type() == onnx::AttributeProto::FLOAT ? e->f() : fallback;
}

}  // namespace

TideElementwiseCount UseTideElementwise(onnx::ModelProto* model, std::vector<std::string>* skipped) {
  onnx::GraphProto* g = model->mutable_graph();
  GraphIndex ix(*g);
  TideElementwiseCount count;
  NodeReplacements edits;
  std::vector<onnx::TensorProto> zeros;
  // A zero [n] initializer standing in for an absent beta or bias.
  auto zero_vector = [&](const std::string& node, const char* what, int64_t n) {
    const std::string name = absl::StrCat(node, "_tide_zero_", what);
    zeros.push_back(MakeFloatTensor(name, {n}, std::vector<float>(static_cast<size_t>(n), 0.0f)));
    return name;
  };
  for (int i = 0; i < g->node_size(); ++i) {
    const onnx::NodeProto& n = g->node(i);
    const std::string name = onnx_graph::NodeName(n);
    if (IsOp(&n, "Add") && n.input_size() == 2 && n.output_size() == 1) {
      std::optional<GeluMatch> gelu = MatchGelu(ix, n.output(0));
      if (!gelu.has_value() || gelu->last < 0) continue;
      int64_t width = 0;
      int bias_side = -1;
      for (int side = 0; side < 2; ++side) {
        if (FloatVector(ix, n.input(side), &width)) bias_side = side;
      }
      if (bias_side < 0) {
        skipped->push_back(absl::StrCat(name, ": GELU kept on ONNX Runtime: no constant float bias [N] in its Add"));
        continue;
      }
      onnx::NodeProto t;
      t.set_op_type(kTideBiasGelu);
      t.set_domain(kTideDomain);
      t.set_name(absl::StrCat(name, "_TideBiasGelu"));
      t.add_input(n.input(1 - bias_side));
      t.add_input(n.input(bias_side));
      t.add_output(gelu->output);
      edits.replace[gelu->last] = std::move(t);
      ++count.bias_gelu;
      continue;
    }
    const bool skip_ln = n.op_type() == "SkipLayerNormalization" && n.domain() == "com.microsoft";
    const bool ln = IsOp(&n, "LayerNormalization");
    if (!skip_ln && !ln) continue;
    const int gamma_at = skip_ln ? 2 : 1;
    int64_t width = 0;
    std::string why;
    if (n.input_size() <= gamma_at || !FloatVector(ix, n.input(gamma_at), &width)) {
      why = "gamma is not a constant float [N]";
    } else if (!OnlyFirstOutputRead(ix, n)) {
      why = "an output beside the first is read";
    } else if (ln && IntAttribute(n, "axis").value_or(-1) != -1) {
      why = "axis is not -1";
    } else if (skip_ln && (n.input_size() < 2 || n.input(0).empty() || n.input(1).empty())) {
      why = "no input or no skip";
    }
    if (!why.empty()) {
      skipped->push_back(absl::StrCat(name, ": layer norm kept on ONNX Runtime: ", why));
      continue;
    }
    auto optional_input = [&](int at, const char* what) {
      return n.input_size() > at && !n.input(at).empty() ? n.input(at) : zero_vector(name, what, width);
    };
    onnx::NodeProto t;
    t.set_domain(kTideDomain);
    t.set_name(absl::StrCat(name, "_Tide"));
    if (skip_ln) {
      t.set_op_type(kTideSkipLayerNorm);
      t.add_input(n.input(0));
      t.add_input(n.input(1));
      t.add_input(n.input(2));
      t.add_input(optional_input(3, "beta"));
      t.add_input(optional_input(4, "bias"));
    } else {
      t.set_op_type(kTideLayerNorm);
      t.add_input(n.input(0));
      t.add_input(n.input(1));
      t.add_input(optional_input(2, "beta"));
    }
    t.add_output(n.output(0));
    // ONNX LayerNormalization's default epsilon is 1e-5; ONNX Runtime's SkipLayerNormalization's 1e-12.
    AddFloatAttribute(&t, "epsilon", EpsilonOf(n, skip_ln ? 1e-12f : 1e-5f));
    edits.replace[i] = std::move(t);
    ++count.layer_norm;
  }
  if (edits.empty()) return count;
  edits.ApplyTo(g);
  for (auto& z : zeros) *g->add_initializer() = std::move(z);
  onnx_graph::EnsureOpset(model, kTideDomain, 1);
  return count;
}

}  // namespace tide::optimize
