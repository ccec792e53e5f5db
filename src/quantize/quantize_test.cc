#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx_graph/graph_util.h"
#include "onnx_graph/model_io.h"
#include "quantize/fp16_converter.h"
#include "quantize/int8_quantizer.h"
#include "runtime/ort_backend.h"
#include "shared_assets.h"

namespace tide::quantize {

using onnx_graph::FloatToHalf;
using onnx_graph::HalfToFloat;
using onnx_graph::OpsetVersion;
using onnx_graph::GraphPrecision;
using onnx_graph::WeightFlopsPerToken;
using onnx_graph::ExternalData;
using onnx_graph::LoadModel;
using onnx_graph::ParseModel;
using onnx_graph::SaveModel;

namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr int64_t kVocab = 50, kHidden = 32, kFfn = 64;

void AddFloatInit(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims, std::mt19937* rng,
                  float stddev) {
  std::normal_distribution<float> dist(0.0f, stddev);
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= d;
  }
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(*rng);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
}

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op, const std::string& name,
                         std::vector<std::string> in, std::vector<std::string> out) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& i : in) n->add_input(i);
  for (auto& o : out) n->add_output(o);
  return n;
}

void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void FloatAttr(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

// A reranker-shaped encoder: embedding Gather -> MatMul+Add -> Relu -> MatMul -> masked mean ->
// Gemm "dense" (transB, alpha, beta) -> Tanh -> Gemm "classifier" -> logits [batch, 1].
onnx::ModelProto TinyReranker(uint32_t seed = 7) {
  std::mt19937 rng(seed);
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("tiny_reranker");
  for (const char* name : {"input_ids", "attention_mask"}) {
    auto* in = g->add_input();
    in->set_name(name);
    auto* t = in->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::INT64);
    t->mutable_shape()->add_dim()->set_dim_param("batch");
    t->mutable_shape()->add_dim()->set_dim_param("sequence");
  }
  auto* out = g->add_output();
  out->set_name("logits");
  auto* ot = out->mutable_type()->mutable_tensor_type();
  ot->set_elem_type(onnx::TensorProto::FLOAT);
  ot->mutable_shape()->add_dim()->set_dim_param("batch");
  ot->mutable_shape()->add_dim()->set_dim_value(1);

  AddFloatInit(g, "embeddings.word_embeddings.weight", {kVocab, kHidden}, &rng, 1.0f);
  AddFloatInit(g, "ffn.w1", {kHidden, kFfn}, &rng, 0.2f);
  AddFloatInit(g, "ffn.b1", {kFfn}, &rng, 0.1f);
  AddFloatInit(g, "ffn.w2", {kFfn, kHidden}, &rng, 0.15f);
  AddFloatInit(g, "dense.weight", {kHidden, kHidden}, &rng, 0.2f);
  AddFloatInit(g, "dense.bias", {kHidden}, &rng, 0.1f);
  AddFloatInit(g, "classifier.weight", {1, kHidden}, &rng, 0.3f);
  AddFloatInit(g, "classifier.bias", {1}, &rng, 0.1f);
  AddNode(g, "Gather", "embeddings/Gather", {"embeddings.word_embeddings.weight", "input_ids"}, {"emb"});
  AddNode(g, "MatMul", "layer.0/intermediate/MatMul", {"emb", "ffn.w1"}, {"h1"});
  AddNode(g, "Add", "layer.0/intermediate/Add", {"h1", "ffn.b1"}, {"h1b"});
  AddNode(g, "Relu", "layer.0/intermediate/Relu", {"h1b"}, {"act"});
  AddNode(g, "MatMul", "layer.0/output/MatMul", {"act", "ffn.w2"}, {"h2"});
  IntAttr(AddNode(g, "Cast", "mask/Cast", {"attention_mask"}, {"maskf"}), "to", onnx::TensorProto::FLOAT);
  onnx::TensorProto* axes = g->add_initializer();
  axes->set_name("axes2");
  axes->set_data_type(onnx::TensorProto::INT64);
  axes->add_dims(1);
  axes->add_int64_data(2);
  AddNode(g, "Unsqueeze", "mask/Unsqueeze", {"maskf", "axes2"}, {"mask3"});
  AddNode(g, "Mul", "mask/Mul", {"h2", "mask3"}, {"masked"});
  auto* mean = AddNode(g, "ReduceMean", "pool/ReduceMean", {"masked"}, {"pooled"});
  auto* ax = mean->add_attribute();
  ax->set_name("axes");
  ax->set_type(onnx::AttributeProto::INTS);
  ax->add_ints(1);
  IntAttr(mean, "keepdims", 0);
  auto* dense = AddNode(g, "Gemm", "head/dense/Gemm", {"pooled", "dense.weight", "dense.bias"}, {"dense_out"});
  IntAttr(dense, "transB", 1);
  FloatAttr(dense, "alpha", 0.5f);
  FloatAttr(dense, "beta", 2.0f);
  AddNode(g, "Tanh", "head/Tanh", {"dense_out"}, {"tanh"});
  auto* cls = AddNode(g, "Gemm", "head/classifier/Gemm", {"tanh", "classifier.weight", "classifier.bias"}, {"logits"});
  IntAttr(cls, "transB", 1);
  return m;
}

runtime::TokenBatch RandomBatch(int64_t batch, int64_t seq, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> id(0, vocab - 1);
  std::uniform_int_distribution<int64_t> len(1, seq);
  runtime::TokenBatch b;
  b.Resize(batch, seq, false);
  for (int64_t r = 0; r < batch; ++r) {
    const int64_t n = len(rng);
    for (int64_t j = 0; j < n; ++j) {
      b.input_ids[r * seq + j] = id(rng);
      b.attention_mask[r * seq + j] = 1;
    }
  }
  return b;
}

absl::StatusOr<runtime::Logits> Score(const onnx::ModelProto& m, const runtime::TokenBatch& batch) {
  auto backend = runtime::OrtBackend::Create({.model_data = m.SerializeAsString(), .intra_op_threads = 1});
  if (!backend.ok()) return backend.status();
  runtime::Logits out;
  if (absl::Status s = (*backend)->Run(batch, &out); !s.ok()) return s;
  return out;
}

struct Diff {
  double max_abs = 0, max_ref = 0;
};
Diff Compare(const runtime::Logits& ref, const runtime::Logits& got) {
  Diff d;
  EXPECT_EQ(ref.values.size(), got.values.size());
  for (size_t i = 0; i < ref.values.size() && i < got.values.size(); ++i) {
    d.max_abs = std::max(d.max_abs, static_cast<double>(std::fabs(ref.values[i] - got.values[i])));
    d.max_ref = std::max(d.max_ref, static_cast<double>(std::fabs(ref.values[i])));
  }
  return d;
}

std::vector<std::string> OpTypes(const onnx::ModelProto& m) {
  std::vector<std::string> ops;
  for (const auto& n : m.graph().node()) ops.push_back(n.op_type());
  return ops;
}

const onnx::TensorProto* Init(const onnx::ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer()) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

// Tolerance stated for the tiny model: INT8 dynamic quantization keeps every logit within 5% of
// the largest FP32 logit magnitude (8-bit activations and weights through two layers).
constexpr double kInt8RelativeTolerance = 0.05;

TEST(QuantizeInt8Test, RewritesWeightMatMulsAndKeepsHeadAndEmbeddingsFp32) {
  for (Int8OpFormat format : {Int8OpFormat::kDynamicQuantizeMatMul, Int8OpFormat::kMatMulInteger}) {
    for (bool per_channel : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "format " << static_cast<int>(format) << " per_channel " << per_channel);
      onnx::ModelProto m = TinyReranker();
      auto report = QuantizeInt8({.per_channel = per_channel, .op_format = format}, &m);
      ASSERT_TRUE(report.ok()) << report.status();
      EXPECT_THAT(report->converted_nodes,
                  ElementsAre("layer.0/intermediate/MatMul", "layer.0/output/MatMul", "head/dense/Gemm"));
      EXPECT_THAT(report->skipped_nodes, ElementsAre("head/classifier/Gemm: excluded by name pattern"));
      EXPECT_LT(report->weight_bytes_after, report->weight_bytes_before);
      // Float weights replaced by int8 ones; embeddings and classifier untouched.
      EXPECT_EQ(Init(m, "ffn.w1"), nullptr);
      ASSERT_NE(Init(m, "ffn.w1_quantized"), nullptr);
      EXPECT_EQ(Init(m, "ffn.w1_quantized")->data_type(), onnx::TensorProto::INT8);
      EXPECT_EQ(Init(m, "ffn.w1_scale")->dims_size(), per_channel ? 1 : 0);
      ASSERT_NE(Init(m, "dense.weight_quantized"), nullptr);  // transposed to [K, N]
      EXPECT_THAT(Init(m, "dense.weight_quantized")->dims(), ElementsAre(kHidden, kHidden));
      EXPECT_EQ(Init(m, "embeddings.word_embeddings.weight")->data_type(), onnx::TensorProto::FLOAT);
      EXPECT_EQ(Init(m, "classifier.weight")->data_type(), onnx::TensorProto::FLOAT);
      const std::vector<std::string> ops = OpTypes(m);
      if (format == Int8OpFormat::kDynamicQuantizeMatMul) {
        EXPECT_EQ(std::count(ops.begin(), ops.end(), "DynamicQuantizeMatMul"), 3);
        EXPECT_EQ(OpsetVersion(m, "com.microsoft"), 1);
      } else {
        EXPECT_EQ(std::count(ops.begin(), ops.end(), "MatMulInteger"), 3);
        EXPECT_EQ(OpsetVersion(m, "com.microsoft"), 0);
      }
      EXPECT_EQ(std::count(ops.begin(), ops.end(), "MatMul"), 0);
      EXPECT_EQ(std::count(ops.begin(), ops.end(), "Gemm"), 1);  // the classifier
    }
  }
}

TEST(QuantizeInt8Test, QuantizedModelRunsWithinToleranceOfFp32) {
  const onnx::ModelProto fp32 = TinyReranker();
  const runtime::TokenBatch batch = RandomBatch(16, 24, kVocab, 11);
  auto ref = Score(fp32, batch);
  ASSERT_TRUE(ref.ok()) << ref.status();
  for (Int8OpFormat format : {Int8OpFormat::kDynamicQuantizeMatMul, Int8OpFormat::kMatMulInteger}) {
    for (bool per_channel : {false, true}) {
      for (bool reduce_range : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "format " << static_cast<int>(format) << " per_channel " << per_channel
                                        << " reduce_range " << reduce_range);
        onnx::ModelProto m = fp32;
        ASSERT_TRUE(QuantizeInt8({.per_channel = per_channel, .reduce_range = reduce_range, .op_format = format}, &m).ok());
        auto got = Score(m, batch);
        ASSERT_TRUE(got.ok()) << got.status();
        const Diff d = Compare(*ref, *got);
        EXPECT_GT(d.max_abs, 0.0) << "quantization changed nothing: was the graph rewritten?";
        EXPECT_LE(d.max_abs, kInt8RelativeTolerance * d.max_ref);
      }
    }
  }
}

TEST(QuantizeInt8Test, QuantizingTheHeadToo) {
  onnx::ModelProto m = TinyReranker();
  auto report = QuantizeInt8({.exclude_patterns = {}}, &m);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->converted_nodes.size(), 4u);
  EXPECT_EQ(Init(m, "classifier.weight"), nullptr);
}

TEST(QuantizeInt8Test, IncludePatternSelectsNodesByNodeOrWeightName) {
  onnx::ModelProto m = TinyReranker();
  auto report = QuantizeInt8({.include_patterns = {"intermediate", "^ffn\\.w2$"}}, &m);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->converted_nodes, ElementsAre("layer.0/intermediate/MatMul", "layer.0/output/MatMul"));
  EXPECT_THAT(report->skipped_nodes, UnorderedElementsAre("head/dense/Gemm: excluded by name pattern",
                                                          "head/classifier/Gemm: excluded by name pattern"));
  EXPECT_NE(Init(m, "dense.weight"), nullptr);
}

TEST(QuantizeInt8Test, SharedWeightIsQuantizedOnce) {
  onnx::ModelProto m = TinyReranker();
  // A second MatMul reading ffn.w1 (tied weights).
  onnx::GraphProto* g = m.mutable_graph();
  onnx::NodeProto extra;
  extra.set_op_type("MatMul");
  extra.set_name("tied/MatMul");
  extra.add_input("emb");
  extra.add_input("ffn.w1");
  extra.add_output("tied_out");
  *g->mutable_node()->Add() = extra;
  auto report = QuantizeInt8({}, &m);
  ASSERT_TRUE(report.ok()) << report.status();
  int quantized_copies = 0;
  for (const auto& t : m.graph().initializer()) quantized_copies += t.name().rfind("ffn.w1_quantized", 0) == 0;
  EXPECT_EQ(quantized_copies, 1);
}

// Two MatMuls reading one activation (like Q, K and V): one DynamicQuantizeLinear and two
// MatMulIntegerToFloat, the same scores as one DynamicQuantizeMatMul each (same arithmetic), and a
// MatMul with its own input keeps DynamicQuantizeMatMul.
TEST(QuantizeInt8Test, MatMulsReadingOneActivationShareItsQuantization) {
  for (bool per_channel : {false, true}) {
    SCOPED_TRACE(::testing::Message() << "per_channel " << per_channel);
    onnx::ModelProto fp32 = TinyReranker();
    onnx::GraphProto* g = fp32.mutable_graph();
    std::mt19937 rng(3);
    AddFloatInit(g, "ffn.w1b", {kHidden, kFfn}, &rng, 0.2f);
    // h1 = emb x w1 + emb x w1b (a second reader of emb with its own weight).
    for (auto& n : *g->mutable_node()) {
      if (n.name() == "layer.0/intermediate/Add") n.set_input(0, "h1_sum");
    }
    onnx::NodeProto second;
    second.set_op_type("MatMul");
    second.set_name("layer.0/second/MatMul");
    second.add_input("emb");
    second.add_input("ffn.w1b");
    second.add_output("h1_second");
    onnx::NodeProto sum;
    sum.set_op_type("Add");
    sum.set_name("layer.0/sum/Add");
    sum.add_input("h1");
    sum.add_input("h1_second");
    sum.add_output("h1_sum");
    // Insert after layer.0/intermediate/MatMul (index 1) to keep the topological order.
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    for (int i = 0; i < g->node_size(); ++i) {
      *nodes.Add() = g->node(i);
      if (g->node(i).name() == "layer.0/intermediate/MatMul") {
        *nodes.Add() = second;
        *nodes.Add() = sum;
      }
    }
    g->mutable_node()->Swap(&nodes);

    onnx::ModelProto shared = fp32, separate = fp32;
    ASSERT_TRUE(QuantizeInt8({.per_channel = per_channel, .share_input_quantization = true}, &shared).ok());
    ASSERT_TRUE(QuantizeInt8({.per_channel = per_channel, .share_input_quantization = false}, &separate).ok());
    const std::vector<std::string> ops = OpTypes(shared);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "DynamicQuantizeLinear"), 1);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "MatMulIntegerToFloat"), 2);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "DynamicQuantizeMatMul"), 2);  // output MatMul, head dense
    const std::vector<std::string> ops2 = OpTypes(separate);
    EXPECT_EQ(std::count(ops2.begin(), ops2.end(), "DynamicQuantizeMatMul"), 4);
    EXPECT_EQ(std::count(ops2.begin(), ops2.end(), "DynamicQuantizeLinear"), 0);
    const runtime::TokenBatch batch = RandomBatch(8, 20, kVocab, 5);
    auto a = Score(separate, batch);
    auto b = Score(shared, batch);
    auto ref = Score(fp32, batch);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_TRUE(ref.ok()) << ref.status();
    const Diff same = Compare(*a, *b);
    EXPECT_LE(same.max_abs, 1e-5 * std::max(1.0, same.max_ref));
    const Diff d = Compare(*ref, *b);
    EXPECT_LE(d.max_abs, kInt8RelativeTolerance * d.max_ref);
  }
}

TEST(QuantizeInt8Test, RefusesAnAlreadyQuantizedModel) {
  onnx::ModelProto m = TinyReranker();
  ASSERT_TRUE(QuantizeInt8({}, &m).ok());
  auto again = QuantizeInt8({}, &m);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr("already quantized"));
  EXPECT_THAT(again.status().message(), HasSubstr("DynamicQuantizeMatMul"));
  onnx::ModelProto h = TinyReranker();
  ASSERT_TRUE(ConvertFp16({.mode = Fp16Mode::kWeightsOnly}, &h).ok());
  auto on_fp16 = QuantizeInt8({}, &h);
  EXPECT_EQ(on_fp16.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(on_fp16.status().message(), HasSubstr("float16"));
}

TEST(QuantizeInt8Test, GraphPrecisionNamesWhatEachRewriteProduces) {
  // What tide serve records at load (tide.model.precision on the batch spans, docs/tracing.md).
  onnx::ModelProto fp32 = TinyReranker();
  EXPECT_EQ(GraphPrecision(fp32), "fp32");
  onnx::ModelProto int8 = TinyReranker();
  ASSERT_TRUE(QuantizeInt8({}, &int8).ok());
  EXPECT_EQ(GraphPrecision(int8), "int8");
  onnx::ModelProto fp16 = TinyReranker();
  ASSERT_TRUE(ConvertFp16({.mode = Fp16Mode::kWeightsOnly}, &fp16).ok());
  EXPECT_EQ(GraphPrecision(fp16), "fp16");
}

TEST(QuantizeInt8Test, WeightFlopsPerTokenCountTheWeightProductsInEveryPrecision) {
  // What tide serve derives the batch saturation from (serving::DefaultBatchSaturationTokens): 2 x
  // the weights a token meets (w1, w2, dense, classifier), not the embedding table it looks up.
  const uint64_t expected = 2 * (kHidden * kFfn + kFfn * kHidden + kHidden * kHidden + kHidden);
  onnx::ModelProto fp32 = TinyReranker();
  EXPECT_EQ(WeightFlopsPerToken(fp32.graph()), expected);
  for (Int8OpFormat format : {Int8OpFormat::kDynamicQuantizeMatMul, Int8OpFormat::kMatMulInteger}) {
    onnx::ModelProto int8 = TinyReranker();
    ASSERT_TRUE(QuantizeInt8({.op_format = format}, &int8).ok());
    EXPECT_EQ(WeightFlopsPerToken(int8.graph()), expected) << static_cast<int>(format);
  }
  onnx::ModelProto fp16 = TinyReranker();  // float16 weights read through Casts
  ASSERT_TRUE(ConvertFp16({.mode = Fp16Mode::kWeightsOnly}, &fp16).ok());
  EXPECT_EQ(WeightFlopsPerToken(fp16.graph()), expected);
  onnx::ModelProto none = TinyReranker();
  for (auto& n : *none.mutable_graph()->mutable_node()) {
    if (n.op_type() == "MatMul" || n.op_type() == "Gemm") n.set_op_type("Identity");
  }
  EXPECT_EQ(WeightFlopsPerToken(none.graph()), 0u);
}

TEST(QuantizeInt8Test, ClearErrorsForUnsupportedOrMalformedGraphs) {
  {  // nothing selected
    onnx::ModelProto m = TinyReranker();
    auto r = QuantizeInt8({.exclude_patterns = {"."}}, &m);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(r.status().message(), HasSubstr("nothing to quantize"));
  }
  {  // bad pattern
    onnx::ModelProto m = TinyReranker();
    auto r = QuantizeInt8({.include_patterns = {"(unclosed"}}, &m);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("(unclosed"));
  }
  {  // weight bytes do not match its dims
    onnx::ModelProto m = TinyReranker();
    for (auto& t : *m.mutable_graph()->mutable_initializer()) {
      if (t.name() == "ffn.w2") t.mutable_raw_data()->resize(12);
    }
    auto r = QuantizeInt8({}, &m);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("ffn.w2"));
  }
  {  // NaN weight
    onnx::ModelProto m = TinyReranker();
    for (auto& t : *m.mutable_graph()->mutable_initializer()) {
      if (t.name() == "ffn.w1") {
        const float nan = std::nanf("");
        t.mutable_raw_data()->replace(0, 4, reinterpret_cast<const char*>(&nan), 4);
      }
    }
    auto r = QuantizeInt8({}, &m);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("NaN"));
  }
  {  // standard-ops format needs opset 11
    onnx::ModelProto m = TinyReranker();
    m.mutable_opset_import(0)->set_version(10);
    auto r = QuantizeInt8({.op_format = Int8OpFormat::kMatMulInteger}, &m);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("opset 10"));
  }
  {  // no graph at all / not protobuf
    onnx::ModelProto m;
    EXPECT_EQ(QuantizeInt8({}, &m).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(ParseModel("this is not an onnx model").status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(ModelIoTest, ExternalDataRoundTripLoadsInOnnxRuntime) {
  const fs::path dir = fs::temp_directory_path() / ("tide_quantize_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  onnx::ModelProto m = TinyReranker();
  const runtime::TokenBatch batch = RandomBatch(4, 10, kVocab, 3);
  auto ref = Score(m, batch);
  ASSERT_TRUE(ref.ok()) << ref.status();
  onnx::ModelProto saved = m;
  ASSERT_TRUE(SaveModel(saved, (dir / "model.onnx").string(), {.external_data = ExternalData::kAlways}).ok());
  ASSERT_TRUE(fs::exists(dir / "model.onnx.data"));
  EXPECT_LT(fs::file_size(dir / "model.onnx"), 4096u);  // weights live in the .data file
  // ONNX Runtime reads the external layout we wrote ...
  auto backend = runtime::OrtBackend::Create({.model_path = (dir / "model.onnx").string(), .intra_op_threads = 1});
  ASSERT_TRUE(backend.ok()) << backend.status();
  runtime::Logits out;
  ASSERT_TRUE((*backend)->Run(batch, &out).ok());
  EXPECT_EQ(out.values, ref->values);
  // ... and LoadModel brings the weights back inline, so the passes can rewrite them.
  auto loaded = LoadModel((dir / "model.onnx").string());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(Init(*loaded, "ffn.w1")->raw_data(), Init(m, "ffn.w1")->raw_data());
  EXPECT_EQ(Init(*loaded, "ffn.w1")->data_location(), onnx::TensorProto::DEFAULT);
  ASSERT_TRUE(QuantizeInt8({}, &*loaded).ok());

  // External data that points outside the model folder or past the file end is refused.
  onnx::ModelProto evil = m;
  for (auto& t : *evil.mutable_graph()->mutable_initializer()) {
    if (t.name() != "ffn.w1") continue;
    t.clear_raw_data();
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    auto* e = t.add_external_data();
    e->set_key("location");
    e->set_value("../secret.bin");
  }
  ASSERT_TRUE(SaveModel(evil, (dir / "evil.onnx").string(), {.external_data = ExternalData::kNever}).ok());
  auto r = LoadModel((dir / "evil.onnx").string());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("leaves the model folder"));
  {
    onnx::ModelProto truncated = m;
    for (auto& t : *truncated.mutable_graph()->mutable_initializer()) {
      if (t.name() != "ffn.w1") continue;
      t.clear_raw_data();
      t.set_data_location(onnx::TensorProto::EXTERNAL);
      auto* e = t.add_external_data();
      e->set_key("location");
      e->set_value("model.onnx.data");
      auto* o = t.add_external_data();
      o->set_key("offset");
      o->set_value("100000000");
    }
    ASSERT_TRUE(SaveModel(truncated, (dir / "truncated.onnx").string(), {.external_data = ExternalData::kNever}).ok());
    auto t = LoadModel((dir / "truncated.onnx").string());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(t.status().message(), HasSubstr("truncated"));
  }
  EXPECT_EQ(LoadModel((dir / "absent.onnx").string()).status().code(), absl::StatusCode::kNotFound);
  fs::remove_all(dir);
}

TEST(HalfTest, RoundsToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);            // rounds up to inf
  EXPECT_EQ(FloatToHalf(1.0f + 1.0f / 2048), 0x3c00);  // halfway, even stays
  EXPECT_EQ(FloatToHalf(1.0f + 3.0f / 2048), 0x3c02);  // halfway, odd rounds up
  EXPECT_EQ(FloatToHalf(5.9604645e-8f), 0x0001);       // smallest subnormal
  EXPECT_EQ(FloatToHalf(1e-9f), 0x0000);
  EXPECT_EQ(FloatToHalf(std::nanf("")) & 0x7c00, 0x7c00);
  for (uint32_t h = 0; h < 0x7c00; ++h) EXPECT_EQ(FloatToHalf(HalfToFloat(static_cast<uint16_t>(h))), h);
}

TEST(ConvertFp16Test, WeightsOnlyRunsOnCpuWithinTolerance) {
  const onnx::ModelProto fp32 = TinyReranker();
  const runtime::TokenBatch batch = RandomBatch(8, 16, kVocab, 5);
  auto ref = Score(fp32, batch);
  ASSERT_TRUE(ref.ok()) << ref.status();
  onnx::ModelProto m = fp32;
  auto report = ConvertFp16({.mode = Fp16Mode::kWeightsOnly}, &m);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->converted_nodes.size(), 3u);
  ASSERT_NE(Init(m, "ffn.w1_fp16"), nullptr);
  EXPECT_EQ(Init(m, "ffn.w1_fp16")->data_type(), onnx::TensorProto::FLOAT16);
  EXPECT_EQ(Init(m, "ffn.w1"), nullptr);
  auto got = Score(m, batch);
  ASSERT_TRUE(got.ok()) << got.status();
  const Diff d = Compare(*ref, *got);
  EXPECT_GT(d.max_abs, 0.0);
  EXPECT_LE(d.max_abs, 5e-3 * d.max_ref);  // 11-bit mantissa weights
}

TEST(ConvertFp16Test, MatMulModeComputesInHalfBetweenCasts) {
  onnx::ModelProto m = TinyReranker();
  auto report = ConvertFp16({.mode = Fp16Mode::kMatMul}, &m);
  ASSERT_TRUE(report.ok()) << report.status();
  int casts = 0;
  for (const auto& n : m.graph().node()) {
    casts += n.op_type() == "Cast";
    if (n.name() == "layer.0/intermediate/MatMul") {
      EXPECT_EQ(n.input(0), "layer.0/intermediate/MatMul_input_fp16");
      EXPECT_EQ(n.input(1), "ffn.w1_fp16");
    }
  }
  EXPECT_EQ(casts, 1 + 2 * 3);  // the mask Cast + one in, one out per converted node
  EXPECT_EQ(Init(m, "dense.bias_fp16")->data_type(), onnx::TensorProto::FLOAT16);
  EXPECT_EQ(Init(m, "classifier.weight")->data_type(), onnx::TensorProto::FLOAT);
}

TEST(ConvertFp16Test, MatMulModeRunsOnCpuWithinTolerance) {
  const onnx::ModelProto fp32 = TinyReranker();
  const runtime::TokenBatch batch = RandomBatch(8, 16, kVocab, 6);
  auto ref = Score(fp32, batch);
  ASSERT_TRUE(ref.ok()) << ref.status();
  onnx::ModelProto m = fp32;
  ASSERT_TRUE(ConvertFp16({.mode = Fp16Mode::kMatMul}, &m).ok());
  auto got = Score(m, batch);
  ASSERT_TRUE(got.ok()) << got.status();
  const Diff d = Compare(*ref, *got);
  EXPECT_GT(d.max_abs, 0.0) << "float16 compute changed nothing: was the graph rewritten?";
  // Weights and activations rounded to 11-bit mantissas through three layers.
  EXPECT_LE(d.max_abs, 1e-2 * d.max_ref);
}

TEST(ConvertFp16Test, ClearErrors) {
  {  // a finite weight beyond float16's range would become infinity
    onnx::ModelProto m = TinyReranker();
    for (auto& t : *m.mutable_graph()->mutable_initializer()) {
      if (t.name() == "ffn.w2") {
        const float big = 1e5f;
        t.mutable_raw_data()->replace(4, 4, reinterpret_cast<const char*>(&big), 4);
      }
    }
    for (Fp16Mode mode : {Fp16Mode::kMatMul, Fp16Mode::kWeightsOnly}) {
      onnx::ModelProto copy = m;
      auto r = ConvertFp16({.mode = mode}, &copy);
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(r.status().message(), HasSubstr("ffn.w2"));
      EXPECT_THAT(r.status().message(), HasSubstr("float16's range"));
    }
    // Leaving that weight in FP32 works.
    auto r = ConvertFp16({.exclude_patterns = {"classifier", "^ffn\\.w2$"}}, &m);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->converted_nodes.size(), 2u);
  }
  {  // nothing selected, already converted, no graph
    onnx::ModelProto m = TinyReranker();
    EXPECT_EQ(ConvertFp16({.exclude_patterns = {"."}}, &m).status().code(), absl::StatusCode::kFailedPrecondition);
    ASSERT_TRUE(ConvertFp16({}, &m).ok());
    auto again = ConvertFp16({}, &m);
    EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(again.status().message(), HasSubstr("float16"));
    onnx::ModelProto empty;
    EXPECT_EQ(ConvertFp16({}, &empty).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

// The default model of `make models` (random weights) and a real third-party export.
void CheckRealModel(const fs::path& path, int64_t vocab, double relative_tolerance) {
  auto fp32 = LoadModel(path.string());
  ASSERT_TRUE(fp32.ok()) << fp32.status();
  onnx::ModelProto m = *fp32;
  auto report = QuantizeInt8({}, &m);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->converted_nodes.empty());
  const runtime::TokenBatch batch = RandomBatch(8, 48, vocab, 9);
  auto ref = Score(*fp32, batch);
  auto got = Score(m, batch);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_TRUE(got.ok()) << got.status();
  const Diff d = Compare(*ref, *got);
  EXPECT_LE(d.max_abs, relative_tolerance * d.max_ref) << "max |fp32 - int8| " << d.max_abs << " of " << d.max_ref;
}

TEST(QuantizeRealModelTest, DefaultMiniLmModel) {
  const fs::path p = tide::testing::SourceRoot() / "models" / "minilm-l6" / "1" / "model.onnx";
  if (!fs::exists(p)) GTEST_SKIP() << "models/minilm-l6/1/model.onnx absent (run `make models`)";
  CheckRealModel(p, 30522, 0.10);
}

TEST(QuantizeRealModelTest, SharedDistilBertExport) {
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
  EXPECT_NO_FATAL_FAILURE(
      CheckRealModel(tide::testing::SharedAssetPath(tide::testing::kTinyDistilBertModel), 30522, 0.10));
}

}  // namespace
}  // namespace tide::quantize
