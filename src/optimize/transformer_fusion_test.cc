// Unit tests of the fusion passes on small hand-built BERT layers (onnx protobuf), plus ONNX
// Runtime runs of those graphs: fused and unfused outputs must agree on padded batches.
#include "optimize/transformer_fusion.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "onnxruntime_cxx_api.h"
#include "optimize/graph_rewrite.h"
#include "optimize/padding_mask_in_keys.h"
#include "runtime/tide_ops.h"

namespace tide::optimize {
namespace {

constexpr int64_t kHidden = 8, kHeads = 2, kHeadSize = 4;

struct LayerVariant {
  std::vector<int64_t> key_perm = {0, 2, 3, 1};
  float mask_constant = -10000.0f;
  bool softmax_is_output = false;   // an extra reader of the attention probabilities
  bool dynamic_reshape = false;     // Concat(Shape...) targets, as torch exports x.view(B, S, N, d)
  bool query_bias = true;
  bool identity_bias = false;       // biases reached through Identity (torch's shared initializers)
  bool int32_mask = false;          // attention_mask is an int32 graph input (no Cast needed)
  bool mul_scale = false;           // scores * (1/sqrt(d)) instead of scores / sqrt(d)
};

class GraphBuilder {
 public:
  explicit GraphBuilder(onnx::GraphProto* g) : g_(g) {}
  std::string Node(const std::string& op, std::vector<std::string> inputs, const std::string& out = "") {
    onnx::NodeProto* n = g_->add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + std::to_string(g_->node_size()));
    for (auto& i : inputs) n->add_input(i);
    n->add_output(out.empty() ? n->name() + "_out" : out);
    last_ = n;
    return n->output(0);
  }
  onnx::NodeProto* last() { return last_; }
  std::string Floats(const std::string& name, std::vector<int64_t> dims, std::mt19937* rng, float scale) {
    size_t n = 1;
    for (int64_t d : dims) n *= static_cast<size_t>(d);
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = dist(*rng);
    *g_->add_initializer() = MakeFloatTensor(name, dims, v);
    return name;
  }
  std::string Scalar(const std::string& name, float v) {
    *g_->add_initializer() = MakeFloatTensor(name, {}, {v});
    return name;
  }
  std::string Ints(const std::string& name, std::vector<int64_t> v) {
    onnx::TensorProto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
    return name;
  }

 private:
  onnx::GraphProto* g_;
  onnx::NodeProto* last_ = nullptr;
};

void AddInput(onnx::GraphProto* g, const std::string& name, int elem, int rank) {
  onnx::ValueInfoProto* v = g->add_input();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
  for (int i = 0; i < rank; ++i) v->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("d" + std::to_string(i));
}

void AddOutput(onnx::GraphProto* g, const std::string& name) {
  onnx::ValueInfoProto* v = g->add_output();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
}

void SetInts(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

// One post-LN BERT layer's attention block + output LayerNorm: x [B, S, 8], attention_mask [B, S]
// (int64) -> y [B, S, 8].
onnx::ModelProto BertLayer(const LayerVariant& var = {}) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("layer");
  AddInput(g, "x", onnx::TensorProto::FLOAT, 3);
  AddInput(g, "attention_mask", var.int32_mask ? onnx::TensorProto::INT32 : onnx::TensorProto::INT64, 2);
  std::mt19937 rng(7);
  GraphBuilder b(g);
  // Mask: (1 - Unsqueeze(Unsqueeze(Cast(mask), 1), 2)) * c
  std::string mf = b.Node("Cast", {"attention_mask"});
  onnx::AttributeProto* to = b.last()->add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(onnx::TensorProto::FLOAT);
  std::string u1 = b.Node("Unsqueeze", {mf, b.Ints("axes1", {1})});
  std::string u2 = b.Node("Unsqueeze", {u1, b.Ints("axes2", {2})});
  std::string inv = b.Node("Sub", {b.Scalar("one", 1.0f), u2});
  std::string mask_bias = b.Node("Mul", {inv, b.Scalar("mask_c", var.mask_constant)});

  auto split = [&](const std::string& x, const std::string& tag) {
    if (!var.dynamic_reshape) return b.Node("Reshape", {x, b.Ints(tag + "_shape", {0, 0, kHeads, kHeadSize})});
    std::vector<std::string> parts;
    for (int64_t i = 0; i < 2; ++i) {
      std::string shape = b.Node("Shape", {x});
      std::string dim = b.Node("Gather", {shape, b.Ints(tag + "_idx" + std::to_string(i), {i})});
      g->mutable_initializer(g->initializer_size() - 1)->clear_dims();  // a scalar index
      parts.push_back(b.Node("Unsqueeze", {dim, b.Ints(tag + "_ax" + std::to_string(i), {0})}));
    }
    parts.push_back(b.Ints(tag + "_n", {kHeads}));
    parts.push_back(b.Ints(tag + "_d", {kHeadSize}));
    std::string target = b.Node("Concat", parts);
    onnx::AttributeProto* axis = b.last()->add_attribute();
    axis->set_name("axis");
    axis->set_type(onnx::AttributeProto::INT);
    axis->set_i(0);
    return b.Node("Reshape", {x, target});
  };
  auto proj = [&](const std::string& tag, bool bias) {
    std::string mm = b.Node("MatMul", {"x", b.Floats("W" + tag, {kHidden, kHidden}, &rng, 0.4f)});
    if (!bias) return mm;
    std::string bname = b.Floats("b" + tag, {kHidden}, &rng, 0.5f);
    if (var.identity_bias) bname = b.Node("Identity", {bname});
    return b.Node("Add", {bname, mm});
  };
  auto transpose = [&](const std::string& x, std::vector<int64_t> perm) {
    std::string t = b.Node("Transpose", {x});
    SetInts(b.last(), "perm", perm);
    return t;
  };
  std::string q = transpose(split(proj("q", var.query_bias), "q"), {0, 2, 1, 3});
  std::string k = transpose(split(proj("k", true), "k"), var.key_perm);
  std::string v = transpose(split(proj("v", true), "v"), {0, 2, 1, 3});
  std::string scores = b.Node("MatMul", {q, k});
  std::string scaled = var.mul_scale ? b.Node("Mul", {b.Scalar("inv_sqrt_d", 0.5f), scores})
                                     : b.Node("Div", {scores, b.Scalar("sqrt_d", 2.0f)});
  std::string masked = b.Node("Add", {scaled, mask_bias});
  std::string probs = b.Node("Softmax", {masked});
  onnx::AttributeProto* axis = b.last()->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(-1);
  std::string ctx = transpose(b.Node("MatMul", {probs, v}), {0, 2, 1, 3});
  std::string merged = b.Node("Reshape", {ctx, b.Ints("merge_shape", {0, 0, kHidden})});
  std::string out = b.Node("MatMul", {merged, b.Floats("Wo", {kHidden, kHidden}, &rng, 0.4f)});
  std::string out_b = b.Node("Add", {out, b.Floats("bo", {kHidden}, &rng, 0.5f)});
  std::string sum = b.Node("Add", {out_b, "x"});
  b.Node("LayerNormalization", {sum, b.Floats("gamma", {kHidden}, &rng, 1.0f), b.Floats("beta", {kHidden}, &rng, 1.0f)}, "y");
  onnx::AttributeProto* eps = b.last()->add_attribute();
  eps->set_name("epsilon");
  eps->set_type(onnx::AttributeProto::FLOAT);
  eps->set_f(1e-12f);
  AddOutput(g, "y");
  if (var.softmax_is_output) AddOutput(g, probs);
  return m;
}

int CountOps(const onnx::ModelProto& m, const std::string& op) {
  int n = 0;
  for (const auto& node : m.graph().node()) n += node.op_type() == op;
  return n;
}

const onnx::NodeProto* FindOp(const onnx::ModelProto& m, const std::string& op) {
  for (const auto& node : m.graph().node()) {
    if (node.op_type() == op) return &node;
  }
  return nullptr;
}

// Runs the layer graph with ONNX Runtime on x and a padded mask; returns y.
std::vector<float> RunLayer(const onnx::ModelProto& m, const std::vector<float>& x, const std::vector<int64_t>& mask,
                            int64_t batch, int64_t seq) {
  static Ort::Env env(ORT_LOGGING_LEVEL_ERROR, "fusion_test");
  std::string bytes;
  m.SerializeToString(&bytes);
  Ort::SessionOptions so;
  so.SetIntraOpNumThreads(1);
  runtime::RegisterTideOps(so);  // graphs rewritten onto tide's kernels
  Ort::Session session(env, bytes.data(), bytes.size(), so);
  Ort::MemoryInfo mem = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  const int64_t xs[3] = {batch, seq, kHidden};
  const int64_t ms[2] = {batch, seq};
  std::vector<Ort::Value> in;
  in.push_back(Ort::Value::CreateTensor<float>(mem, const_cast<float*>(x.data()), x.size(), xs, 3));
  in.push_back(Ort::Value::CreateTensor<int64_t>(mem, const_cast<int64_t*>(mask.data()), mask.size(), ms, 2));
  const char* in_names[] = {"x", "attention_mask"};
  const char* out_names[] = {"y"};
  auto out = session.Run(Ort::RunOptions{nullptr}, in_names, in.data(), 2, out_names, 1);
  const float* y = out[0].GetTensorData<float>();
  return std::vector<float>(y, y + batch * seq * kHidden);
}

// The attention fusion itself: the mask stays MultiHeadAttention's key_padding_mask.
FusionOptions MaskAsInput() {
  FusionOptions o;
  o.padding_mask_in_keys = false;
  return o;
}

TEST(TransformerFusionTest, FusesAttentionAndSkipLayerNorm) {
  onnx::ModelProto m = BertLayer();
  auto report = FuseTransformer(MaskAsInput(), &m);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->attention_fused, 1);
  EXPECT_EQ(report->skip_layer_norm_fused, 1);
  const onnx::NodeProto* mha = FindOp(m, "MultiHeadAttention");
  ASSERT_NE(mha, nullptr);
  EXPECT_EQ(mha->domain(), "com.microsoft");
  ASSERT_EQ(mha->input_size(), 5);
  // Q/K/V are the projections themselves, before their bias Adds.
  for (int i = 0; i < 3; ++i) {
    const onnx::NodeProto* producer = nullptr;
    for (const auto& n : m.graph().node()) {
      if (n.output(0) == mha->input(i)) producer = &n;
    }
    ASSERT_NE(producer, nullptr);
    EXPECT_EQ(producer->op_type(), "MatMul");
    EXPECT_EQ(producer->input(1), std::string("W") + "qkv"[i]);
  }
  bool saw_heads = false, saw_scale = false;
  for (const auto& a : mha->attribute()) {
    if (a.name() == "num_heads") saw_heads = a.i() == kHeads;
    if (a.name() == "scale") saw_scale = std::fabs(a.f() - 0.5f) < 1e-7f;
  }
  EXPECT_TRUE(saw_heads);
  EXPECT_TRUE(saw_scale);
  const onnx::NodeProto* cast = FindOp(m, "Cast");
  ASSERT_NE(cast, nullptr);
  EXPECT_EQ(mha->input(4), cast->output(0));
  EXPECT_EQ(cast->attribute(0).i(), onnx::TensorProto::INT32);
  // The [3H] bias concatenates bq, bk, bv.
  const onnx::TensorProto* bias = nullptr;
  for (const auto& t : m.graph().initializer()) {
    if (t.name() == mha->input(3)) bias = &t;
  }
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->dims(0), 3 * kHidden);
  // Everything between the projections and the merge is gone.
  for (const char* op : {"Softmax", "Transpose", "Reshape", "Div", "Sub", "Unsqueeze", "LayerNormalization"}) {
    EXPECT_EQ(CountOps(m, op), 0) << op;
  }
  EXPECT_EQ(CountOps(m, "MatMul"), 4);  // q, k, v, output projections
  const onnx::NodeProto* sln = FindOp(m, "SkipLayerNormalization");
  ASSERT_NE(sln, nullptr);
  ASSERT_EQ(sln->input_size(), 5);
  EXPECT_EQ(sln->input(1), "x");
  EXPECT_EQ(sln->input(4), "bo");
  EXPECT_EQ(sln->output(0), "y");
  for (const auto& t : m.graph().initializer()) {
    EXPECT_NE(t.name(), "bq") << "folded biases are removed";
    EXPECT_NE(t.name(), "sqrt_d");
  }
}

TEST(TransformerFusionTest, FusedLayerMatchesUnfusedOnPaddedBatch) {
  // 0: constant reshape targets; 1: torch's Concat(Shape...) targets and Identity biases;
  // 2: no query bias (zeros in the fused bias) and a Mul scale.
  for (int variant = 0; variant < 3; ++variant) {
    LayerVariant var;
    var.dynamic_reshape = variant == 1;
    var.identity_bias = variant == 1;
    var.query_bias = variant != 2;
    var.mul_scale = variant == 2;
    onnx::ModelProto original = BertLayer(var);
    onnx::ModelProto fused = original;
    auto report = FuseTransformer({}, &fused);
    ASSERT_TRUE(report.ok());
    ASSERT_EQ(report->attention_fused, 1) << "variant " << variant;
    ASSERT_EQ(report->skip_layer_norm_fused, 1);
    const int64_t batch = 3, seq = 7;
    const int64_t lengths[batch] = {7, 4, 1};
    std::mt19937 rng(11);
    std::normal_distribution<float> dist;
    std::vector<float> x(batch * seq * kHidden);
    for (float& f : x) f = dist(rng);
    std::vector<int64_t> mask(batch * seq);
    for (int64_t r = 0; r < batch; ++r) {
      for (int64_t t = 0; t < seq; ++t) mask[r * seq + t] = t < lengths[r];
    }
    std::vector<float> a = RunLayer(original, x, mask, batch, seq);
    std::vector<float> b = RunLayer(fused, x, mask, batch, seq);
    double worst = 0;
    for (int64_t r = 0; r < batch; ++r) {
      for (int64_t t = 0; t < lengths[r]; ++t) {
        for (int64_t h = 0; h < kHidden; ++h) {
          const size_t i = static_cast<size_t>((r * seq + t) * kHidden + h);
          worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
        }
      }
    }
    EXPECT_LT(worst, 1e-4) << "variant " << variant;
    // Padded keys get no weight: changing x at padded positions leaves valid tokens' outputs alone.
    std::vector<float> x2 = x;
    for (int64_t t = lengths[1]; t < seq; ++t) {
      for (int64_t h = 0; h < kHidden; ++h) x2[static_cast<size_t>((1 * seq + t) * kHidden + h)] += 5.0f;
    }
    std::vector<float> c = RunLayer(fused, x2, mask, batch, seq);
    for (int64_t t = 0; t < lengths[1]; ++t) {
      for (int64_t h = 0; h < kHidden; ++h) {
        const size_t i = static_cast<size_t>((1 * seq + t) * kHidden + h);
        EXPECT_NEAR(b[i], c[i], 1e-5);
      }
    }
  }
}

TEST(TransformerFusionTest, Int32MaskIsUsedAsItIsAndMulScaleIsRead) {
  LayerVariant var;
  var.int32_mask = true;
  var.mul_scale = true;
  onnx::ModelProto m = BertLayer(var);
  auto report = FuseTransformer(MaskAsInput(), &m);
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->attention_fused, 1);
  const onnx::NodeProto* mha = FindOp(m, "MultiHeadAttention");
  ASSERT_NE(mha, nullptr);
  EXPECT_EQ(mha->input(4), "attention_mask");
  EXPECT_EQ(CountOps(m, "Cast"), 0);
  for (const auto& a : mha->attribute()) {
    if (a.name() == "scale") EXPECT_FLOAT_EQ(a.f(), 0.5f);
  }
}

// padding_mask_in_keys.h: by default the fused attention has no mask input; each head's query
// gains a 1 and its key (1 - mask) * mask_filter_value / scale, and the outputs stay those of the
// masked attention on a padded batch (ONNX Runtime then runs its flash path).
TEST(TransformerFusionTest, PaddingMaskBecomesAKeyColumn) {
  for (bool int32_mask : {false, true}) {
    LayerVariant var;
    var.int32_mask = int32_mask;
    const onnx::ModelProto original = BertLayer(var);
    onnx::ModelProto with_input = original, in_keys = original;
    ASSERT_TRUE(FuseTransformer(MaskAsInput(), &with_input).ok());
    auto report = FuseTransformer({}, &in_keys);
    ASSERT_TRUE(report.ok());
    ASSERT_EQ(report->attention_fused, 1);
    const onnx::NodeProto* mha = FindOp(in_keys, "MultiHeadAttention");
    ASSERT_NE(mha, nullptr);
    ASSERT_EQ(mha->input_size(), 4) << "the key_padding_mask input is gone";
    float scale = 0;
    for (const auto& a : mha->attribute()) {
      if (a.name() == "scale") scale = a.f();
    }
    EXPECT_FLOAT_EQ(scale, 0.5f) << "1/sqrt(4) written explicitly: the head size is now 5";
    EXPECT_EQ(CountOps(in_keys, "Pad"), 1);
    EXPECT_EQ(CountOps(in_keys, "Concat"), 1);
    EXPECT_EQ(CountOps(in_keys, "Expand"), 1);
    // The int32 Cast fed only the old mask input: removed as dead.
    for (const auto& n : in_keys.graph().node()) {
      if (n.op_type() == "Cast") {
        EXPECT_NE(n.attribute(0).i(), onnx::TensorProto::INT32);
      }
    }
    const onnx::TensorProto* bias = nullptr;
    for (const auto& t : in_keys.graph().initializer()) {
      if (t.name() == mha->input(3)) bias = &t;
    }
    ASSERT_NE(bias, nullptr);
    ASSERT_EQ(bias->dims(0), 2 * kHeads * (kHeadSize + 1) + kHidden);
    std::vector<float> b(static_cast<size_t>(bias->dims(0)));
    ASSERT_EQ(bias->raw_data().size(), b.size() * sizeof(float));
    std::memcpy(b.data(), bias->raw_data().data(), bias->raw_data().size());
    for (int64_t part = 0; part < 2; ++part) {
      for (int64_t h = 0; h < kHeads; ++h) EXPECT_EQ(b[static_cast<size_t>((part * kHeads + h) * (kHeadSize + 1) + kHeadSize)], 0.0f);
    }

    const int64_t batch = 3, seq = 6;
    const int64_t lengths[batch] = {6, 3, 1};
    std::mt19937 rng(5);
    std::normal_distribution<float> dist;
    std::vector<float> x(batch * seq * kHidden);
    for (float& f : x) f = dist(rng);
    std::vector<int64_t> mask(batch * seq);
    for (int64_t r = 0; r < batch; ++r) {
      for (int64_t t = 0; t < seq; ++t) mask[r * seq + t] = t < lengths[r];
    }
    if (int32_mask) continue;  // RunLayer feeds an int64 mask; the structure above is what differs
    const std::vector<float> a = RunLayer(with_input, x, mask, batch, seq);
    const std::vector<float> c = RunLayer(in_keys, x, mask, batch, seq);
    for (int64_t r = 0; r < batch; ++r) {
      for (int64_t t = 0; t < lengths[r]; ++t) {
        for (int64_t h = 0; h < kHidden; ++h) {
          const size_t i = static_cast<size_t>((r * seq + t) * kHidden + h);
          EXPECT_NEAR(a[i], c[i], 1e-5) << "row " << r << " token " << t;
        }
      }
    }
  }
}

// ai.tide.PaddedAttention takes head sizes 16, 32, ..., 128 (its vector kernel); this layer's heads
// of 4 stay on ONNX Runtime's MultiHeadAttention with the mask column, and the report says why.
// (Real exports through the kernel: fusion_check_test.cc; the kernel: padded_attention_test.cc.)
TEST(TransformerFusionTest, TideAttentionNeedsAHeadSizeItsKernelRuns) {
  onnx::ModelProto m = BertLayer();
  FusionOptions o;
  o.tide_attention = true;
  auto report = FuseTransformer(o, &m);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->attention_fused, 1);
  EXPECT_EQ(report->tide_attention, 0);
  EXPECT_EQ(CountOps(m, "PaddedAttention"), 0);
  EXPECT_EQ(CountOps(m, "Pad"), 1) << "the mask column instead";
  bool said = false;
  for (const auto& why : report->skipped) said |= why.find("kept on ONNX Runtime's attention: head size 4") != std::string::npos;
  EXPECT_TRUE(said);
}

enum class GeluForm { kTorchErf, kHalfFirst, kContribGelu, kNoConstantBias };

// A feed-forward block as the PyTorch exporter writes it: x [B, S, 8] -> MatMul -> Add(bias)
// -> GELU (`form`) -> MatMul -> LayerNormalization -> y; `mean_read`: LayerNormalization's Mean
// is a graph output too; `beta` false: LayerNormalization without its B input.
onnx::ModelProto FeedForward(GeluForm form, bool mean_read = false, bool beta = true) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* ms = m.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("ffn");
  AddInput(g, "x", onnx::TensorProto::FLOAT, 3);
  AddInput(g, "attention_mask", onnx::TensorProto::INT64, 2);  // unread: RunLayer feeds it
  std::mt19937 rng(11);
  GraphBuilder b(g);
  const std::string up = b.Node("MatMul", {"x", b.Floats("w1", {kHidden, 16}, &rng, 0.5f)});
  const std::string a = form == GeluForm::kNoConstantBias ? b.Node("Add", {up, up})
                                                           : b.Node("Add", {b.Floats("b1", {16}, &rng, 0.5f), up});
  std::string gelu;
  if (form == GeluForm::kContribGelu) {
    gelu = b.Node("Gelu", {a});
    b.last()->set_domain("com.microsoft");
  } else if (form == GeluForm::kHalfFirst) {  // (0.5 x) * (1 + erf(x * 1/sqrt 2))
    const std::string half = b.Node("Mul", {a, b.Scalar("half", 0.5f)});
    const std::string e = b.Node("Erf", {b.Node("Mul", {a, b.Scalar("inv_sqrt2", 0.70710678f)})});
    gelu = b.Node("Mul", {half, b.Node("Add", {b.Scalar("one", 1.0f), e})});
  } else {  // (x * (1 + erf(x / sqrt 2))) * 0.5
    const std::string e = b.Node("Erf", {b.Node("Div", {a, b.Scalar("sqrt2", 1.4142135f)})});
    gelu = b.Node("Mul", {b.Node("Mul", {a, b.Node("Add", {e, b.Scalar("one", 1.0f)})}), b.Scalar("half", 0.5f)});
  }
  const std::string down = b.Node("MatMul", {gelu, b.Floats("w2", {16, kHidden}, &rng, 0.5f)});
  std::vector<std::string> ln_inputs = {down, b.Floats("gamma", {kHidden}, &rng, 1.0f)};
  if (beta) ln_inputs.push_back(b.Floats("beta", {kHidden}, &rng, 0.1f));
  b.Node("LayerNormalization", ln_inputs, "y");
  if (mean_read) b.last()->add_output("mean");
  AddOutput(g, "y");
  if (mean_read) AddOutput(g, "mean");
  return m;
}

FusionOptions TideElementwiseOnly() {
  FusionOptions o;
  o.attention = false;
  o.skip_layer_norm = false;
  o.tide_elementwise = true;
  return o;
}

// Add + GELU and LayerNormalization move to ai.tide.BiasGelu / LayerNorm in every form the
// exporters write, and compute what ONNX Runtime computed.
TEST(TransformerFusionTest, TideElementwiseKernelsTakeEveryGeluForm) {
  for (GeluForm form : {GeluForm::kTorchErf, GeluForm::kHalfFirst, GeluForm::kContribGelu}) {
    const onnx::ModelProto original = FeedForward(form);
    onnx::ModelProto m = original;
    auto report = FuseTransformer(TideElementwiseOnly(), &m);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->tide_bias_gelu, 1) << static_cast<int>(form);
    EXPECT_EQ(report->tide_layer_norm, 1);
    EXPECT_EQ(CountOps(m, "Erf") + CountOps(m, "Gelu") + CountOps(m, "Add") + CountOps(m, "LayerNormalization"), 0);
    EXPECT_EQ(CountOps(m, "BiasGelu"), 1);
    EXPECT_EQ(CountOps(m, "LayerNorm"), 1);
    EXPECT_NE(report->Summary().find("1 bias-gelu + 1 layernorm on tide kernels"), std::string::npos) << report->Summary();
    const int64_t batch = 2, seq = 5;
    std::mt19937 rng(3);
    std::normal_distribution<float> dist(0.0f, 2.0f);
    std::vector<float> x(static_cast<size_t>(batch * seq * kHidden));
    for (float& v : x) v = dist(rng);
    const std::vector<int64_t> mask(static_cast<size_t>(batch * seq), 1);
    const std::vector<float> want = RunLayer(original, x, mask, batch, seq);
    const std::vector<float> got = RunLayer(m, x, mask, batch, seq);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
  }
}

// An absent beta becomes a zero initializer (ai.tide.LayerNorm always takes three inputs).
TEST(TransformerFusionTest, TideLayerNormWithoutBetaGetsAZeroBeta) {
  const onnx::ModelProto original = FeedForward(GeluForm::kTorchErf, /*mean_read=*/false, /*beta=*/false);
  onnx::ModelProto m = original;
  auto report = FuseTransformer(TideElementwiseOnly(), &m);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->tide_layer_norm, 1);
  const onnx::NodeProto* ln = FindOp(m, "LayerNorm");
  ASSERT_NE(ln, nullptr);
  ASSERT_EQ(ln->input_size(), 3);
  bool zero = false;
  for (const auto& t : m.graph().initializer()) {
    if (t.name() != ln->input(2)) continue;
    zero = t.dims_size() == 1 && t.dims(0) == kHidden && t.raw_data() == std::string(kHidden * sizeof(float), '\0');
  }
  EXPECT_TRUE(zero) << ln->input(2) << " is not a zero [" << kHidden << "] initializer";
  const int64_t batch = 2, seq = 3;
  std::vector<float> x(static_cast<size_t>(batch * seq * kHidden));
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.37f * static_cast<float>(i % 11) - 1.5f;
  const std::vector<int64_t> mask(static_cast<size_t>(batch * seq), 1);
  const std::vector<float> want = RunLayer(original, x, mask, batch, seq);
  const std::vector<float> got = RunLayer(m, x, mask, batch, seq);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

TEST(TransformerFusionTest, TideElementwiseKernelsLeaveNearMissesAndSayWhy) {
  onnx::ModelProto m = FeedForward(GeluForm::kNoConstantBias, /*mean_read=*/true);
  auto report = FuseTransformer(TideElementwiseOnly(), &m);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->tide_bias_gelu, 0);
  EXPECT_EQ(report->tide_layer_norm, 0);
  EXPECT_EQ(CountOps(m, "Erf"), 1);
  EXPECT_EQ(CountOps(m, "LayerNormalization"), 1);
  std::string said;
  for (const auto& why : report->skipped) said += why + "\n";
  EXPECT_NE(said.find("GELU kept on ONNX Runtime: no constant float bias [N] in its Add"), std::string::npos) << said;
  EXPECT_NE(said.find("layer norm kept on ONNX Runtime: an output beside the first is read"), std::string::npos) << said;
}

TEST(TransformerFusionTest, PaddingMaskStaysAnInputBelowOpset11) {
  onnx::ModelProto m = BertLayer();
  ASSERT_TRUE(FuseTransformer(MaskAsInput(), &m).ok());
  std::vector<std::string> skipped;
  EXPECT_EQ(MovePaddingMaskIntoKeys(m.mutable_graph(), 10, &skipped), 0);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("opset 10"), std::string::npos) << skipped[0];
  EXPECT_EQ(FindOp(m, "MultiHeadAttention")->input_size(), 5);
  // A MultiHeadAttention without a constant bias is left alone, with the reason.
  onnx::ModelProto n = BertLayer();
  ASSERT_TRUE(FuseTransformer(MaskAsInput(), &n).ok());
  for (auto& node : *n.mutable_graph()->mutable_node()) {
    if (node.op_type() == "MultiHeadAttention") node.set_input(3, "x");
  }
  skipped.clear();
  EXPECT_EQ(MovePaddingMaskIntoKeys(n.mutable_graph(), 17, &skipped), 0);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("constant float bias"), std::string::npos) << skipped[0];
}

TEST(TransformerFusionTest, QueryWithoutBiasGetsZeroBias) {
  LayerVariant var;
  var.query_bias = false;
  onnx::ModelProto m = BertLayer(var);
  auto report = FuseTransformer({}, &m);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->attention_fused, 1);
}

TEST(TransformerFusionTest, LeavesNonMatchingGraphUnchanged) {
  struct Case {
    const char* what;
    LayerVariant var;
    const char* reason;
  };
  std::vector<Case> cases;
  cases.push_back({"K not transposed for QK^T", {}, "expected perm"});
  cases.back().var.key_perm = {0, 2, 1, 3};
  cases.push_back({"weak mask constant", {}, "-1000"});
  cases.back().var.mask_constant = -1.0f;
  cases.push_back({"probabilities read elsewhere", {}, "other readers"});
  cases.back().var.softmax_is_output = true;
  for (const Case& c : cases) {
    onnx::ModelProto m = BertLayer(c.var);
    FusionOptions only_attention;
    only_attention.skip_layer_norm = false;
    const std::string before = m.SerializeAsString();
    auto report = FuseTransformer(only_attention, &m);
    ASSERT_TRUE(report.ok()) << c.what;
    EXPECT_EQ(report->attention_fused, 0) << c.what;
    EXPECT_EQ(m.SerializeAsString(), before) << c.what;
    ASSERT_EQ(report->skipped.size(), 1u) << c.what;
    EXPECT_NE(report->skipped[0].find(c.reason), std::string::npos) << c.what << ": " << report->skipped[0];
  }
}

TEST(TransformerFusionTest, SkipLayerNormNeedsAProjection) {
  // LayerNormalization(Add(x, x2)) of two graph inputs: no projection side, left alone.
  onnx::ModelProto m;
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "a", onnx::TensorProto::FLOAT, 3);
  AddInput(g, "b", onnx::TensorProto::FLOAT, 3);
  GraphBuilder b(g);
  std::mt19937 rng(3);
  std::string sum = b.Node("Add", {"a", "b"});
  b.Node("LayerNormalization", {sum, b.Floats("g", {kHidden}, &rng, 1.0f), b.Floats("be", {kHidden}, &rng, 1.0f)}, "y");
  AddOutput(g, "y");
  const std::string before = m.SerializeAsString();
  auto report = FuseTransformer({}, &m);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->fused(), 0);
  EXPECT_EQ(m.SerializeAsString(), before);
  ASSERT_EQ(report->skipped.size(), 1u);
  EXPECT_NE(report->skipped[0].find("weight projection"), std::string::npos);
}

TEST(TransformerFusionTest, RejectsAlreadyFusedModel) {
  onnx::ModelProto m = BertLayer();
  ASSERT_TRUE(FuseTransformer({}, &m).ok());
  auto again = FuseTransformer({}, &m);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace tide::optimize
