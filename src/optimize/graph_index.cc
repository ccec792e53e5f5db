#include "optimize/graph_index.h"

#include <cstring>

namespace tide::optimize {

namespace {

void CountSubgraphReads(const onnx::GraphProto& g, std::unordered_map<std::string, int>* reads) {
  for (const auto& n : g.node()) {
    for (const auto& i : n.input()) {
      if (!i.empty()) ++(*reads)[i];
    }
    for (const auto& a : n.attribute()) {
      if (a.has_g()) CountSubgraphReads(a.g(), reads);
      for (const auto& sg : a.graphs()) CountSubgraphReads(sg, reads);
    }
  }
}

template <typename T>
std::optional<std::vector<double>> RawValues(const onnx::TensorProto& t, int64_t n) {
  if (static_cast<int64_t>(t.raw_data().size()) != n * static_cast<int64_t>(sizeof(T))) return std::nullopt;
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, t.raw_data().data() + i * sizeof(T), sizeof(T));  // ONNX stores little-endian
    out[static_cast<size_t>(i)] = static_cast<double>(v);
  }
  return out;
}

}  // namespace

bool IsDefaultDomain(const onnx::NodeProto& n) { return n.domain().empty() || n.domain() == "ai.onnx"; }

const onnx::AttributeProto* FindAttribute(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

std::optional<int64_t> IntAttribute(const onnx::NodeProto& n, const std::string& name) {
  const onnx::AttributeProto* a = FindAttribute(n, name);
  if (a == nullptr || a->type() != onnx::AttributeProto::INT) return std::nullopt;
  return a->i();
}

std::optional<std::vector<int64_t>> IntsAttribute(const onnx::NodeProto& n, const std::string& name) {
  const onnx::AttributeProto* a = FindAttribute(n, name);
  if (a == nullptr || a->type() != onnx::AttributeProto::INTS) return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::optional<int64_t> WeightProjectionWidth(const GraphIndex& index, const std::string& value) {
  const onnx::NodeProto* n = index.ProducerNode(value);
  if (n == nullptr || n->input_size() < 2 || n->output(0) != value) return std::nullopt;
  // tide quantize --int8 --format onnx: Mul(Cast<float>(MatMulInteger(DynamicQuantizeLinear(x), W)), scale).
  if (n->op_type() == "Mul" && IsDefaultDomain(*n) && n->input_size() == 2) {
    for (int side = 0; side < 2; ++side) {
      const onnx::NodeProto* cast = index.ProducerOp(n->input(side), "Cast");
      if (cast == nullptr || IntAttribute(*cast, "to") != onnx::TensorProto::FLOAT) continue;
      const onnx::NodeProto* mmi = index.ProducerOp(cast->input(0), "MatMulInteger");
      if (mmi == nullptr || mmi->input_size() < 2) continue;
      const onnx::TensorProto* w = index.Constant(mmi->input(1));
      if (w != nullptr && w->dims_size() == 2 && w->dims(1) > 0) return w->dims(1);
    }
    return std::nullopt;
  }
  const bool matmul = n->op_type() == "MatMul" && IsDefaultDomain(*n);
  const bool contrib = n->domain() == "com.microsoft" &&
                       (n->op_type() == "DynamicQuantizeMatMul" || n->op_type() == "MatMulIntegerToFloat");
  if (!matmul && !contrib) return std::nullopt;
  const onnx::TensorProto* w = index.Constant(n->input(1));
  if (w == nullptr || w->dims_size() != 2 || w->dims(1) <= 0) return std::nullopt;
  return w->dims(1);
}

GraphIndex::GraphIndex(const onnx::GraphProto& g) : graph_(&g) {
  for (const auto& t : g.initializer()) initializers_[t.name()] = &t;
  for (const auto& in : g.input()) {
    if (!initializers_.count(in.name())) inputs_[in.name()] = &in;
  }
  for (const auto& out : g.output()) {
    outputs_[out.name()] = true;
    ++reads_[out.name()];
  }
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    for (const auto& o : n.output()) {
      if (!o.empty()) producer_[o] = i;
    }
    std::vector<std::string> seen;
    for (const auto& in : n.input()) {
      if (in.empty()) continue;
      ++reads_[in];
      bool dup = false;
      for (const auto& s : seen) dup = dup || s == in;
      if (!dup) {
        consumers_[in].push_back(i);
        seen.push_back(in);
      }
    }
    for (const auto& a : n.attribute()) {
      if (a.has_g()) CountSubgraphReads(a.g(), &reads_);
      for (const auto& sg : a.graphs()) CountSubgraphReads(sg, &reads_);
    }
    if (n.op_type() == "Constant" && IsDefaultDomain(n) && n.output_size() == 1 && n.attribute_size() == 1) {
      const onnx::AttributeProto& a = n.attribute(0);
      onnx::TensorProto t;
      bool ok = true;
      if (a.name() == "value" && a.has_t()) {
        t = a.t();
      } else if (a.name() == "value_float") {
        t.set_data_type(onnx::TensorProto::FLOAT);
        t.add_float_data(a.f());
      } else if (a.name() == "value_floats") {
        t.set_data_type(onnx::TensorProto::FLOAT);
        t.add_dims(a.floats_size());
        for (float f : a.floats()) t.add_float_data(f);
      } else if (a.name() == "value_int") {
        t.set_data_type(onnx::TensorProto::INT64);
        t.add_int64_data(a.i());
      } else if (a.name() == "value_ints") {
        t.set_data_type(onnx::TensorProto::INT64);
        t.add_dims(a.ints_size());
        for (int64_t v : a.ints()) t.add_int64_data(v);
      } else {
        ok = false;
      }
      if (ok) {
        t.set_name(n.output(0));
        constant_nodes_[n.output(0)] = std::move(t);
      }
    }
  }
}

std::optional<int> GraphIndex::Producer(const std::string& value) const {
  auto it = producer_.find(value);
  if (it == producer_.end()) return std::nullopt;
  return it->second;
}

const onnx::NodeProto* GraphIndex::ProducerNode(const std::string& value) const {
  std::optional<int> p = Producer(value);
  return p ? &graph_->node(*p) : nullptr;
}

const onnx::NodeProto* GraphIndex::ProducerOp(const std::string& value, const std::string& op_type,
                                              const std::string& domain) const {
  const onnx::NodeProto* n = ProducerNode(value);
  if (n == nullptr || n->op_type() != op_type) return nullptr;
  if (domain.empty() ? !IsDefaultDomain(*n) : n->domain() != domain) return nullptr;
  return n;
}

const std::vector<int>& GraphIndex::Consumers(const std::string& value) const {
  static const std::vector<int> kNone;
  auto it = consumers_.find(value);
  return it == consumers_.end() ? kNone : it->second;
}

int GraphIndex::ReadCount(const std::string& value) const {
  auto it = reads_.find(value);
  return it == reads_.end() ? 0 : it->second;
}

bool GraphIndex::IsGraphOutput(const std::string& value) const { return outputs_.count(value) > 0; }
bool GraphIndex::IsGraphInput(const std::string& value) const { return inputs_.count(value) > 0; }

const onnx::ValueInfoProto* GraphIndex::GraphInput(const std::string& value) const {
  auto it = inputs_.find(value);
  return it == inputs_.end() ? nullptr : it->second;
}

const onnx::TensorProto* GraphIndex::Constant(const std::string& value) const {
  std::string name = value;
  for (int hops = 0; hops < 8; ++hops) {
    if (auto it = initializers_.find(name); it != initializers_.end()) return it->second;
    if (auto it = constant_nodes_.find(name); it != constant_nodes_.end()) return &it->second;
    const onnx::NodeProto* n = ProducerOp(name, "Identity");
    if (n == nullptr || n->input_size() != 1) return nullptr;
    name = n->input(0);
  }
  return nullptr;
}

std::optional<std::vector<double>> GraphIndex::ConstantValues(const std::string& value) const {
  const onnx::TensorProto* t = Constant(value);
  if (t == nullptr || t->data_location() == onnx::TensorProto::EXTERNAL) return std::nullopt;
  int64_t n = 1;
  for (int64_t d : t->dims()) {
    if (d < 0) return std::nullopt;
    n *= d;
  }
  if (n > (1 << 26)) return std::nullopt;
  const bool raw = t->has_raw_data();
  switch (t->data_type()) {
    case onnx::TensorProto::FLOAT:
      if (raw) return RawValues<float>(*t, n);
      if (t->float_data_size() != n) return std::nullopt;
      return std::vector<double>(t->float_data().begin(), t->float_data().end());
    case onnx::TensorProto::DOUBLE:
      if (raw) return RawValues<double>(*t, n);
      if (t->double_data_size() != n) return std::nullopt;
      return std::vector<double>(t->double_data().begin(), t->double_data().end());
    case onnx::TensorProto::INT32:
      if (raw) return RawValues<int32_t>(*t, n);
      if (t->int32_data_size() != n) return std::nullopt;
      return std::vector<double>(t->int32_data().begin(), t->int32_data().end());
    case onnx::TensorProto::INT64:
      if (raw) return RawValues<int64_t>(*t, n);
      if (t->int64_data_size() != n) return std::nullopt;
      return std::vector<double>(t->int64_data().begin(), t->int64_data().end());
    default:
      return std::nullopt;
  }
}

std::optional<double> GraphIndex::ScalarConstant(const std::string& value) const {
  std::optional<std::vector<double>> v = ConstantValues(value);
  if (!v || v->size() != 1) return std::nullopt;
  return (*v)[0];
}

std::optional<int64_t> ProjectedWidth(const GraphIndex& ix, std::string value) {
  for (int step = 0; step < 5; ++step) {
    if (const std::optional<int64_t> width = WeightProjectionWidth(ix, value)) return width;
    const onnx::NodeProto* n = ix.ProducerNode(value);
    if (n == nullptr || !IsDefaultDomain(*n) || n->input_size() < 1) return std::nullopt;
    if (n->op_type() == "MatMulInteger" && n->input_size() >= 2) {
      const onnx::TensorProto* w = ix.Constant(n->input(1));
      if (w != nullptr && w->dims_size() == 2 && w->dims(1) > 0) return w->dims(1);
      return std::nullopt;
    }
    if (n->op_type() == "Cast") {
      value = n->input(0);
    } else if ((n->op_type() == "Add" || n->op_type() == "Mul") && n->input_size() == 2) {
      // Follow the side that is not a constant (the bias or scale is); a product of two computed
      // values (the INT8 dequantization's accumulator x row scale) follows the first.
      value = ix.Constant(n->input(0)) != nullptr ? n->input(1) : n->input(0);
    } else {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace tide::optimize
