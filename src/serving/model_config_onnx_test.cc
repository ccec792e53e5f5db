// Normalization against a real third-party ONNX export (DistilBERT: no token_type_ids, 2 labels).
#include <filesystem>
#include <fstream>
#include <random>

#include "config/model_config.h"
#include "config/model_repository.h"
#include "config/tide_parameters.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/ort_backend.h"
#include "runtime/shared_weights.h"
#include "serving/ort_options.h"
#include "shared_assets.h"

namespace tide::config {
namespace {

namespace fs = std::filesystem;

fs::path DistilBertModel() {
  return tide::testing::SharedAssetPath(tide::testing::kTinyDistilBertModel);
}

TEST(NormalizeOnnxTest, AutoCompletesDistilBertExport) {
  const fs::path model = DistilBertModel();
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
  auto sig = runtime::OrtBackend::ReadSignature(model.string());
  ASSERT_TRUE(sig.ok()) << sig.status();

  ModelConfig c;
  c.set_name("distilbert");
  ASSERT_TRUE(NormalizeModelConfig("config.pbtxt", *sig, &c).ok());
  ASSERT_EQ(c.input_size(), 2);  // no token_type_ids
  EXPECT_EQ(c.input(0).name(), "input_ids");
  EXPECT_EQ(c.input(1).name(), "attention_mask");
  EXPECT_EQ(c.input(0).data_type(), TYPE_INT64);
  ASSERT_EQ(c.output_size(), 1);
  EXPECT_EQ(c.output(0).name(), "logits");
  EXPECT_EQ(c.output(0).data_type(), TYPE_FP32);
  // Triton writes dims without the batch dim: the model's [batch, 2] is [-1, 2] in full.
  EXPECT_THAT(c.output(0).dims(), ::testing::ElementsAre(2));
  EXPECT_GT(c.max_batch_size(), 0);
  EXPECT_TRUE(ValidateModelConfig("config.pbtxt", c, &*sig).ok()) << ValidateModelConfig("config.pbtxt", c, &*sig);

  // A config that claims token_type_ids is caught against the model.
  ModelInput* extra = c.add_input();
  extra->set_name("token_type_ids");
  extra->set_data_type(TYPE_INT64);
  extra->add_dims(-1);
  absl::Status s = ValidateModelConfig("config.pbtxt", c, &*sig);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("input[2].name"));
}

TEST(NormalizeOnnxTest, RepositoryWithoutConfigLoadsTheRealModel) {
  const fs::path model = DistilBertModel();
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
  std::random_device rd;
  fs::path root = fs::temp_directory_path() / ("tide_repo_onnx_" + std::to_string(rd()));
  fs::create_directories(root / "distilbert" / "1");
  fs::copy_file(model, root / "distilbert" / "1" / "model.onnx");
  RepositoryOptions o;
  o.read_signature = [](const fs::path& p) { return runtime::OrtBackend::ReadSignature(p.string()); };
  auto models = ScanModelRepository(root, o);
  fs::remove_all(root);
  ASSERT_TRUE(models.ok()) << models.status();
  ASSERT_EQ(models->size(), 1u);
  EXPECT_TRUE((*models)[0].config_generated);
  EXPECT_EQ((*models)[0].config.name(), "distilbert");
  EXPECT_EQ((*models)[0].config.input_size(), 2);
  EXPECT_THAT((*models)[0].config.output(0).dims(), ::testing::ElementsAre(2));
}

TEST(NormalizeOnnxTest, ParametersBecomeSessionOptions) {
  const fs::path model = DistilBertModel();
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
  auto c = ParseModelConfig(R"pb(
    name: "distilbert"
    backend: "onnxruntime"
    parameters { key: "task" value { string_value: "classify" } }
    parameters { key: "score_activation" value { string_value: "softmax" } }
    parameters { key: "graph_optimization_level" value { string_value: "basic" } }
    parameters { key: "intra_op_thread_count" value { string_value: "1" } }
    parameters { key: "enable_cpu_mem_arena" value { string_value: "false" } }
  )pb", "config.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status();
  auto params = TideParameters::FromConfig(*c, "config.pbtxt");
  ASSERT_TRUE(params.ok()) << params.status();
  runtime::OrtOptions o = serving::MakeOrtOptions(*params, model);
  EXPECT_EQ(o.model_path, model.string());
  EXPECT_EQ(o.intra_op_threads, 1);
  EXPECT_EQ(o.inter_op_threads, 0);
  EXPECT_FALSE(o.allow_spinning);
  EXPECT_FALSE(o.enable_cpu_mem_arena);
  EXPECT_NE(o.shared_weights, nullptr);  // share_weights defaults to true
  EXPECT_EQ(o.graph_optimization_level, runtime::GraphOptimization::kBasic);
  auto backend = runtime::OrtBackend::Create(o);
  ASSERT_TRUE(backend.ok()) << backend.status();
  runtime::TokenBatch b;
  b.Resize(1, 4, false);
  b.input_ids = {101, 7592, 2088, 102};
  b.attention_mask = {1, 1, 1, 1};
  runtime::Logits out;
  ASSERT_TRUE((*backend)->Run(b, &out).ok());
  EXPECT_EQ(out.num_labels, 2);
}

// weights_file (default true): the shared weights go to a file in the temp directory; "false": memory.
TEST(NormalizeOnnxTest, WeightsFileParameterChoosesWhereTheSharedWeightsLive) {
  const fs::path model = DistilBertModel();
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
  if (!runtime::SharedWeights::Available()) GTEST_SKIP() << "built without libonnx-dev";
  for (const char* value : {"", "false"}) {
    std::string text = R"pb(name: "distilbert" backend: "onnxruntime")pb";
    if (*value != '\0') {
      text += std::string(R"pb( parameters { key: "weights_file" value { string_value: ")pb") + value + "\" } }";
    }
    auto c = ParseModelConfig(text, "config.pbtxt");
    ASSERT_TRUE(c.ok()) << c.status();
    auto params = TideParameters::FromConfig(*c, "config.pbtxt");
    ASSERT_TRUE(params.ok()) << params.status();
    runtime::OrtOptions o = serving::MakeOrtOptions(*params, model);
    ASSERT_NE(o.shared_weights, nullptr);
    auto backend = runtime::OrtBackend::Create(o);
    ASSERT_TRUE(backend.ok()) << backend.status();
    const runtime::SharedModelWeights* w = (*backend)->shared_weights();
    ASSERT_NE(w, nullptr);
    if (*value != '\0') {
      EXPECT_EQ(w->file, nullptr);
      EXPECT_EQ(w->file_error, "");  // not refused: not asked for
    } else if (w->file == nullptr) {
      EXPECT_NE(w->file_error, "") << "no file must say why";  // e.g. a tmpfs TMPDIR
    } else {
      EXPECT_EQ(w->file->dir(), fs::temp_directory_path().string());
    }
  }
}

}  // namespace
}  // namespace tide::config
