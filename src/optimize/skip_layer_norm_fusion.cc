#include "optimize/skip_layer_norm_fusion.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "optimize/graph_index.h"
#include "optimize/graph_rewrite.h"

namespace tide::optimize {

namespace {

// A 1-D float32 constant of `width` values (gamma, beta, bias); its initializer's name or "".
std::string VectorConstant(const GraphIndex& ix, const std::string& value, int64_t width) {
  const onnx::TensorProto* t = ix.Constant(value);
  if (t == nullptr || t->data_type() != onnx::TensorProto::FLOAT || t->dims_size() != 1 || t->dims(0) != width) return "";
  return t->name();
}

struct SkipInput {
  std::string input;  // the projection output (before its bias)
  std::string bias;   // constant bias folded in, or ""
};

// `value` = P or Add(P, bias) (bias read only there) where P is a weight projection of `width`.
std::optional<SkipInput> MatchProjectionSide(const GraphIndex& ix, const std::string& value, int64_t width) {
  if (WeightProjectionWidth(ix, value) == width) return SkipInput{value, ""};
  const onnx::NodeProto* add = ix.ProducerOp(value, "Add");
  if (add == nullptr || add->input_size() != 2 || ix.ReadCount(value) != 1) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const std::string bias = VectorConstant(ix, add->input(side), width);
    if (!bias.empty() && WeightProjectionWidth(ix, add->input(1 - side)) == width) {
      return SkipInput{add->input(1 - side), bias};
    }
  }
  return std::nullopt;
}

}  // namespace

int FuseSkipLayerNorm(onnx::GraphProto* g, std::vector<std::string>* skipped) {
  GraphIndex ix(*g);
  NodeReplacements edits;
  int fused = 0;
  for (int i = 0; i < g->node_size(); ++i) {
    const onnx::NodeProto& ln = g->node(i);
    if (ln.op_type() != "LayerNormalization" || !IsDefaultDomain(ln) || ln.input_size() < 2) continue;
    const onnx::NodeProto* add = ix.ProducerOp(ln.input(0), "Add");
    if (add == nullptr || add->input_size() != 2) continue;  // not a residual LayerNorm
    const std::string name = ln.name().empty() ? ln.output(0) : ln.name();
    auto skip = [&](const std::string& why) { skipped->push_back(absl::StrCat(name, ": skip-layernorm not fused: ", why)); };
    if (IntAttribute(ln, "axis").value_or(-1) != -1) {
      skip("axis is not -1");
      continue;
    }
    bool extra_outputs = false;
    for (int o = 1; o < ln.output_size(); ++o) extra_outputs = extra_outputs || (!ln.output(o).empty() && ix.ReadCount(ln.output(o)) > 0);
    if (extra_outputs) {
      skip("Mean/InvStdDev outputs are read");
      continue;
    }
    const onnx::TensorProto* gamma_t = ix.Constant(ln.input(1));
    if (gamma_t == nullptr || gamma_t->dims_size() != 1) {
      skip("gamma is not a constant vector");
      continue;
    }
    const int64_t width = gamma_t->dims(0);
    const std::string gamma = VectorConstant(ix, ln.input(1), width);
    const std::string beta = ln.input_size() > 2 && !ln.input(2).empty() ? VectorConstant(ix, ln.input(2), width) : "";
    if (gamma.empty() || (ln.input_size() > 2 && !ln.input(2).empty() && beta.empty())) {
      skip("gamma/beta are not float32 constants of the normalised width");
      continue;
    }
    if (ix.ReadCount(ln.input(0)) != 1) {
      skip("the residual sum is read elsewhere");
      continue;
    }
    std::optional<SkipInput> in;
    std::string residual;
    for (int side = 0; side < 2 && !in; ++side) {
      in = MatchProjectionSide(ix, add->input(side), width);
      if (in) residual = add->input(1 - side);
    }
    if (!in) {
      skip(absl::StrCat("neither Add input is a weight projection of width ", width, " (+ constant bias)"));
      continue;
    }
    onnx::NodeProto sln;
    sln.set_op_type("SkipLayerNormalization");
    sln.set_domain("com.microsoft");
    sln.set_name(absl::StrCat(name, "_SkipLayerNorm"));
    sln.add_input(in->input);
    sln.add_input(residual);
    sln.add_input(gamma);
    sln.add_input(beta);
    if (!in->bias.empty()) sln.add_input(in->bias);
    sln.add_output(ln.output(0));
    float epsilon = 1e-5f;
    if (const onnx::AttributeProto* e = FindAttribute(ln, "epsilon"); e != nullptr && e->type() == onnx::AttributeProto::FLOAT) {
      epsilon = e->f();
    }
    AddFloatAttribute(&sln, "epsilon", epsilon);
    edits.replace[i] = std::move(sln);
    ++fused;
  }
  edits.ApplyTo(g);
  return fused;
}

}  // namespace tide::optimize
