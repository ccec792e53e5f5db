#include "optimize/tide_attention.h"

#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "onnx_graph/graph_util.h"
#include "optimize/graph_index.h"
#include "optimize/graph_rewrite.h"

namespace tide::optimize {
namespace {

// Why node `n` cannot run on ai.tide.PaddedAttention, or "" when it can; `heads` / `head_size` set.
std::string Check(const GraphIndex& ix, const onnx::NodeProto& n, int64_t* heads, int64_t* head_size) {
  if (n.input_size() != 5 || n.output_size() != 1) return "not (q, k, v, bias, key_padding_mask) -> output";
  for (const auto& in : n.input()) {
    if (in.empty()) return "an input is absent";
  }
  if (IntAttribute(n, "unidirectional").value_or(0) != 0) return "unidirectional";
  *heads = IntAttribute(n, "num_heads").value_or(0);
  const onnx::TensorProto* bias = ix.Constant(n.input(3));
  if (*heads <= 0 || bias == nullptr || bias->data_type() != onnx::TensorProto::FLOAT || bias->dims_size() != 1 ||
      bias->dims(0) % (3 * *heads) != 0) {
    return "no num_heads or no constant float bias [3 x heads x head_size]";
  }
  *head_size = bias->dims(0) / (3 * *heads);
  if (*head_size % 16 != 0 || *head_size > 128) return absl::StrCat("head size ", *head_size, " is not 16, 32, ..., 128");
  // The mask must be int32 [B, S]: FuseAttention's Cast of the rank-2 graph input, or that input.
  std::string mask = n.input(4);
  if (const onnx::NodeProto* cast = ix.ProducerOp(mask, "Cast")) {
    if (IntAttribute(*cast, "to").value_or(0) != onnx::TensorProto::INT32) return "key_padding_mask is not int32";
    mask = cast->input(0);
  }
  const onnx::ValueInfoProto* in = ix.IsGraphInput(mask) ? ix.GraphInput(mask) : nullptr;
  if (in == nullptr || !in->type().tensor_type().has_shape() || in->type().tensor_type().shape().dim_size() != 2) {
    return "key_padding_mask is not a rank-2 graph input (or its Cast)";
  }
  if (mask == n.input(4) && in->type().tensor_type().elem_type() != onnx::TensorProto::INT32) {
    return "key_padding_mask is not int32";
  }
  return "";
}

// Why GroupQueryAttention node `n` cannot run on ai.tide.CausalAttention, or "" when it can; sets
// heads, kv_heads and head_size.
std::string CheckGroupQuery(const GraphIndex& ix, const onnx::NodeProto& n, int64_t* heads, int64_t* kv_heads,
                            int64_t* head_size) {
  // q, k, v, past_key, past_value, seqlens_k, total_sequence_length[, cos_cache, sin_cache, ...].
  if (n.input_size() < 7 || n.output_size() < 1) return "not (q, k, v, past_key, past_value, seqlens_k, total_sequence_length)";
  if (n.input(1).empty() || n.input(2).empty()) return "q, k and v are packed in one input";
  if (!n.input(3).empty() || !n.input(4).empty()) return "it reads a past key / value cache";
  for (int i = 7; i < n.input_size(); ++i) {
    if (!n.input(i).empty()) return absl::StrCat("input ", i, " (rotary caches, position ids, attention bias) is given");
  }
  for (int o = 1; o < n.output_size(); ++o) {
    if (!n.output(o).empty() && ix.ReadCount(n.output(o)) > 0) return "its present key / value output is read";
  }
  for (const auto& a : n.attribute()) {
    const std::string& name = a.name();
    if (name == "num_heads" || name == "kv_num_heads" || name == "scale" || name == "rotary_interleaved") continue;
    const bool neutral = (name == "do_rotary" && a.i() == 0) || (name == "local_window_size" && a.i() == -1) ||
                         (name == "smooth_softmax" && a.i() == 0) || (name == "softcap" && a.f() == 0.0f) ||
                         (name == "qk_output" && a.i() == 0);
    if (!neutral) return absl::StrCat("attribute ", name, " is set");
  }
  *heads = IntAttribute(n, "num_heads").value_or(0);
  *kv_heads = IntAttribute(n, "kv_num_heads").value_or(0);
  if (*heads <= 0 || *kv_heads <= 0 || *heads % *kv_heads != 0) return "num_heads is not a positive multiple of kv_num_heads";
  const std::optional<int64_t> width = ProjectedWidth(ix, n.input(2));
  if (!width.has_value() || *width % *kv_heads != 0) return "the value's width is not a projection's known width";
  *head_size = *width / *kv_heads;
  if (*head_size % 16 != 0 || *head_size > 128) return absl::StrCat("head size ", *head_size, " is not 16, 32, ..., 128");
  return "";
}

void AddPrecision(onnx::NodeProto* t, bool bf16) {
  if (!bf16) return;
  onnx::AttributeProto* a = t->add_attribute();
  a->set_name("precision");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(kTidePrecisionBf16);
}

}  // namespace

int UseTideAttention(onnx::ModelProto* model, bool bf16, std::vector<std::string>* skipped) {
  onnx::GraphProto* g = model->mutable_graph();
  GraphIndex ix(*g);
  int rewritten = 0;
  std::vector<onnx::NodeProto> replaced(static_cast<size_t>(g->node_size()));
  std::vector<bool> take(static_cast<size_t>(g->node_size()), false);
  for (int i = 0; i < g->node_size(); ++i) {
    const onnx::NodeProto& n = g->node(i);
    if (n.op_type() != "MultiHeadAttention" || n.domain() != "com.microsoft") continue;
    int64_t heads = 0, head_size = 0;
    const std::string why = Check(ix, n, &heads, &head_size);
    if (!why.empty()) {
      skipped->push_back(absl::StrCat(onnx_graph::NodeName(n), ": kept on ONNX Runtime's attention: ", why));
      continue;
    }
    const onnx::AttributeProto* scale = FindAttribute(n, "scale");
    const float s = scale != nullptr ? scale->f() : 1.0f / std::sqrt(static_cast<float>(head_size));
    if (!(s > 0.0f) || !std::isfinite(s)) {
      skipped->push_back(absl::StrCat(onnx_graph::NodeName(n), ": kept on ONNX Runtime's attention: scale is not positive"));
      continue;
    }
    onnx::NodeProto t;
    t.set_op_type(kTidePaddedAttention);
    t.set_domain(kTideDomain);
    t.set_name(n.name());
    for (const auto& in : n.input()) t.add_input(in);
    t.add_output(n.output(0));
    AddIntAttribute(&t, "num_heads", heads);
    AddFloatAttribute(&t, "scale", s);
    AddPrecision(&t, bf16);
    replaced[static_cast<size_t>(i)] = std::move(t);
    take[static_cast<size_t>(i)] = true;
    ++rewritten;
  }
  for (int i = 0; i < g->node_size(); ++i) {
    if (take[static_cast<size_t>(i)]) *g->mutable_node(i) = std::move(replaced[static_cast<size_t>(i)]);
  }
  if (rewritten > 0) onnx_graph::EnsureOpset(model, kTideDomain, 1);
  return rewritten;
}

int UseTideCausalAttention(onnx::ModelProto* model, bool bf16, std::vector<std::string>* skipped) {
  onnx::GraphProto* g = model->mutable_graph();
  GraphIndex ix(*g);
  NodeReplacements edits;
  for (int i = 0; i < g->node_size(); ++i) {
    const onnx::NodeProto& n = g->node(i);
    if (n.op_type() != "GroupQueryAttention" || n.domain() != "com.microsoft") continue;
    int64_t heads = 0, kv_heads = 0, head_size = 0;
    const std::string why = CheckGroupQuery(ix, n, &heads, &kv_heads, &head_size);
    if (!why.empty()) {
      skipped->push_back(absl::StrCat(onnx_graph::NodeName(n), ": kept on ONNX Runtime's GroupQueryAttention: ", why));
      continue;
    }
    const onnx::AttributeProto* scale = FindAttribute(n, "scale");
    const float s = scale != nullptr && scale->f() != 0.0f ? scale->f() : 1.0f / std::sqrt(static_cast<float>(head_size));
    if (!(s > 0.0f) || !std::isfinite(s)) {
      skipped->push_back(
          absl::StrCat(onnx_graph::NodeName(n), ": kept on ONNX Runtime's GroupQueryAttention: scale is not positive"));
      continue;
    }
    onnx::NodeProto t;
    t.set_op_type(kTideCausalAttention);
    t.set_domain(kTideDomain);
    t.set_name(n.name());
    for (int in : {0, 1, 2, 5}) t.add_input(n.input(in));
    t.add_output(n.output(0));
    AddIntAttribute(&t, "num_heads", heads);
    AddIntAttribute(&t, "kv_num_heads", kv_heads);
    AddFloatAttribute(&t, "scale", s);
    AddPrecision(&t, bf16);
    edits.replace[i] = std::move(t);
  }
  const int rewritten = static_cast<int>(edits.replace.size());
  edits.ApplyTo(g);
  if (rewritten > 0) onnx_graph::EnsureOpset(model, kTideDomain, 1);
  return rewritten;
}

}  // namespace tide::optimize
