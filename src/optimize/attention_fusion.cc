#include "optimize/attention_fusion.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "onnx_graph/graph_util.h"
#include "optimize/graph_index.h"
#include "optimize/graph_rewrite.h"

namespace tide::optimize {

namespace {

using onnx_graph::NodeName;

// One entry of a Reshape target: a constant, or dimension `index` of value `of`.
struct ShapeEntry {
  bool is_const = false;
  int64_t value = 0;
  std::string of;
  int64_t index = -1;
};

std::optional<std::vector<int64_t>> UnsqueezeAxes(const GraphIndex& ix, const onnx::NodeProto& n) {
  if (n.input_size() >= 2) {
    auto v = ix.ConstantValues(n.input(1));
    if (!v) return std::nullopt;
    std::vector<int64_t> axes;
    for (double d : *v) axes.push_back(static_cast<int64_t>(d));
    return axes;
  }
  return IntsAttribute(n, "axes");
}

// The target of a Reshape: a constant tensor, or Concat(axis 0) of 1-element constants and
// Unsqueeze(Gather(Shape(x), i)) — the form PyTorch exports for x.view(x.size(0), x.size(1), ...).
std::optional<std::vector<ShapeEntry>> ReshapeTarget(const GraphIndex& ix, const std::string& shape) {
  if (auto v = ix.ConstantValues(shape)) {
    std::vector<ShapeEntry> out;
    for (double d : *v) out.push_back({true, static_cast<int64_t>(d), "", -1});
    return out;
  }
  const onnx::NodeProto* cat = ix.ProducerOp(shape, "Concat");
  if (cat == nullptr || IntAttribute(*cat, "axis").value_or(-1) != 0) return std::nullopt;
  std::vector<ShapeEntry> out;
  for (const auto& in : cat->input()) {
    if (auto v = ix.ConstantValues(in)) {
      if (v->size() != 1) return std::nullopt;
      out.push_back({true, static_cast<int64_t>((*v)[0]), "", -1});
      continue;
    }
    const onnx::NodeProto* unsq = ix.ProducerOp(in, "Unsqueeze");
    if (unsq == nullptr) return std::nullopt;
    auto axes = UnsqueezeAxes(ix, *unsq);
    if (!axes || axes->size() != 1 || ((*axes)[0] != 0 && (*axes)[0] != -1)) return std::nullopt;
    const onnx::NodeProto* gather = ix.ProducerOp(unsq->input(0), "Gather");
    if (gather == nullptr || IntAttribute(*gather, "axis").value_or(0) != 0) return std::nullopt;
    auto idx = ix.ScalarConstant(gather->input(1));
    const onnx::NodeProto* shp = ix.ProducerOp(gather->input(0), "Shape");
    if (!idx || shp == nullptr || FindAttribute(*shp, "start") != nullptr || FindAttribute(*shp, "end") != nullptr) {
      return std::nullopt;
    }
    out.push_back({false, 0, shp->input(0), static_cast<int64_t>(*idx)});
  }
  return out;
}

bool IsDim(const ShapeEntry& e, const std::string& of, int64_t index) { return !e.is_const && e.of == of && e.index == index; }
bool IsConst(const ShapeEntry& e, std::initializer_list<int64_t> values) {
  return e.is_const && std::find(values.begin(), values.end(), e.value) != values.end();
}

bool HasPerm(const onnx::NodeProto& n, const std::vector<int64_t>& perm) { return IntsAttribute(n, "perm") == perm; }

struct HeadSplit {
  std::string data;  // the [B, S, N*d] value that is split into heads
  int64_t num_heads = 0;
  int64_t head_size = 0;
};

// Transpose(perm)(Reshape(x, [B, S, N, d])) where B and S are x's own first two dimensions.
std::optional<HeadSplit> MatchHeadSplit(const GraphIndex& ix, const std::string& value,
                                        const std::vector<int64_t>& perm, std::string* why) {
  const onnx::NodeProto* tr = ix.ProducerOp(value, "Transpose");
  if (tr == nullptr || !HasPerm(*tr, perm)) {
    *why = absl::StrCat(value, " is not a Transpose with the expected perm");
    return std::nullopt;
  }
  const onnx::NodeProto* rs = ix.ProducerOp(tr->input(0), "Reshape");
  if (rs == nullptr || rs->input_size() != 2 || IntAttribute(*rs, "allowzero").value_or(0) != 0) {
    *why = absl::StrCat(tr->input(0), " is not a Reshape into heads");
    return std::nullopt;
  }
  const std::string& x = rs->input(0);
  auto target = ReshapeTarget(ix, rs->input(1));
  if (!target || target->size() != 4 || !(*target)[2].is_const || !(*target)[3].is_const ||
      (*target)[2].value <= 0 || (*target)[3].value <= 0 ||
      !(IsConst((*target)[0], {0}) || IsDim((*target)[0], x, 0)) ||
      !(IsConst((*target)[1], {0, -1}) || IsDim((*target)[1], x, 1))) {
    *why = absl::StrCat(rs->output(0), ": reshape target is not [B, S, num_heads, head_size]");
    return std::nullopt;
  }
  if (ix.ReadCount(tr->output(0)) != 1) {
    *why = absl::StrCat(tr->output(0), " has other readers");
    return std::nullopt;
  }
  return HeadSplit{x, (*target)[2].value, (*target)[3].value};
}

// Q/K/V input of the fused node: the projection before its bias Add, and that bias.
struct Projection {
  std::string value;
  std::vector<float> bias;  // zeros when the projection has no constant bias Add
};

std::optional<Projection> MatchProjection(const GraphIndex& ix, const std::string& value, int64_t width) {
  if (const onnx::NodeProto* add = ix.ProducerOp(value, "Add"); add != nullptr && add->input_size() == 2) {
    for (int side = 0; side < 2; ++side) {
      const onnx::TensorProto* c = ix.Constant(add->input(side));
      if (c == nullptr || c->data_type() != onnx::TensorProto::FLOAT || c->dims_size() != 1 || c->dims(0) != width) {
        continue;
      }
      const std::string& other = add->input(1 - side);
      auto vals = ix.ConstantValues(add->input(side));
      if (!vals || WeightProjectionWidth(ix, other) != width) continue;
      return Projection{other, std::vector<float>(vals->begin(), vals->end())};
    }
  }
  if (WeightProjectionWidth(ix, value) == width) return Projection{value, std::vector<float>(width, 0.0f)};
  return std::nullopt;
}

struct MaskMatch {
  std::string input;       // the rank-2 graph input (attention_mask)
  int32_t elem_type = 0;   // its element type
  float fill = -10000.0f;  // what masked scores get
};

// (1 - Cast/Unsqueeze...(mask)[B, 1, 1, S]) * c with c <= -1000: BERT's additive padding mask.
std::optional<MaskMatch> MatchMask(const GraphIndex& ix, const std::string& value, std::string* why) {
  const onnx::NodeProto* mul = ix.ProducerOp(value, "Mul");
  if (mul == nullptr || mul->input_size() != 2) {
    *why = "mask addend is not (1 - mask) * c";
    return std::nullopt;
  }
  std::optional<double> c;
  std::string sub_out;
  for (int side = 0; side < 2; ++side) {
    if (auto v = ix.ScalarConstant(mul->input(side))) {
      c = v;
      sub_out = mul->input(1 - side);
    }
  }
  if (!c || *c > -1000.0) {
    *why = "mask addend: the masking constant is missing or above -1000";
    return std::nullopt;
  }
  const onnx::NodeProto* sub = ix.ProducerOp(sub_out, "Sub");
  if (sub == nullptr || ix.ScalarConstant(sub->input(0)) != 1.0) {
    *why = "mask addend is not (1 - mask) * c";
    return std::nullopt;
  }
  // Walk Cast/Unsqueeze back to a graph input, then replay the Unsqueezes on its [B, S] labels.
  std::string v = sub->input(1);
  std::vector<std::vector<int64_t>> unsqueezes;
  for (int hops = 0; !ix.IsGraphInput(v); ++hops) {
    const onnx::NodeProto* n = ix.ProducerNode(v);
    if (hops > 8 || n == nullptr || !IsDefaultDomain(*n) || (n->op_type() != "Cast" && n->op_type() != "Unsqueeze")) {
      *why = "mask is not Cast/Unsqueeze of a graph input";
      return std::nullopt;
    }
    if (n->op_type() == "Unsqueeze") {
      auto axes = UnsqueezeAxes(ix, *n);
      if (!axes) {
        *why = "mask Unsqueeze axes are not constant";
        return std::nullopt;
      }
      unsqueezes.push_back(*axes);
    }
    v = n->input(0);
  }
  const onnx::ValueInfoProto* in = ix.GraphInput(v);
  if (!in->type().has_tensor_type() || !in->type().tensor_type().has_shape() ||
      in->type().tensor_type().shape().dim_size() != 2) {
    *why = absl::StrCat("mask input ", v, " is not rank 2");
    return std::nullopt;
  }
  std::vector<char> labels = {'B', 'S'};
  for (auto it = unsqueezes.rbegin(); it != unsqueezes.rend(); ++it) {
    const int64_t rank = static_cast<int64_t>(labels.size() + it->size());
    std::vector<int64_t> axes;
    for (int64_t a : *it) axes.push_back(a < 0 ? a + rank : a);
    std::sort(axes.begin(), axes.end());
    for (int64_t a : axes) {
      if (a < 0 || a > static_cast<int64_t>(labels.size())) {
        *why = "mask Unsqueeze axes out of range";
        return std::nullopt;
      }
      labels.insert(labels.begin() + a, '1');
    }
  }
  if (labels != std::vector<char>{'B', '1', '1', 'S'}) {
    *why = "mask is not broadcast as [B, 1, 1, S]";
    return std::nullopt;
  }
  return MaskMatch{v, in->type().tensor_type().elem_type(), static_cast<float>(std::max(*c, -10000.0))};
}

struct AttentionMatch {
  Projection q, k, v;
  int64_t num_heads = 0;
  int64_t head_size = 0;
  float scale = 1.0f;
  MaskMatch mask;
  int merge_index = -1;  // the final Reshape, replaced by the fused node
  std::string output;
};

bool SingleReader(const GraphIndex& ix, const std::string& value, int reader) {
  return ix.ReadCount(value) == 1 && ix.Consumers(value).size() == 1 && ix.Consumers(value)[0] == reader;
}

std::optional<AttentionMatch> MatchAttention(const GraphIndex& ix, int softmax_index, std::string* why) {
  const onnx::NodeProto& sm = ix.graph().node(softmax_index);
  const std::optional<int64_t> axis = IntAttribute(sm, "axis");
  if (axis ? (*axis != -1 && *axis != 3) : ix.opset() < 13) {
    *why = "Softmax is not over the last axis";
    return std::nullopt;
  }
  const onnx::NodeProto* add = ix.ProducerOp(sm.input(0), "Add");
  if (add == nullptr || add->input_size() != 2 || !SingleReader(ix, sm.input(0), softmax_index)) {
    *why = "Softmax input is not Add(scores, mask) read only by the Softmax";
    return std::nullopt;
  }
  const int add_index = *ix.Producer(sm.input(0));
  AttentionMatch m;
  // Scores: MatMul(Q, K^T), optionally divided or multiplied by a scalar constant.
  const onnx::NodeProto* qk = nullptr;
  int mask_side = -1;
  for (int side = 0; side < 2 && qk == nullptr; ++side) {
    const std::string& s = add->input(side);
    if (!SingleReader(ix, s, add_index)) continue;
    const onnx::NodeProto* n = ix.ProducerNode(s);
    if (n == nullptr || !IsDefaultDomain(*n)) continue;
    float scale = 1.0f;
    std::string mm = s;
    if ((n->op_type() == "Div" || n->op_type() == "Mul") && n->input_size() == 2) {
      const int ci = ix.ScalarConstant(n->input(1)) ? 1 : (n->op_type() == "Mul" && ix.ScalarConstant(n->input(0)) ? 0 : -1);
      if (ci < 0) continue;
      const double c = *ix.ScalarConstant(n->input(ci));
      if (!(std::isfinite(c) && c != 0.0)) continue;
      scale = static_cast<float>(n->op_type() == "Div" ? 1.0 / c : c);
      mm = n->input(1 - ci);
      if (!SingleReader(ix, mm, *ix.Producer(s))) continue;
    }
    const onnx::NodeProto* cand = ix.ProducerOp(mm, "MatMul");
    if (cand == nullptr) continue;
    qk = cand;
    m.scale = scale;
    mask_side = 1 - side;
  }
  if (qk == nullptr) {
    *why = "no MatMul(Q, K^T) [scaled by a constant] feeding the mask Add";
    return std::nullopt;
  }
  std::optional<MaskMatch> mask = MatchMask(ix, add->input(mask_side), why);
  if (!mask) return std::nullopt;
  m.mask = *mask;

  std::optional<HeadSplit> q = MatchHeadSplit(ix, qk->input(0), {0, 2, 1, 3}, why);
  if (!q) return std::nullopt;
  std::optional<HeadSplit> k = MatchHeadSplit(ix, qk->input(1), {0, 2, 3, 1}, why);
  if (!k) return std::nullopt;

  // Probabilities x V, back to [B, S, N*d].
  const std::vector<int>& sm_readers = ix.Consumers(sm.output(0));
  if (ix.ReadCount(sm.output(0)) != 1 || sm_readers.size() != 1) {
    *why = "Softmax output has other readers";
    return std::nullopt;
  }
  const onnx::NodeProto& pv = ix.graph().node(sm_readers[0]);
  if (pv.op_type() != "MatMul" || !IsDefaultDomain(pv) || pv.input(0) != sm.output(0)) {
    *why = "Softmax output does not feed MatMul(probabilities, V)";
    return std::nullopt;
  }
  std::optional<HeadSplit> v = MatchHeadSplit(ix, pv.input(1), {0, 2, 1, 3}, why);
  if (!v) return std::nullopt;
  if (q->num_heads != k->num_heads || q->num_heads != v->num_heads || q->head_size != k->head_size ||
      q->head_size != v->head_size) {
    *why = "Q, K and V are split into different head shapes";
    return std::nullopt;
  }
  const std::vector<int>& pv_readers = ix.Consumers(pv.output(0));
  if (ix.ReadCount(pv.output(0)) != 1 || pv_readers.size() != 1) {
    *why = "context MatMul output has other readers";
    return std::nullopt;
  }
  const onnx::NodeProto& tr = ix.graph().node(pv_readers[0]);
  if (tr.op_type() != "Transpose" || !IsDefaultDomain(tr) || !HasPerm(tr, {0, 2, 1, 3})) {
    *why = "context is not transposed back with perm [0, 2, 1, 3]";
    return std::nullopt;
  }
  // The merge Reshape; other readers of the transposed context may only be Shape nodes feeding it.
  const int64_t hidden = q->num_heads * q->head_size;
  int merge = -1;
  for (int r : ix.Consumers(tr.output(0))) {
    const onnx::NodeProto& n = ix.graph().node(r);
    if (n.op_type() == "Shape" && IsDefaultDomain(n)) continue;
    if (n.op_type() != "Reshape" || !IsDefaultDomain(n) || n.input(0) != tr.output(0) || merge >= 0) {
      *why = "transposed context has readers other than the merge Reshape";
      return std::nullopt;
    }
    merge = r;
  }
  if (merge < 0 || ix.IsGraphOutput(tr.output(0))) {
    *why = "no merge Reshape after the context Transpose";
    return std::nullopt;
  }
  const onnx::NodeProto& rs = ix.graph().node(merge);
  auto target = ReshapeTarget(ix, rs.input(1));
  if (IntAttribute(rs, "allowzero").value_or(0) != 0 || !target || target->size() != 3 ||
      !(IsConst((*target)[0], {0}) || IsDim((*target)[0], tr.output(0), 0)) ||
      !(IsConst((*target)[1], {0, -1}) || IsDim((*target)[1], tr.output(0), 1)) ||
      !(IsConst((*target)[2], {hidden}) ||
        (IsConst((*target)[2], {-1}) && !IsConst((*target)[1], {-1})))) {
    *why = absl::StrCat(rs.output(0), ": merge target is not [B, S, num_heads * head_size]");
    return std::nullopt;
  }

  std::optional<Projection> pq = MatchProjection(ix, q->data, hidden);
  std::optional<Projection> pk = MatchProjection(ix, k->data, hidden);
  std::optional<Projection> pvp = MatchProjection(ix, v->data, hidden);
  if (!pq || !pk || !pvp) {
    *why = absl::StrCat("Q, K or V is not a weight projection of width ", hidden, " (+ constant bias)");
    return std::nullopt;
  }
  m.q = *pq;
  m.k = *pk;
  m.v = *pvp;
  m.num_heads = q->num_heads;
  m.head_size = q->head_size;
  m.merge_index = merge;
  m.output = rs.output(0);
  return m;
}

}  // namespace

int FuseAttention(onnx::GraphProto* g, int opset, std::vector<std::string>* skipped) {
  GraphIndex ix(*g);
  ix.set_opset(opset);
  onnx_graph::Namer namer(*g);
  NodeReplacements edits;
  std::vector<onnx::TensorProto> biases;
  std::map<std::string, std::string> mask_int32;  // attention_mask input -> its int32 form
  int fused = 0;
  for (int i = 0; i < g->node_size(); ++i) {
    const onnx::NodeProto& sm = g->node(i);
    if (sm.op_type() != "Softmax" || !IsDefaultDomain(sm) || sm.input_size() != 1) continue;
    std::string why;
    std::optional<AttentionMatch> m = MatchAttention(ix, i, &why);
    if (!m) {
      skipped->push_back(absl::StrCat(NodeName(sm), ": attention not fused: ", why));
      continue;
    }
    if (edits.replace.count(m->merge_index)) continue;
    std::string& mask = mask_int32[m->mask.input];
    if (mask.empty()) {
      if (m->mask.elem_type == onnx::TensorProto::INT32) {
        mask = m->mask.input;
      } else {
        mask = namer.Fresh(absl::StrCat(m->mask.input, "_int32"));
        onnx::NodeProto cast;
        cast.set_op_type("Cast");
        cast.set_name(namer.Fresh(absl::StrCat(m->mask.input, "_to_int32")));
        cast.add_input(m->mask.input);
        cast.add_output(mask);
        AddIntAttribute(&cast, "to", onnx::TensorProto::INT32);
        edits.prepend.push_back(std::move(cast));
      }
    }
    const std::string base = g->node(m->merge_index).name().empty() ? m->output : g->node(m->merge_index).name();
    std::vector<float> bias = m->q.bias;
    bias.insert(bias.end(), m->k.bias.begin(), m->k.bias.end());
    bias.insert(bias.end(), m->v.bias.begin(), m->v.bias.end());
    const std::string bias_name = namer.Fresh(absl::StrCat(base, "_qkv_bias"));
    biases.push_back(MakeFloatTensor(bias_name, {static_cast<int64_t>(bias.size())}, bias));

    onnx::NodeProto mha;
    mha.set_op_type("MultiHeadAttention");
    mha.set_domain("com.microsoft");
    mha.set_name(namer.Fresh(absl::StrCat(base, "_MultiHeadAttention")));
    for (const std::string& in : {m->q.value, m->k.value, m->v.value, bias_name, mask}) mha.add_input(in);
    mha.add_output(m->output);
    AddIntAttribute(&mha, "num_heads", m->num_heads);
    AddFloatAttribute(&mha, "scale", m->scale);
    AddFloatAttribute(&mha, "mask_filter_value", m->mask.fill);
    edits.replace[m->merge_index] = std::move(mha);
    ++fused;
  }
  edits.ApplyTo(g);
  for (auto& t : biases) *g->add_initializer() = std::move(t);
  return fused;
}

}  // namespace tide::optimize
