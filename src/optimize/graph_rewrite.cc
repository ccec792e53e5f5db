#include "optimize/graph_rewrite.h"

#include <cstring>
#include <unordered_set>

#include "onnx_graph/graph_util.h"

namespace tide::optimize {

using onnx_graph::CollectReads;  // a subgraph's reads of outer values (and pass-through outputs) keep them alive

void NodeReplacements::ApplyTo(onnx::GraphProto* g) {
  if (empty()) return;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (auto& n : prepend) *nodes.Add() = std::move(n);
  for (int i = 0; i < g->node_size(); ++i) {
    auto it = replace.find(i);
    *nodes.Add() = it == replace.end() ? std::move(*g->mutable_node(i)) : std::move(it->second);
  }
  g->mutable_node()->Swap(&nodes);
  replace.clear();
  prepend.clear();
}

int RemoveDeadNodes(onnx::GraphProto* g) {
  std::unordered_set<std::string> needed;
  for (const auto& o : g->output()) needed.insert(o.name());
  std::vector<bool> live(static_cast<size_t>(g->node_size()), false);
  for (int i = g->node_size() - 1; i >= 0; --i) {
    const onnx::NodeProto& n = g->node(i);
    bool used = false;
    for (const auto& o : n.output()) used = used || (!o.empty() && needed.count(o));
    if (!used) continue;
    live[static_cast<size_t>(i)] = true;
    for (const auto& in : n.input()) needed.insert(in);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) CollectReads(a.g(), &needed);
      for (const auto& sg : a.graphs()) CollectReads(sg, &needed);
    }
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  int removed = 0;
  for (int i = 0; i < g->node_size(); ++i) {
    if (live[static_cast<size_t>(i)]) {
      *kept.Add() = std::move(*g->mutable_node(i));
    } else {
      ++removed;
    }
  }
  g->mutable_node()->Swap(&kept);

  std::unordered_set<std::string> exists;
  for (const auto& n : g->node()) {
    for (const auto& o : n.output()) exists.insert(o);
  }
  for (const auto& i : g->input()) exists.insert(i.name());
  for (const auto& t : g->initializer()) exists.insert(t.name());
  auto* vi = g->mutable_value_info();
  for (int i = vi->size() - 1; i >= 0; --i) {
    if (!exists.count(vi->Get(i).name())) vi->DeleteSubrange(i, 1);
  }
  return removed;
}

onnx::TensorProto MakeFloatTensor(const std::string& name, const std::vector<int64_t>& dims,
                                  const std::vector<float>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  std::string raw(values.size() * sizeof(float), '\0');
  if (!values.empty()) std::memcpy(raw.data(), values.data(), raw.size());  // little-endian, as ONNX stores it
  t.set_raw_data(std::move(raw));
  return t;
}

onnx::TensorProto MakeInt64Vector(const std::string& name, const std::vector<int64_t>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::INT64);
  t.add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t.add_int64_data(v);
  return t;
}

void AddIntAttribute(onnx::NodeProto* n, const std::string& name, int64_t v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void AddFloatAttribute(onnx::NodeProto* n, const std::string& name, float v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

}  // namespace tide::optimize
