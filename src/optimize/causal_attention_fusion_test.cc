// UseTideCausalAttention (through FuseTransformer) on small hand-built decoder attention blocks:
// which com.microsoft.GroupQueryAttention nodes move to ai.tide.CausalAttention, why the others
// stay, and that the rewritten graph computes what ONNX Runtime's computed on a right-padded batch.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnxruntime_cxx_api.h"
#include "optimize/graph_rewrite.h"
#include "optimize/tide_attention.h"
#include "optimize/transformer_fusion.h"
#include "runtime/tide_ops.h"

namespace tide::optimize::causal_fusion_test {
namespace {

constexpr int64_t kModel = 32;  // the block's input width

enum class ValuePath { kMatMul, kBiasAdd, kInt8Dequantized };

struct Block {
  int64_t heads = 4, kv_heads = 2, head_size = 16;
  ValuePath value = ValuePath::kMatMul;
  bool past = false;            // a past_key input is given
  bool rotary = false;          // do_rotary = 1
  bool present_read = false;    // present_key is a graph output
};

void Input(onnx::GraphProto* g, const std::string& name, int elem, int rank) {
  onnx::ValueInfoProto* v = g->add_input();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
  for (int i = 0; i < rank; ++i) v->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("d" + std::to_string(i));
}

void Output(onnx::GraphProto* g, const std::string& name) {
  onnx::ValueInfoProto* v = g->add_output();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
}

onnx::NodeProto* Node(onnx::GraphProto* g, const std::string& op, const std::vector<std::string>& inputs,
                      const std::string& output) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(output);
  for (const auto& i : inputs) n->add_input(i);
  n->add_output(output);
  return n;
}

std::string Weight(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims, std::mt19937* rng) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  std::normal_distribution<float> dist(0.0f, 0.3f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(*rng);
  *g->add_initializer() = MakeFloatTensor(name, dims, v);
  return name;
}

// x [B, S, 32], seqlens_k [B] int32, total [1] int32 -> y [B, S, 32]: q / k / v projections,
// GroupQueryAttention, the output projection.
onnx::ModelProto DecoderBlock(const Block& b) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* ms = m.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("decoder_block");
  Input(g, "x", onnx::TensorProto::FLOAT, 3);
  Input(g, "seqlens_k", onnx::TensorProto::INT32, 1);
  Input(g, "total", onnx::TensorProto::INT32, 1);
  std::mt19937 rng(5);
  const int64_t q_width = b.heads * b.head_size, kv_width = b.kv_heads * b.head_size;
  Node(g, "MatMul", {"x", Weight(g, "wq", {kModel, q_width}, &rng)}, "q");
  Node(g, "MatMul", {"x", Weight(g, "wk", {kModel, kv_width}, &rng)}, "k");
  if (b.value == ValuePath::kMatMul) {
    Node(g, "MatMul", {"x", Weight(g, "wv", {kModel, kv_width}, &rng)}, "v");
  } else if (b.value == ValuePath::kBiasAdd) {
    Node(g, "MatMul", {"x", Weight(g, "wv", {kModel, kv_width}, &rng)}, "v_proj");
    Node(g, "Add", {Weight(g, "bv", {kv_width}, &rng), "v_proj"}, "v");
  } else {  // tools/decoder_int8.py's per-row form (not run here: only its width is read)
    Input(g, "xq", onnx::TensorProto::UINT8, 3);
    onnx::TensorProto* w = g->add_initializer();
    w->set_name("wv_int8");
    w->set_data_type(onnx::TensorProto::INT8);
    w->add_dims(kModel);
    w->add_dims(kv_width);
    w->set_raw_data(std::string(static_cast<size_t>(kModel * kv_width), '\1'));
    Node(g, "MatMulInteger", {"xq", "wv_int8"}, "v_acc");
    AddIntAttribute(Node(g, "Cast", {"v_acc"}, "v_accf"), "to", onnx::TensorProto::FLOAT);
    Input(g, "row_scale", onnx::TensorProto::FLOAT, 3);
    Node(g, "Mul", {"v_accf", "row_scale"}, "v_scaled");
    Node(g, "Mul", {"v_scaled", Weight(g, "v_col_scale", {kv_width}, &rng)}, "v");
  }
  if (b.past) Input(g, "past_key", onnx::TensorProto::FLOAT, 4);
  onnx::NodeProto* gqa = Node(g, "GroupQueryAttention",
                              {"q", "k", "v", b.past ? "past_key" : "", "", "seqlens_k", "total"}, "attention");
  gqa->set_domain("com.microsoft");
  gqa->add_output("present_key");
  gqa->add_output("present_value");
  AddIntAttribute(gqa, "num_heads", b.heads);
  AddIntAttribute(gqa, "kv_num_heads", b.kv_heads);
  AddFloatAttribute(gqa, "scale", 0.3f);
  if (b.rotary) AddIntAttribute(gqa, "do_rotary", 1);
  Node(g, "MatMul", {"attention", Weight(g, "wo", {q_width, kModel}, &rng)}, "y");
  Output(g, "y");
  if (b.present_read) Output(g, "present_key");
  return m;
}

int CountOps(const onnx::ModelProto& m, const std::string& op) {
  return static_cast<int>(std::count_if(m.graph().node().begin(), m.graph().node().end(),
                                        [&](const onnx::NodeProto& n) { return n.op_type() == op; }));
}

FusionOptions TideAttention(bool bf16 = false) {
  FusionOptions o;
  o.tide_attention = true;
  o.tide_causal_attention_bf16 = bf16;
  return o;
}

Ort::Env& Env() {
  static Ort::Env* env = new Ort::Env(ORT_LOGGING_LEVEL_ERROR, "causal_attention_fusion_test");
  return *env;
}

// y for x [3, 9, 32] of real lengths 9, 4 and 1 (right padding), only the real tokens' rows.
std::vector<float> RunBlock(const onnx::ModelProto& m) {
  std::string bytes;
  m.SerializeToString(&bytes);
  Ort::SessionOptions so;
  so.SetIntraOpNumThreads(1);
  runtime::RegisterTideOps(so);
  Ort::Session session(Env(), bytes.data(), bytes.size(), so);
  constexpr int64_t kBatch = 3, kSeq = 9;
  const int64_t lengths[kBatch] = {9, 4, 1};
  std::vector<float> x(static_cast<size_t>(kBatch * kSeq * kModel));
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& v : x) v = dist(rng);
  std::vector<int32_t> seqlens_k = {8, 3, 0};
  int32_t total = kSeq;
  const Ort::MemoryInfo mem = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  const std::vector<int64_t> x_dims = {kBatch, kSeq, kModel}, lens_dims = {kBatch}, total_dims = {1};
  std::vector<Ort::Value> values;
  values.push_back(Ort::Value::CreateTensor<float>(mem, x.data(), x.size(), x_dims.data(), 3));
  values.push_back(Ort::Value::CreateTensor<int32_t>(mem, seqlens_k.data(), seqlens_k.size(), lens_dims.data(), 1));
  values.push_back(Ort::Value::CreateTensor<int32_t>(mem, &total, 1, total_dims.data(), 1));
  const char* names[] = {"x", "seqlens_k", "total"};
  const char* out_name[] = {"y"};
  auto out = session.Run(Ort::RunOptions{nullptr}, names, values.data(), values.size(), out_name, 1);
  const float* y = out[0].GetTensorData<float>();
  std::vector<float> real;
  for (int64_t b = 0; b < kBatch; ++b) {
    real.insert(real.end(), y + b * kSeq * kModel, y + (b * kSeq + lengths[b]) * kModel);
  }
  return real;
}

TEST(CausalAttentionFusionTest, GroupQueryAttentionMovesToTheTideKernelAndComputesTheSame) {
  for (ValuePath value : {ValuePath::kMatMul, ValuePath::kBiasAdd}) {
    Block b;
    b.value = value;
    const onnx::ModelProto original = DecoderBlock(b);
    onnx::ModelProto m = original;
    auto report = FuseTransformer(TideAttention(), &m);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->tide_causal_attention, 1);
    EXPECT_EQ(report->attention_fused, 0);
    EXPECT_GT(report->fused(), 0) << "the load's probe must run for a decoder";
    EXPECT_THAT(report->Summary(), ::testing::HasSubstr("1 causal attention (tide kernel)"));
    EXPECT_EQ(CountOps(m, "GroupQueryAttention"), 0);
    ASSERT_EQ(CountOps(m, kTideCausalAttention), 1);
    const std::vector<float> want = RunBlock(original), got = RunBlock(m);
    ASSERT_EQ(got.size(), want.size());
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, static_cast<double>(std::fabs(got[i] - want[i])));
    EXPECT_LT(worst, 1e-4) << (value == ValuePath::kBiasAdd ? "bias add" : "matmul");
  }
}

TEST(CausalAttentionFusionTest, Bf16AndTheInt8ValueProjection) {
  Block b;
  b.value = ValuePath::kInt8Dequantized;
  b.head_size = 32;
  onnx::ModelProto m = DecoderBlock(b);
  auto report = FuseTransformer(TideAttention(true), &m);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->tide_causal_attention, 1);
  EXPECT_TRUE(report->tide_causal_attention_bf16);
  EXPECT_THAT(report->Summary(), ::testing::HasSubstr("1 causal attention (tide kernel, BF16 products)"));
  EXPECT_FALSE(report->tide_attention_bf16) << "no encoder attention here";
  for (const auto& n : m.graph().node()) {
    if (n.op_type() != kTideCausalAttention) continue;
    bool bf16 = false;
    for (const auto& a : n.attribute()) bf16 |= a.name() == "precision" && a.s() == kTidePrecisionBf16;
    EXPECT_TRUE(bf16);
    EXPECT_THAT(std::vector<std::string>(n.input().begin(), n.input().end()),
                ::testing::ElementsAre("q", "k", "v", "seqlens_k"));
  }
}

TEST(CausalAttentionFusionTest, WhatTheKernelDoesNotDoStaysOnOnnxRuntimeAndSaysWhy) {
  struct Case {
    Block block;
    std::string why;
  };
  Block past, rotary, head24, present, off;
  past.past = true;
  rotary.rotary = true;
  head24.head_size = 24;
  present.present_read = true;
  for (const Case& c : {Case{past, "it reads a past key / value cache"}, Case{rotary, "attribute do_rotary is set"},
                        Case{head24, "head size 24 is not 16, 32, ..., 128"},
                        Case{present, "its present key / value output is read"}}) {
    onnx::ModelProto m = DecoderBlock(c.block);
    auto report = FuseTransformer(TideAttention(), &m);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->tide_causal_attention, 0) << c.why;
    EXPECT_EQ(CountOps(m, "GroupQueryAttention"), 1) << c.why;
    EXPECT_THAT(report->skipped, ::testing::Contains(::testing::HasSubstr(
                                     "kept on ONNX Runtime's GroupQueryAttention: " + c.why)));
  }
  onnx::ModelProto m = DecoderBlock(off);
  FusionOptions no_tide;
  auto report = FuseTransformer(no_tide, &m);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->fused(), 0);
  EXPECT_EQ(CountOps(m, "GroupQueryAttention"), 1);
}

}  // namespace
}  // namespace tide::optimize::causal_fusion_test
