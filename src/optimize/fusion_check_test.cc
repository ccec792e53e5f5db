// Fused vs unfused logits through tide's ONNX Runtime backend on real exports: the repository's
// MiniLM-L6 (zero biases, shared initializers), tools/export_model.py's tiny-bert and tiny-xlmr
// (XLM-RoBERTa: position ids from a cumsum of input_ids != pad, no token_type_ids input; real
// biases), both in FP32 and after `tide quantize --int8`, on padded batches of mixed lengths; plus the
// load-time check (PrepareFusedModel) accepting them and a model where nothing matches.
#include "optimize/fusion_check.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx_graph/graph_util.h"
#include "onnx_graph/model_io.h"
#include "quantize/int8_quantizer.h"
#include "runtime/padded_attention.h"
#include "runtime/prompt_prefix.h"
#include "shared_assets.h"

namespace tide::optimize {
namespace {

using tide::testing::SourceRoot;

// Mixed lengths (full, ~half, 2 tokens, 1 token) in one padded batch; token ids above pad_id.
runtime::TokenBatch PaddedBatch(const ModelSignature& sig, int64_t seq, int64_t vocab, int64_t pad_id = 0) {
  runtime::TokenBatch b;
  const int64_t lengths[] = {seq, seq / 2 + 1, 2, 1};
  b.Resize(4, seq, !sig.token_type_ids_name.empty());
  std::mt19937 rng(5);
  std::uniform_int_distribution<int64_t> id(pad_id + 1, vocab - 1);
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t t = 0; t < seq; ++t) {
      const bool valid = t < lengths[r];
      b.input_ids[r * seq + t] = valid ? id(rng) : pad_id;
      b.attention_mask[r * seq + t] = valid;
      if (!b.token_type_ids.empty()) b.token_type_ids[r * seq + t] = valid && t >= lengths[r] / 2;
    }
  }
  return b;
}

// The largest |a[i] - b[i]| (sizes checked by the caller).
double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
  return worst;
}

// Fuses `model` with `options`, checks what was fused, and compares logits with the unfused
// model: the largest absolute difference must stay below `limit`.
void ExpectSameLogits(onnx::ModelProto model, const FusionOptions& options, int layers,
                      const runtime::TokenBatch& batch, double limit) {
  runtime::OrtOptions original;
  original.intra_op_threads = 1;
  ASSERT_TRUE(model.SerializeToString(&original.model_data));
  auto report = FuseTransformer(options, &model);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->attention_fused, options.attention ? layers : 0) << report->Summary();
  EXPECT_EQ(report->skip_layer_norm_fused, options.skip_layer_norm ? 2 * layers : 0) << report->Summary();
  EXPECT_EQ(report->tide_attention, options.attention && options.tide_attention ? layers : 0) << report->Summary();
  if (options.tide_elementwise) {
    EXPECT_EQ(report->tide_bias_gelu, layers) << report->Summary();
    EXPECT_EQ(report->tide_layer_norm, 2 * layers + 1) << report->Summary();  // + the embeddings'
  }
  runtime::OrtOptions fused = original;
  ASSERT_TRUE(model.SerializeToString(&fused.model_data));
  auto a = RunOnce(original, batch);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = RunOnce(fused, batch);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->values.size(), b->values.size());
  EXPECT_LT(MaxAbsDiff(a->values, b->values), limit) << report->Summary();
}

FusionOptions AttentionOnly() {
  FusionOptions o;
  o.skip_layer_norm = false;
  return o;
}

// Attention on ai.tide.PaddedAttention (tide_attention.h), the load's default.
FusionOptions TideKernel() {
  FusionOptions o;
  o.tide_attention = true;
  return o;
}

// Every tide kernel (attention, bias + GELU, layer norms): the load's default with AVX-512.
FusionOptions TideKernels() {
  FusionOptions o;
  o.tide_attention = true;
  o.tide_elementwise = true;
  return o;
}

// What the load gives an INT8 model on an AVX512_BF16 CPU (attention_precision auto).
FusionOptions TideKernelsBf16() {
  FusionOptions o = TideKernels();
  o.tide_attention_bf16 = true;
  return o;
}

onnx::ModelProto Int8(onnx::ModelProto m,
                      quantize::Int8OpFormat format = quantize::Int8OpFormat::kDynamicQuantizeMatMul) {
  quantize::Int8Options o;
  o.op_format = format;
  auto r = quantize::QuantizeInt8(o, &m);
  EXPECT_TRUE(r.ok()) << r.status();
  return m;
}

TEST(FusionCheckTest, MiniLmFp32AndInt8) {
  const std::filesystem::path path = SourceRoot() / "models/minilm-l6/1/model.onnx";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  auto model = onnx_graph::LoadModel(path.string());
  ASSERT_TRUE(model.ok()) << model.status();
  auto sig = runtime::OrtBackend::ReadSignature(path.string());
  ASSERT_TRUE(sig.ok());
  const runtime::TokenBatch batch = PaddedBatch(*sig, 40, 30000);
  ExpectSameLogits(*model, {}, 6, batch, 1e-4);
  ExpectSameLogits(*model, TideKernel(), 6, batch, 1e-4);
  ExpectSameLogits(*model, TideKernels(), 6, batch, 1e-4);
  const onnx::ModelProto int8 = Int8(*model);
  // Other float rounding before each re-quantized activation: a few uint8 codes flip (as for the
  // mask column below).
  ExpectSameLogits(int8, TideKernels(), 6, batch, 0.2);
  // BF16 products in attention (2^-9 per rounding) stay inside what the INT8 re-quantization
  // already moves; on a CPU without AVX512_BF16 the kernel runs FP32 and this repeats the line above.
  ExpectSameLogits(int8, TideKernelsBf16(), 6, batch, 0.2);
  {
    onnx::ModelProto fused = int8;
    auto report = FuseTransformer(TideKernelsBf16(), &fused);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_THAT(report->Summary(), ::testing::HasSubstr("6 attention (tide kernel, BF16 products)"));
    int marked = 0;
    for (const auto& n : fused.graph().node()) {
      for (const auto& a : n.attribute()) marked += n.op_type() == "PaddedAttention" && a.name() == "precision" && a.s() == "bf16";
    }
    EXPECT_EQ(marked, 6);
  }
  // MultiHeadAttention with its key_padding_mask reproduces the INT8 model's attention to the last
  // bit here.
  FusionOptions mask_input = AttentionOnly();
  mask_input.padding_mask_in_keys = false;
  ExpectSameLogits(int8, mask_input, 6, batch, 1e-4);
  // With the mask as a key column (padding_mask_in_keys.h) ONNX Runtime's flash path sums the
  // softmax in another order (~1e-7 relative); the next layer's activation quantization amplifies
  // that like the SkipLayerNormalization rounding below.
  ExpectSameLogits(int8, AttentionOnly(), 6, batch, 0.2);
  // SkipLayerNormalization rounds differently from Add + LayerNormalization (~1e-7 relative), and
  // this random-weight model amplifies that through the next layer's dynamic activation
  // quantization: scaling its LayerNorm gammas by 1 +- 1e-7 alone moves the INT8 logits (|l| ~ 11)
  // by 0.07. The load-time check's INT8 tolerance (2e-2 x logit scale) is what must hold.
  ExpectSameLogits(int8, {}, 6, batch, 0.2);
  ExpectSameLogits(int8, TideKernel(), 6, batch, 0.2);
}

// Gives every 1-D float parameter (biases, LayerNorm gamma/beta) its own random values. The
// exporters' presets initialise biases to zero and share one zero tensor between layers through
// Identity nodes; folding biases into MultiHeadAttention / SkipLayerNormalization is only tested
// by distinct, non-zero ones.
void RandomizeVectors(onnx::ModelProto* m) {
  onnx::GraphProto* g = m->mutable_graph();
  std::map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : g->initializer()) inits[t.name()] = &t;
  std::vector<onnx::TensorProto> unshared;
  for (auto& n : *g->mutable_node()) {
    if (n.op_type() != "Identity" || !inits.count(n.input(0))) continue;
    onnx::TensorProto t = *inits[n.input(0)];
    t.set_name(n.output(0));
    unshared.push_back(t);
    n.set_output(0, n.output(0) + "_unused");
  }
  for (auto& t : unshared) *g->add_initializer() = std::move(t);
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 0.3f);
  for (auto& t : *g->mutable_initializer()) {
    if (t.data_type() != onnx::TensorProto::FLOAT || t.dims_size() != 1) continue;
    const bool gamma = t.name().find("LayerNorm.weight") != std::string::npos;
    std::vector<float> v(static_cast<size_t>(t.dims(0)));
    for (float& x : v) x = (gamma ? 1.0f : 0.0f) + dist(rng);
    t.clear_float_data();
    t.set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
  }
}

// tools/export_model.py's `preset`, exported once into the build folder; "" where the exporter's
// python3-torch is unavailable (the caller skips).
std::string ExportedPreset(const std::string& preset) {
  const char* bin = std::getenv("TIDE_BINARY_DIR");
  const std::filesystem::path binary_dir = bin != nullptr ? bin : TIDE_BUILD_DIR;
  const std::filesystem::path repo = binary_dir / "optimize_models";
  const std::filesystem::path path = repo / preset / "1/model.onnx";
  if (!std::filesystem::exists(path)) {
    // Tests run as parallel processes (ctest -j): each exports into its own folder and renames the
    // finished entry into place; a process that loses the race uses the winner's.
    const std::filesystem::path staging = repo / ("staging-" + std::to_string(::getpid()));
    const std::string cmd = "/usr/bin/python3 '" + (SourceRoot() / "tools/export_model.py").string() +
                            "' --preset " + preset + " --repository '" + staging.string() + "' --name " + preset +
                            " --tide-binary '" + (binary_dir / "tide").string() + "' --quiet > /dev/null 2>&1";
    const bool exported = std::system(cmd.c_str()) == 0 && std::filesystem::exists(staging / preset / "1/model.onnx");
    std::error_code ec;
    if (exported) std::filesystem::rename(staging / preset, repo / preset, ec);
    std::filesystem::remove_all(staging, ec);
    if (!std::filesystem::exists(path)) return "";
  }
  return path.string();
}

// tiny-bert (2 layers, hidden 64) with distinct random biases; FP32 and both INT8 layouts of tide
// quantize.
TEST(FusionCheckTest, TinyBertWithBiasesFp32AndInt8) {
  const std::string path = ExportedPreset("tiny-bert");
  if (path.empty()) GTEST_SKIP() << "could not export tiny-bert with tools/export_model.py";
  auto model = onnx_graph::LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status();
  RandomizeVectors(&*model);
  auto sig = runtime::OrtBackend::ReadSignature(path);
  ASSERT_TRUE(sig.ok());
  const runtime::TokenBatch batch = PaddedBatch(*sig, 40, 100);
  ExpectSameLogits(*model, {}, 2, batch, 1e-4);
  ExpectSameLogits(*model, TideKernel(), 2, batch, 1e-4);
  ExpectSameLogits(Int8(*model), {}, 2, batch, 1e-4);
  ExpectSameLogits(Int8(*model), TideKernel(), 2, batch, 1e-4);
  // --format onnx: DynamicQuantizeLinear + MatMulInteger + Cast + Mul projections.
  ExpectSameLogits(Int8(*model, quantize::Int8OpFormat::kMatMulInteger), {}, 2, batch, 1e-4);
}

// tiny-xlmr, the bge-reranker family's layout (XLM-RoBERTa: no token_type_ids input, position ids
// cumsum(input_ids != 1) * mask + 1, pad id 1, RobertaClassificationHead): every layer's attention
// and both residual LayerNorms fuse, FP32 and INT8, with the same logits.
TEST(FusionCheckTest, TinyXlmrWithBiasesFp32AndInt8) {
  const std::string path = ExportedPreset("tiny-xlmr");
  if (path.empty()) GTEST_SKIP() << "could not export tiny-xlmr with tools/export_model.py";
  auto model = onnx_graph::LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status();
  RandomizeVectors(&*model);
  auto sig = runtime::OrtBackend::ReadSignature(path);
  ASSERT_TRUE(sig.ok());
  ASSERT_TRUE(sig->token_type_ids_name.empty()) << "an XLM-R export takes no token_type_ids";
  const runtime::TokenBatch batch = PaddedBatch(*sig, 40, 100, /*pad_id=*/1);
  ExpectSameLogits(*model, {}, 2, batch, 1e-4);
  ExpectSameLogits(*model, TideKernel(), 2, batch, 1e-4);
  ExpectSameLogits(Int8(*model), {}, 2, batch, 1e-4);
  ExpectSameLogits(Int8(*model, quantize::Int8OpFormat::kMatMulInteger), {}, 2, batch, 1e-4);
}

// The load-time check on the XLM-R export: fused, and within its tolerance on the probe batch.
// Every tide kernel and the last layer on the pooled token (pooled_token.h): the load's default.
FusionOptions TideKernelsPruned() {
  FusionOptions o = TideKernels();
  o.prune_last_layer = true;
  return o;
}

// Logits of `model` fused with `a` and with `b`: their largest absolute difference.
double FusedDifference(const onnx::ModelProto& model, const FusionOptions& a, const FusionOptions& b,
                       const runtime::TokenBatch& batch) {
  std::vector<float> logits[2];
  for (int i = 0; i < 2; ++i) {
    onnx::ModelProto m = model;
    auto report = FuseTransformer(i == 0 ? a : b, &m);
    EXPECT_TRUE(report.ok()) << report.status();
    runtime::OrtOptions o;
    o.intra_op_threads = 1;
    EXPECT_TRUE(m.SerializeToString(&o.model_data));
    auto run = RunOnce(o, batch);
    EXPECT_TRUE(run.ok()) << run.status();
    if (run.ok()) logits[i] = run->values;
  }
  EXPECT_EQ(logits[0].size(), logits[1].size());
  return MaxAbsDiff(logits[0], logits[1]);
}

// The last layer on the pooled token: the previous layer's first position (one Gather of [0] on
// axis 1) feeds the query projection and the residual; the attention's keys and values read that
// layer whole; the 8 nodes after (query MatMul, attention, output MatMul, skip-layernorm, two
// feed-forward MatMuls, bias-GELU, skip-layernorm) run on [batch, 1, hidden]. Position 0's logits are those of the whole layer, on
// MiniLM-L6 (shared zero biases), tiny-bert and tiny-xlmr (random biases), FP32 and INT8.
TEST(FusionCheckTest, LastLayerOnThePooledTokenScoresAsTheWholeLayer) {
  const std::filesystem::path minilm = SourceRoot() / "models/minilm-l6/1/model.onnx";
  if (!std::filesystem::exists(minilm)) GTEST_SKIP() << minilm << " is absent";
  auto model = onnx_graph::LoadModel(minilm.string());
  ASSERT_TRUE(model.ok()) << model.status();
  auto sig = runtime::OrtBackend::ReadSignature(minilm.string());
  ASSERT_TRUE(sig.ok());
  const runtime::TokenBatch batch = PaddedBatch(*sig, 40, 30000);
  {
    onnx::ModelProto m = *model;
    auto report = FuseTransformer(TideKernelsPruned(), &m);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->pruned_last_layer, 8) << report->Summary();
    EXPECT_THAT(report->Summary(), ::testing::HasSubstr(
                                       "6 bias-gelu + 13 layernorm on tide kernels, last layer on the pooled token (8 nodes); "));
    int slices = 0;
    std::string sliced;
    for (const auto& n : m.graph().node()) {
      if (n.op_type() == "Gather" && n.input(1) == "tide_pooled_token_position") ++slices, sliced = n.output(0);
    }
    EXPECT_EQ(slices, 1);
    int readers = 0;
    for (const auto& n : m.graph().node()) {
      for (const auto& in : n.input()) readers += in == sliced;
    }
    EXPECT_EQ(readers, 2) << "the query projection and the residual";
  }
  ExpectSameLogits(*model, TideKernelsPruned(), 6, batch, 1e-4);
  EXPECT_LT(FusedDifference(*model, TideKernels(), TideKernelsPruned(), batch), 2e-5);
  const onnx::ModelProto int8 = Int8(*model);
  ExpectSameLogits(int8, TideKernelsPruned(), 6, batch, 0.2);
  ExpectSameLogits(int8, TideKernelsBf16(), 6, batch, 0.2);
  for (const char* preset : {"tiny-bert", "tiny-xlmr"}) {
    const std::string path = ExportedPreset(preset);
    if (path.empty()) GTEST_SKIP() << "could not export " << preset << " with tools/export_model.py";
    auto tiny = onnx_graph::LoadModel(path);
    ASSERT_TRUE(tiny.ok()) << tiny.status();
    RandomizeVectors(&*tiny);
    auto tiny_sig = runtime::OrtBackend::ReadSignature(path);
    ASSERT_TRUE(tiny_sig.ok());
    const runtime::TokenBatch tiny_batch = PaddedBatch(*tiny_sig, 40, 100, std::string(preset) == "tiny-xlmr" ? 1 : 0);
    ExpectSameLogits(*tiny, TideKernelsPruned(), 2, tiny_batch, 1e-4);
    EXPECT_LT(FusedDifference(*tiny, TideKernels(), TideKernelsPruned(), tiny_batch), 2e-5) << preset;
  }
}

// tools/export_model.py's qwen3-tiny (2 layers, the real Qwen3 vocabulary, its tokenizer from
// ../shared), exported once into the build folder; "" where the tokenizer or python3-torch is absent.
std::string ExportedQwen3Tiny() {
  const std::optional<std::filesystem::path> tokenizer = testing::SharedAsset("tokenizers/qwen3/tokenizer.json");
  if (!tokenizer.has_value()) return "";
  const char* bin = std::getenv("TIDE_BINARY_DIR");
  const std::filesystem::path binary_dir = bin != nullptr ? bin : TIDE_BUILD_DIR;
  const std::filesystem::path repo = binary_dir / "optimize_models";
  const std::filesystem::path path = repo / "qwen3-tiny/1/model.onnx";
  if (!std::filesystem::exists(path)) {
    const std::filesystem::path staging = repo / ("staging-" + std::to_string(::getpid()));
    const std::string cmd = "/usr/bin/python3 '" + (SourceRoot() / "tools/export_model.py").string() +
                            "' --preset qwen3-tiny --tokenizer '" + tokenizer->string() + "' --repository '" +
                            staging.string() + "' --name qwen3-tiny --tide-binary '" + (binary_dir / "tide").string() +
                            "' --quiet > /dev/null 2>&1";
    const bool exported = std::system(cmd.c_str()) == 0 && std::filesystem::exists(staging / "qwen3-tiny/1/model.onnx");
    std::error_code ec;
    if (exported) std::filesystem::rename(staging / "qwen3-tiny", repo / "qwen3-tiny", ec);
    std::filesystem::remove_all(staging, ec);
    if (!std::filesystem::exists(path)) return "";
  }
  return path.string();
}

// A decoder's shared prompt prefix (prompt_prefix.h): rows that start with the prefix's tokens,
// run as their tokens after it beside the prefix's keys and values, score what the whole rows
// score; with an empty prefix the graph is the original; a batch with a row that does not start
// with the prefix runs whole.
TEST(FusionCheckTest, SharedPromptPrefixScoresAsTheWholePrompt) {
  if (!runtime::PaddedAttentionCpuSupported()) GTEST_SKIP() << "tide's causal attention kernel needs AVX-512 here";
  const std::string path = ExportedQwen3Tiny();
  if (path.empty()) GTEST_SKIP() << "could not export qwen3-tiny (needs " << testing::MissingSharedAsset("tokenizers/qwen3/tokenizer.json")
                                 << " and python3-torch)";
  auto model = onnx_graph::LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status();
  runtime::OrtOptions original;
  original.intra_op_threads = 1;
  ASSERT_TRUE(model->SerializeToString(&original.model_data));
  FusionOptions options;
  options.tide_attention = true;
  options.prompt_prefix = true;
  auto report = FuseTransformer(options, &*model);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->tide_causal_attention, 2) << report->Summary();
  ASSERT_EQ(report->prompt_prefix_layers, 2) << report->Summary();
  EXPECT_THAT(report->Summary(), ::testing::HasSubstr("shared prompt prefix inputs (2 layers)"));
  runtime::OrtOptions fused = original;
  ASSERT_TRUE(model->SerializeToString(&fused.model_data));

  // Rows of 40, 23 and 11 tokens, the first 9 of each the same.
  constexpr int64_t kSeq = 40, kPrefix = 9;
  runtime::TokenBatch batch;
  batch.Resize(3, kSeq, false);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int64_t> id(100, 30000);
  std::vector<int64_t> prefix_ids(kPrefix);
  for (int64_t& t : prefix_ids) t = id(rng);
  const int64_t lengths[] = {40, 23, 11};
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t t = 0; t < lengths[r]; ++t) {
      batch.input_ids[r * kSeq + t] = t < kPrefix ? prefix_ids[t] : id(rng);
      batch.attention_mask[r * kSeq + t] = 1;
    }
  }
  auto run = [](const runtime::OrtOptions& o, const runtime::TokenBatch& b, int64_t* prefixed = nullptr) {
    auto backend = runtime::OrtBackend::Create(o);
    EXPECT_TRUE(backend.ok()) << backend.status();
    runtime::Logits out;
    if (!backend.ok()) return out;
    EXPECT_TRUE((*backend)->Run(b, &out).ok());
    if (prefixed != nullptr) *prefixed = (*backend)->prefixed_runs();
    return out;
  };
  const runtime::Logits want = run(original, batch);
  ASSERT_EQ(want.values.size(), 3u);
  EXPECT_NE(want.values[0], want.values[1]);
  EXPECT_NE(want.values[1], want.values[2]);
  int64_t prefixed = -1;
  const runtime::Logits empty_prefix = run(fused, batch, &prefixed);
  EXPECT_EQ(prefixed, 0);
  ASSERT_EQ(empty_prefix.values.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(empty_prefix.values[i], want.values[i], 1e-4) << "row " << i;

  auto backend = runtime::OrtBackend::Create(fused);
  ASSERT_TRUE(backend.ok()) << backend.status();
  ASSERT_EQ((*backend)->signature().prompt_prefix.size(), 4u);  // keys and values of 2 layers
  EXPECT_EQ((*backend)->signature().prompt_prefix[0].input, "tide_prefix_key.0");
  EXPECT_EQ((*backend)->signature().prompt_prefix[0].output, "tide_present_key.0");
  auto computed = (*backend)->ComputePromptPrefix(prefix_ids);
  ASSERT_TRUE(computed.ok()) << computed.status();
  EXPECT_EQ((*computed)->values.size(), 4u);
  runtime::OrtOptions with_prefix = fused;
  with_prefix.prompt_prefix = *computed;
  const runtime::Logits got = run(with_prefix, batch, &prefixed);
  EXPECT_EQ(prefixed, 1) << "the batch ran after the prefix";
  ASSERT_EQ(got.values.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(got.values[i], empty_prefix.values[i], 1e-5) << "row " << i;

  // One row that differs in the prefix: the batch runs whole, with the same scores.
  runtime::TokenBatch other = batch;
  other.input_ids[2 * kSeq + 3] += 1;
  const runtime::Logits whole = run(fused, other);
  const runtime::Logits mixed = run(with_prefix, other, &prefixed);
  EXPECT_EQ(prefixed, 0);
  EXPECT_EQ(mixed.values, whole.values);
  EXPECT_EQ(mixed.prompt_prefix_tokens, 0);

  // With a shorter prefix chained (the first 3 tokens, which every row still starts with), the
  // same batch runs after that one.
  auto shorter = (*backend)->ComputePromptPrefix(std::vector<int64_t>(prefix_ids.begin(), prefix_ids.begin() + 3));
  ASSERT_TRUE(shorter.ok()) << shorter.status();
  auto chained = std::make_shared<runtime::PromptPrefix>(**computed);
  chained->shorter = *shorter;
  runtime::OrtOptions with_chain = fused;
  with_chain.prompt_prefix = chained;
  const runtime::Logits after_shorter = run(with_chain, other, &prefixed);
  EXPECT_EQ(prefixed, 1);
  EXPECT_EQ(after_shorter.prompt_prefix_tokens, 3);
  ASSERT_EQ(after_shorter.values.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(after_shorter.values[i], whole.values[i], 1e-5) << "row " << i;
  EXPECT_EQ(run(with_chain, batch).prompt_prefix_tokens, kPrefix) << "the longer prefix first";

  // A prefix computed for another model is refused when an instance opens.
  auto small = std::make_shared<runtime::PromptPrefix>(**computed);
  small->values.pop_back();
  runtime::OrtOptions wrong = fused;
  wrong.prompt_prefix = small;
  EXPECT_THAT(runtime::OrtBackend::Create(wrong).status().message(),
              ::testing::HasSubstr("the prompt prefix was not computed for this model"));
}

// A head that reads another position, or a graph that also answers the last hidden state, keeps
// the last layer whole and says why.
TEST(FusionCheckTest, LastLayerStaysWholeWhenOtherPositionsAreRead) {
  const std::filesystem::path minilm = SourceRoot() / "models/minilm-l6/1/model.onnx";
  if (!std::filesystem::exists(minilm)) GTEST_SKIP() << minilm << " is absent";
  auto model = onnx_graph::LoadModel(minilm.string());
  ASSERT_TRUE(model.ok()) << model.status();
  auto said = [](const FusionReport& r, const std::string& why) {
    for (const auto& s : r.skipped) {
      if (s.find(why) != std::string::npos) return true;
    }
    return false;
  };
  // The pooler's Gather reads position 1.
  onnx::ModelProto second = *model;
  for (auto& n : *second.mutable_graph()->mutable_node()) {
    if (n.op_type() != "Gather" || n.output(0).find("pooler") == std::string::npos) continue;
    *second.mutable_graph()->add_initializer() = onnx::TensorProto();
    onnx::TensorProto& one = *second.mutable_graph()->mutable_initializer(second.graph().initializer_size() - 1);
    one.set_name("position_one");
    one.set_data_type(onnx::TensorProto::INT64);
    one.add_int64_data(1);
    n.set_input(1, "position_one");
  }
  auto r1 = FuseTransformer(TideKernelsPruned(), &second);
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_EQ(r1->pruned_last_layer, 0) << r1->Summary();
  EXPECT_TRUE(said(*r1, "pooled token: the last layer stays whole: no Gather(hidden, 0, axis 1)")) << ::testing::PrintToString(r1->skipped);
  // The last hidden state is a graph output too.
  onnx::ModelProto hidden = *model;
  std::string last;
  for (const auto& n : hidden.graph().node()) {
    if (n.op_type() == "Gather" && n.output(0).find("pooler") != std::string::npos) last = n.input(0);
  }
  ASSERT_FALSE(last.empty());
  hidden.mutable_graph()->add_output()->set_name(last);
  hidden.mutable_graph()->mutable_output(1)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  auto r2 = FuseTransformer(TideKernelsPruned(), &hidden);
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(r2->pruned_last_layer, 0) << r2->Summary();
  EXPECT_TRUE(said(*r2, "no ai.tide.PaddedAttention feeds the first-position Gather"));
}

TEST(FusionCheckTest, PrepareFusedModelAcceptsTinyXlmr) {
  const std::string path = ExportedPreset("tiny-xlmr");
  if (path.empty()) GTEST_SKIP() << "could not export tiny-xlmr with tools/export_model.py";
  auto sig = runtime::OrtBackend::ReadSignature(path);
  ASSERT_TRUE(sig.ok());
  runtime::OrtOptions o;
  o.model_path = path;
  o.intra_op_threads = 1;
  FusedModel f = PrepareFusedModel(o, ProbeBatch(*sig, 2048, 128));
  EXPECT_TRUE(f.fused) << f.reason;
  EXPECT_EQ(f.report.attention_fused, 2) << f.report.Summary();
  EXPECT_EQ(f.report.skip_layer_norm_fused, 4) << f.report.Summary();
  EXPECT_LE(f.max_abs_diff, f.tolerance);
  // With tide's attention kernel (the load's default where the CPU has AVX-512).
  FusedModel t = PrepareFusedModel(o, ProbeBatch(*sig, 2048, 128), "", TideKernel());
  EXPECT_TRUE(t.fused) << t.reason;
  EXPECT_EQ(t.report.tide_attention, 2) << t.report.Summary();
  EXPECT_EQ(t.report.Summary().find("2 attention (tide kernel), 4 skip-layernorm"), 0u) << t.report.Summary();
  EXPECT_LE(t.max_abs_diff, t.tolerance);
  // And every tide kernel.
  FusedModel k = PrepareFusedModel(o, ProbeBatch(*sig, 2048, 128), "", TideKernels());
  EXPECT_TRUE(k.fused) << k.reason;
  EXPECT_EQ(k.report.Summary().find("2 attention (tide kernel), 4 skip-layernorm, 2 bias-gelu + 5 layernorm on tide kernels"), 0u)
      << k.report.Summary();
  EXPECT_LE(k.max_abs_diff, k.tolerance);
}

TEST(FusionCheckTest, PrepareFusedModelAcceptsMiniLm) {
  const std::filesystem::path path = SourceRoot() / "models/minilm-l6/1/model.onnx";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  auto sig = runtime::OrtBackend::ReadSignature(path.string());
  ASSERT_TRUE(sig.ok());
  runtime::OrtOptions o;
  o.model_path = path.string();
  o.intra_op_threads = 1;
  FusedModel f = PrepareFusedModel(o, ProbeBatch(*sig, 30522, 512));
  EXPECT_TRUE(f.fused) << f.reason;
  EXPECT_EQ(f.report.attention_fused, 6);
  EXPECT_LE(f.max_abs_diff, f.tolerance);
  EXPECT_FALSE(f.model_data.empty());
  EXPECT_EQ(f.file, nullptr);  // no spill directory: in memory

  // With a spill directory the fused model is serialized straight into an unnamed file there
  // (nothing in memory), which the probe read and which serves the same logits as the in-memory
  // copy.
  FusedModel spilled = PrepareFusedModel(o, ProbeBatch(*sig, 30522, 512), ::testing::TempDir());
  ASSERT_TRUE(spilled.fused) << spilled.reason;
  ASSERT_NE(spilled.file, nullptr) << spilled.spill_error;
  EXPECT_TRUE(spilled.model_data.empty());
  EXPECT_EQ(spilled.file->size(), f.model_data.size());
  EXPECT_EQ(spilled.max_abs_diff, f.max_abs_diff);
  runtime::OrtOptions from_file = o;
  from_file.model_path = spilled.file->path();
  runtime::OrtOptions from_memory = o;
  from_memory.model_path.clear();
  from_memory.model_data = f.model_data;
  const runtime::TokenBatch probe = ProbeBatch(*sig, 30522, 512);
  auto a = RunOnce(from_file, probe);
  auto b = RunOnce(from_memory, probe);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->values, b->values);

  // A spill directory that cannot take the file: in memory, with the reason.
  FusedModel kept = PrepareFusedModel(o, ProbeBatch(*sig, 30522, 512), "/no/such/dir");
  ASSERT_TRUE(kept.fused) << kept.reason;
  EXPECT_EQ(kept.file, nullptr);
  EXPECT_FALSE(kept.model_data.empty());
  EXPECT_NE(kept.spill_error.find("/no/such/dir"), std::string::npos) << kept.spill_error;
}

// With shared weights the fused model's weights move into one shared entry and only the graph's
// skeleton is written: a file of a few kilobytes that serves the same logits through that entry,
// and that no session without it can open (its tensors point at a placeholder).
TEST(FusionCheckTest, PrepareFusedModelWithSharedWeightsWritesASkeleton) {
  const std::filesystem::path path = SourceRoot() / "models/minilm-l6/1/model.onnx";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  if (!runtime::SharedWeights::Available()) GTEST_SKIP() << "built without libonnx-dev: no shared weights";
  auto sig = runtime::OrtBackend::ReadSignature(path.string());
  ASSERT_TRUE(sig.ok());
  const runtime::TokenBatch probe = ProbeBatch(*sig, 30522, 512);
  runtime::OrtOptions o;
  o.model_path = path.string();
  o.intra_op_threads = 1;
  FusedModel whole = PrepareFusedModel(o, probe, ::testing::TempDir());
  ASSERT_TRUE(whole.fused) << whole.reason;
  ASSERT_NE(whole.file, nullptr);
  EXPECT_EQ(whole.weights, nullptr);

  o.shared_weights = std::make_shared<runtime::SharedWeights>();
  FusedModel skeleton = PrepareFusedModel(o, probe, ::testing::TempDir());
  ASSERT_TRUE(skeleton.fused) << skeleton.reason;
  EXPECT_EQ(skeleton.file, nullptr);  // a skeleton stays in memory: it is a few kilobytes
  ASSERT_NE(skeleton.weights, nullptr);
  EXPECT_EQ(skeleton.max_abs_diff, whole.max_abs_diff);
  EXPECT_GT(skeleton.weights->bytes, whole.file->size() * 9 / 10);
  EXPECT_LT(skeleton.model_data.size(), whole.file->size() / 50) << "the weights stayed in the model";

  runtime::OrtOptions served = o;  // as an instance opens it: the skeleton, with the shared entry
  served.model_path.clear();
  served.model_data = skeleton.model_data;
  runtime::OrtOptions reference = o;
  reference.shared_weights = nullptr;
  reference.model_path = whole.file->path();
  auto a = RunOnce(served, probe);
  auto b = RunOnce(reference, probe);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->values, b->values);

  runtime::OrtOptions without = served;  // the skeleton alone has no weights to run
  without.shared_weights = nullptr;
  EXPECT_FALSE(RunOnce(without, probe).ok());

  // Once the caller lets the entry go (a rejected or unloaded version), it is gone for good.
  std::weak_ptr<runtime::SharedModelWeights> entry = skeleton.weights;
  skeleton.weights.reset();
  EXPECT_TRUE(entry.expired());
}

TEST(FusionCheckTest, PrepareFusedModelKeepsUnmatchedModel) {
  // The third-party DistilBERT export masks with Where(mask == 0, -inf, scores): not matched.
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
  const std::filesystem::path path = tide::testing::SharedAssetPath(tide::testing::kTinyDistilBertModel);
  auto sig = runtime::OrtBackend::ReadSignature(path.string());
  ASSERT_TRUE(sig.ok());
  runtime::OrtOptions o;
  o.model_path = path.string();
  o.intra_op_threads = 1;
  FusedModel f = PrepareFusedModel(o, ProbeBatch(*sig, 1000, 512));
  if (f.fused) {
    // If the export does match, the check must still have passed.
    EXPECT_LE(f.max_abs_diff, f.tolerance);
  } else {
    EXPECT_FALSE(f.reason.empty());
    EXPECT_TRUE(f.model_data.empty());
  }
}

TEST(FusionCheckTest, ProbeBatchIsPaddedAndInRange) {
  ModelSignature sig;
  sig.token_type_ids_name = "token_type_ids";
  runtime::TokenBatch b = ProbeBatch(sig, 50, 512);
  ASSERT_EQ(b.batch, 3);
  ASSERT_EQ(b.seq_len, 24);
  int64_t valid[3] = {0, 0, 0};
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t t = 0; t < 24; ++t) {
      valid[r] += b.attention_mask[r * 24 + t];
      EXPECT_GE(b.input_ids[r * 24 + t], 0);
      EXPECT_LT(b.input_ids[r * 24 + t], 50);
    }
  }
  EXPECT_EQ(valid[0], 24);
  EXPECT_LT(valid[1], 24);
  EXPECT_EQ(valid[2], 3);
  EXPECT_EQ(b.token_type_ids.size(), 72u);
}

}  // namespace
}  // namespace tide::optimize
