#include "optimize/prompt_prefix.h"

#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "domain/model_signature.h"
#include "onnx_graph/graph_util.h"
#include "optimize/graph_index.h"
#include "optimize/graph_rewrite.h"
#include "optimize/tide_attention.h"

namespace tide::optimize {
namespace {

// Attention operators other than ai.tide.CausalAttention: a graph with any of them is not one
// prefix inputs can be added to (its attention would not see the prefix).
bool IsOtherAttention(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (n.domain() == kTideDomain) return op == kTidePaddedAttention;
  if (n.domain() == "com.microsoft") {
    return op == "GroupQueryAttention" || op == "MultiHeadAttention" || op == "Attention" ||
           op == "PackedMultiHeadAttention" || op == "SparseAttention";
  }
  return IsDefaultDomain(n) && op == "Attention";
}

onnx::NodeProto Node(const std::string& op, std::vector<std::string> inputs, const std::string& output) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(output);
  for (std::string& in : inputs) n.add_input(std::move(in));
  n.add_output(output);
  return n;
}

void AddFloatValue(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* values, const std::string& name,
                   const std::string& dim0, const std::string& dim1, int64_t width, int64_t fixed0 = 0) {
  onnx::ValueInfoProto* v = values->Add();
  v->set_name(name);
  onnx::TypeProto_Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  onnx::TensorShapeProto* shape = t->mutable_shape();
  if (fixed0 > 0) shape->add_dim()->set_dim_value(fixed0); else shape->add_dim()->set_dim_param(dim0);
  shape->add_dim()->set_dim_param(dim1);
  shape->add_dim()->set_dim_value(width);
}

struct PrefixedAttention {
  int node = 0;
  int64_t width = 0;
};

}  // namespace

int AddPromptPrefixInputs(onnx::ModelProto* model, std::vector<std::string>* skipped) {
  onnx::GraphProto* g = model->mutable_graph();
  auto skip = [skipped](const std::string& why) {
    skipped->push_back(absl::StrCat("shared prompt prefix: ", why));
    return 0;
  };
  std::vector<PrefixedAttention> attention;
  std::string positions, seqlens;
  {
    GraphIndex ix(*g);
    for (int i = 0; i < g->node_size(); ++i) {
      const onnx::NodeProto& n = g->node(i);
      if (IsOtherAttention(n)) return skip(absl::StrCat(onnx_graph::NodeName(n), " is a ", n.op_type(), ", not tide's causal attention"));
      if (n.domain() == "com.microsoft" && n.op_type() == "RotaryEmbedding") {
        if (n.input_size() < 2 || n.input(1).empty()) return skip(absl::StrCat(onnx_graph::NodeName(n), " has no position ids"));
        if (!positions.empty() && positions != n.input(1)) return skip("the rotary embeddings read different position ids");
        positions = n.input(1);
        continue;
      }
      if (n.domain() != kTideDomain || n.op_type() != kTideCausalAttention) continue;
      if (n.input_size() != 4 || n.output_size() != 1) return skip(absl::StrCat(onnx_graph::NodeName(n), " is not (q, k, v, seqlens_k)"));
      if (!seqlens.empty() && seqlens != n.input(3)) return skip("the attention nodes read different seqlens_k");
      seqlens = n.input(3);
      const int64_t kv_heads = IntAttribute(n, "kv_num_heads").value_or(0);
      const std::optional<int64_t> width = ProjectedWidth(ix, n.input(2));
      if (kv_heads <= 0 || !width.has_value()) return skip(absl::StrCat(onnx_graph::NodeName(n), ": its values' width is unknown"));
      for (int in : {1, 2}) {
        if (ix.ReadCount(n.input(in)) != 1 || ix.IsGraphInput(n.input(in)) || !ix.Producer(n.input(in)).has_value()) {
          return skip(absl::StrCat(onnx_graph::NodeName(n), ": its ", in == 1 ? "keys" : "values",
                                   " are read elsewhere or not computed in the graph"));
        }
      }
      attention.push_back({i, *width});
    }
    if (attention.empty()) return skip("no attention runs on tide's causal kernel");
    if (positions.empty()) return skip("no rotary position ids");
    if (!ix.Producer(positions).has_value() || !ix.Producer(seqlens).has_value()) {
      return skip("the position ids or seqlens_k are not computed in the graph");
    }
    const onnx::ValueInfoProto* mask = ix.GraphInput("attention_mask");
    if (mask == nullptr || mask->type().tensor_type().elem_type() != onnx::TensorProto::INT64 ||
        mask->type().tensor_type().shape().dim_size() != 2) {
      return skip("no int64 [batch, sequence] attention_mask input");
    }
  }

  // The attention nodes' own keys and values get the output names (every reader renamed).
  std::map<std::string, std::string> rename;
  for (size_t a = 0; a < attention.size(); ++a) {
    const onnx::NodeProto& n = g->node(attention[a].node);
    rename[n.input(1)] = absl::StrCat(kPromptPrefixKeyOutput, a);
    rename[n.input(2)] = absl::StrCat(kPromptPrefixValueOutput, a);
  }
  for (onnx::NodeProto& n : *g->mutable_node()) {
    for (std::string& in : *n.mutable_input()) {
      if (auto it = rename.find(in); it != rename.end()) in = it->second;
    }
    for (std::string& out : *n.mutable_output()) {
      if (auto it = rename.find(out); it != rename.end()) out = it->second;
    }
  }
  for (int i = g->value_info_size() - 1; i >= 0; --i) {
    if (rename.count(g->value_info(i).name()) > 0) g->mutable_value_info()->DeleteSubrange(i, 1);
  }

  const std::string key0 = absl::StrCat(kPromptPrefixKeyInput, 0);
  const std::string length = "tide_prefix.length", length32 = "tide_prefix.length_int32";
  const std::string expand = "tide_prefix.expand_shape", shifted = "tide_prefix.position_ids",
                    seqlens_shifted = "tide_prefix.seqlens_k";
  *g->add_initializer() = MakeInt64Vector("tide_prefix.index_0", {0});
  *g->add_initializer() = MakeInt64Vector("tide_prefix.index_1", {1});
  *g->add_initializer() = MakeInt64Vector("tide_prefix.ones", {1, 1});

  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  // The prefix length and [batch, 1, 1] (graph inputs only: first).
  *nodes.Add() = Node("Shape", {key0}, "tide_prefix.key_shape");
  *nodes.Add() = Node("Gather", {"tide_prefix.key_shape", "tide_prefix.index_1"}, length);
  onnx::NodeProto cast = Node("Cast", {length}, length32);
  AddIntAttribute(&cast, "to", onnx::TensorProto::INT32);
  *nodes.Add() = std::move(cast);
  *nodes.Add() = Node("Shape", {"attention_mask"}, "tide_prefix.mask_shape");
  *nodes.Add() = Node("Gather", {"tide_prefix.mask_shape", "tide_prefix.index_0"}, "tide_prefix.batch");
  onnx::NodeProto concat = Node("Concat", {"tide_prefix.batch", "tide_prefix.ones"}, expand);
  AddIntAttribute(&concat, "axis", 0);
  *nodes.Add() = std::move(concat);

  std::map<int, size_t> attention_at;
  for (size_t a = 0; a < attention.size(); ++a) attention_at[attention[a].node] = a;
  for (int i = 0; i < g->node_size(); ++i) {
    onnx::NodeProto& n = *g->mutable_node(i);
    if (n.domain() == "com.microsoft" && n.op_type() == "RotaryEmbedding") *n.mutable_input(1) = shifted;
    if (auto it = attention_at.find(i); it != attention_at.end()) {
      const size_t a = it->second;
      for (int in : {1, 2}) {
        const std::string prefix = absl::StrCat(in == 1 ? kPromptPrefixKeyInput : kPromptPrefixValueInput, a);
        const std::string lead = absl::StrCat("tide_prefix.lead.", prefix), joined = absl::StrCat("tide_prefix.joined.", prefix);
        *nodes.Add() = Node("Expand", {prefix, expand}, lead);
        onnx::NodeProto join = Node("Concat", {lead, n.input(in)}, joined);
        AddIntAttribute(&join, "axis", 1);
        *nodes.Add() = std::move(join);
        *n.mutable_input(in) = joined;
      }
      *n.mutable_input(3) = seqlens_shifted;
    }
    *nodes.Add() = n;
    for (const std::string& out : n.output()) {
      if (out == positions) *nodes.Add() = Node("Add", {positions, length}, shifted);
      if (out == seqlens) *nodes.Add() = Node("Add", {seqlens, length32}, seqlens_shifted);
    }
  }
  g->mutable_node()->Swap(&nodes);

  for (size_t a = 0; a < attention.size(); ++a) {
    const int64_t width = attention[a].width;
    AddFloatValue(g->mutable_input(), absl::StrCat(kPromptPrefixKeyInput, a), "", "prompt_prefix_length", width, 1);
    AddFloatValue(g->mutable_input(), absl::StrCat(kPromptPrefixValueInput, a), "", "prompt_prefix_length", width, 1);
    AddFloatValue(g->mutable_output(), absl::StrCat(kPromptPrefixKeyOutput, a), "batch", "sequence", width);
    AddFloatValue(g->mutable_output(), absl::StrCat(kPromptPrefixValueOutput, a), "batch", "sequence", width);
  }
  return static_cast<int>(attention.size());
}

}  // namespace tide::optimize
