#include "config/model_config.h"

#include <cstdlib>
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tide::config {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kFile[] = "models/reranker/config.pbtxt";

// A Triton config for an ONNX Runtime cross-encoder, written as a Triton user would.
constexpr char kTritonStyle[] = R"pb(
name: "reranker"
platform: "onnxruntime_onnx"
max_batch_size: 64
version_policy: { latest: { num_versions: 2 } }
input [
  {
    name: "input_ids"
    data_type: TYPE_INT64
    dims: [ -1 ]
  },
  {
    name: "attention_mask"
    data_type: TYPE_INT64
    dims: [ -1 ]
  },
  {
    name: "token_type_ids"
    data_type: TYPE_INT64
    dims: [ -1 ]
  }
]
output [
  {
    name: "logits"
    data_type: TYPE_FP32
    dims: [ 1 ]
  }
]
dynamic_batching {
  preferred_batch_size: [ 16, 32 ]
  max_queue_delay_microseconds: 2000
  priority_levels: 2
  default_priority_level: 2
  default_queue_policy {
    timeout_action: REJECT
    default_timeout_microseconds: 500000
    allow_timeout_override: true
    max_queue_size: 1024
  }
  priority_queue_policy {
    key: 1
    value: { timeout_action: DELAY max_queue_size: 128 }
  }
}
instance_group [
  {
    count: 2
    kind: KIND_CPU
  }
]
model_warmup [
  {
    name: "short pairs"
    batch_size: 8
    inputs {
      key: "input_ids"
      value: { data_type: TYPE_INT64 dims: [ 128 ] zero_data: true }
    }
    inputs {
      key: "attention_mask"
      value: { data_type: TYPE_INT64 dims: [ 128 ] random_data: true }
    }
    inputs {
      key: "token_type_ids"
      value: { data_type: TYPE_INT64 dims: [ 128 ] input_data_file: "types.bin" }
    }
  }
]
parameters { key: "task" value: { string_value: "rerank" } }
parameters { key: "max_sequence_length" value: { string_value: "384" } }
parameters { key: "intra_op_thread_count" value: { string_value: "2" } }
)pb";

ModelSignature BertSignature() {
  ModelSignature s;
  s.token_type_ids_name = "token_type_ids";
  s.num_labels = 1;
  return s;
}

TEST(ParseModelConfigTest, TritonStyleConfigParsesAllFields) {
  auto c = ParseModelConfig(kTritonStyle, kFile);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name(), "reranker");
  EXPECT_EQ(c->platform(), "onnxruntime_onnx");
  EXPECT_EQ(c->max_batch_size(), 64);
  EXPECT_EQ(c->version_policy().latest().num_versions(), 2u);
  ASSERT_EQ(c->input_size(), 3);
  EXPECT_EQ(c->input(2).name(), "token_type_ids");
  EXPECT_EQ(c->input(1).data_type(), TYPE_INT64);
  EXPECT_EQ(c->output(0).dims(0), 1);
  const auto& db = c->dynamic_batching();
  EXPECT_THAT(db.preferred_batch_size(), ::testing::ElementsAre(16, 32));
  EXPECT_EQ(db.max_queue_delay_microseconds(), 2000u);
  EXPECT_EQ(db.default_queue_policy().max_queue_size(), 1024u);
  EXPECT_TRUE(db.default_queue_policy().allow_timeout_override());
  EXPECT_EQ(db.default_queue_policy().default_timeout_microseconds(), 500000u);
  ASSERT_EQ(db.priority_queue_policy().count(1), 1u);
  EXPECT_EQ(db.priority_queue_policy().at(1).timeout_action(), ModelQueuePolicy::DELAY);
  EXPECT_EQ(c->instance_group(0).count(), 2);
  EXPECT_EQ(c->instance_group(0).kind(), ModelInstanceGroup::KIND_CPU);
  ASSERT_EQ(c->model_warmup_size(), 1);
  EXPECT_EQ(c->model_warmup(0).batch_size(), 8u);
  EXPECT_TRUE(c->model_warmup(0).inputs().at("attention_mask").random_data());
  EXPECT_EQ(c->model_warmup(0).inputs().at("token_type_ids").input_data_file(), "types.bin");
  EXPECT_EQ(c->parameters().at("max_sequence_length").string_value(), "384");

  ModelConfig normalized = *c;
  ASSERT_TRUE(NormalizeModelConfig(kFile, BertSignature(), &normalized).ok());
  ModelSignature sig = BertSignature();
  EXPECT_TRUE(ValidateModelConfig(kFile, normalized, &sig).ok()) << ValidateModelConfig(kFile, normalized, &sig);
}

TEST(ParseModelConfigTest, MinimalConfigNormalizesFromTheModel) {
  auto c = ParseModelConfig("name: \"m\"\nbackend: \"onnxruntime\"\n", kFile);
  ASSERT_TRUE(c.ok()) << c.status();
  ModelSignature sig;  // DistilBERT-like: no token_type_ids, 2 labels, int32 ids
  sig.num_labels = 2;
  sig.ids_are_int32 = true;
  ASSERT_TRUE(NormalizeModelConfig(kFile, sig, &*c).ok());
  EXPECT_EQ(c->platform(), "onnxruntime_onnx");
  EXPECT_EQ(c->max_batch_size(), NormalizeOptions{}.default_max_batch_size);
  ASSERT_EQ(c->input_size(), 2);
  EXPECT_EQ(c->input(0).name(), "input_ids");
  EXPECT_EQ(c->input(0).data_type(), TYPE_INT32);
  EXPECT_THAT(c->input(1).dims(), ::testing::ElementsAre(-1));
  ASSERT_EQ(c->output_size(), 1);
  EXPECT_EQ(c->output(0).name(), "logits");
  EXPECT_THAT(c->output(0).dims(), ::testing::ElementsAre(2));
  EXPECT_EQ(c->version_policy().latest().num_versions(), 1u);
  ASSERT_EQ(c->instance_group_size(), 1);
  EXPECT_EQ(c->instance_group(0).count(), 1);
  EXPECT_EQ(c->instance_group(0).kind(), ModelInstanceGroup::KIND_CPU);
  EXPECT_EQ(c->default_model_filename(), "model.onnx");
  EXPECT_TRUE(ValidateModelConfig(kFile, *c, &sig).ok()) << ValidateModelConfig(kFile, *c, &sig);
}

TEST(ParseModelConfigTest, UnknownFieldNamesFileLineAndField) {
  auto c = ParseModelConfig("name: \"m\"\nmax_batch_sise: 8\n", kFile);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(),
              AllOf(HasSubstr("models/reranker/config.pbtxt:2:"), HasSubstr("max_batch_sise"),
                    HasSubstr("unknown field")));
}

TEST(ParseModelConfigTest, UnknownNestedField) {
  auto c = ParseModelConfig("input [ { name: \"input_ids\" data_typ: TYPE_INT64 } ]", kFile);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), AllOf(HasSubstr(kFile), HasSubstr("data_typ")));
}

TEST(ParseModelConfigTest, WrongTypesNameTheField) {
  struct Case {
    const char* text;
    const char* field;
  } cases[] = {
      {"name: \"m\"\nmax_batch_size: \"eight\"\n", "max_batch_size"},
      {"max_batch_size: 8.5", "max_batch_size"},
      {"name: 12", "name"},
      {"input [ { name: \"x\" data_type: TYPE_INT65 } ]", "data_type"},
      {"instance_group [ { count: -1 kind: KIND_TPU } ]", "kind"},
      {"dynamic_batching { max_queue_delay_microseconds: -5 }", "max_queue_delay_microseconds"},
      {"version_policy { latest { num_versions: true } }", "num_versions"},
      {"name: \"a\"\nname: \"b\"", "name"},
  };
  for (const Case& c : cases) {
    auto parsed = ParseModelConfig(c.text, kFile);
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), AllOf(HasSubstr(kFile), HasSubstr(c.field))) << c.text;
  }
}

TEST(ParseModelConfigTest, UnsupportedTritonFeaturesAreRejectedClearly) {
  for (const char* text : {
           "sequence_batching { max_sequence_idle_microseconds: 1000 }",
           "ensemble_scheduling { step [ ] }",
           "optimization { execution_accelerators { cpu_execution_accelerator [ { name: \"openvino\" } ] } }",
           "instance_group [ { count: 1 rate_limiter { priority: 1 } } ]",
       }) {
    auto c = ParseModelConfig(text, kFile);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_THAT(c.status().message(), AllOf(HasSubstr(kFile), HasSubstr("unsupported"))) << c.status();
  }
}

TEST(ParseModelConfigTest, FuzzSeedConfigsBehaveAsExpected) {
  const char* src = std::getenv("TIDE_SOURCE_DIR");
  const std::filesystem::path dir = std::filesystem::path(src ? src : ".") / "fuzz/corpus/tide_config";
  auto full = ReadModelConfigFile(dir / "triton_reranker.pbtxt");
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->metric_tags().at("team"), "search");
  EXPECT_EQ(full->model_warmup(0).count(), 2u);
  ModelSignature sig = BertSignature();
  ASSERT_TRUE(NormalizeModelConfig("triton_reranker.pbtxt", sig, &*full).ok());
  EXPECT_TRUE(ValidateModelConfig("triton_reranker.pbtxt", *full, &sig).ok())
      << ValidateModelConfig("triton_reranker.pbtxt", *full, &sig);
  auto unsupported = ReadModelConfigFile(dir / "unsupported.pbtxt");
  ASSERT_FALSE(unsupported.ok());
  EXPECT_THAT(unsupported.status().message(), AllOf(HasSubstr("unsupported.pbtxt:2:"), HasSubstr("sequence_batching")));
  auto missing = ReadModelConfigFile(dir / "absent.pbtxt");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST(ParseModelConfigTest, RejectsOversizedText) {
  std::string huge(17 << 20, ' ');
  auto c = ParseModelConfig(huge, kFile);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), AllOf(HasSubstr(kFile), HasSubstr("at most")));
  EXPECT_TRUE(ParseModelConfig(std::string(1 << 20, ' '), kFile).ok());  // whitespace is a valid empty config
}

class ValidateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = ParseModelConfig(kTritonStyle, kFile);
    ASSERT_TRUE(c.ok()) << c.status();
    config_ = *c;
    ASSERT_TRUE(NormalizeModelConfig(kFile, sig_, &config_).ok());
    ASSERT_TRUE(ValidateModelConfig(kFile, config_, &sig_).ok());
  }
  void ExpectError(std::string_view field, std::string_view detail = "") {
    absl::Status s = ValidateModelConfig(kFile, config_, &sig_);
    ASSERT_FALSE(s.ok()) << "expected an error on " << field;
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), AllOf(HasSubstr(std::string(kFile) + ": " + std::string(field)),
                                   HasSubstr(std::string(detail))));
  }
  ModelSignature sig_ = BertSignature();
  ModelConfig config_;
};

TEST_F(ValidateTest, RejectsOtherPlatforms) {
  config_.set_platform("tensorrt_plan");
  EXPECT_NO_FATAL_FAILURE(ExpectError("platform", "tensorrt_plan"));
}

TEST_F(ValidateTest, RejectsFloatIds) {
  config_.mutable_input(1)->set_data_type(TYPE_FP32);
  EXPECT_NO_FATAL_FAILURE(ExpectError("input[1].data_type", "TYPE_FP32"));
}

TEST_F(ValidateTest, RejectsIdTypeThatDiffersFromTheModel) {
  for (auto& in : *config_.mutable_input()) in.set_data_type(TYPE_INT32);
  EXPECT_NO_FATAL_FAILURE(ExpectError("input[0].data_type", "the model declares TYPE_INT64"));
}

TEST_F(ValidateTest, RejectsInputTheModelLacks) {
  config_.mutable_input(2)->set_name("position_ids");
  EXPECT_NO_FATAL_FAILURE(ExpectError("input[2].name", "position_ids"));
}

TEST_F(ValidateTest, RejectsMissingModelInput) {
  config_.mutable_input()->RemoveLast();
  EXPECT_NO_FATAL_FAILURE(ExpectError("input", "token_type_ids"));
}

TEST_F(ValidateTest, RejectsWrongRankDims) {
  config_.mutable_input(0)->add_dims(4);
  EXPECT_NO_FATAL_FAILURE(ExpectError("input[0].dims", "[-1, 4]"));
}

TEST_F(ValidateTest, RejectsLabelCountMismatch) {
  config_.mutable_output(0)->set_dims(0, 3);
  EXPECT_NO_FATAL_FAILURE(ExpectError("output[0].dims", "1 labels"));
}

TEST_F(ValidateTest, RejectsGpuInstances) {
  config_.mutable_instance_group(0)->set_kind(ModelInstanceGroup::KIND_GPU);
  EXPECT_NO_FATAL_FAILURE(ExpectError("instance_group[0].kind", "CPU"));
}

TEST_F(ValidateTest, BoundsInstanceCountsPerGroupAndInAll) {
  config_.mutable_instance_group(0)->set_count(kMaxInstanceCount);
  EXPECT_TRUE(ValidateModelConfig(kFile, config_, &sig_).ok());
  config_.mutable_instance_group(0)->set_count(kMaxInstanceCount + 1);
  EXPECT_NO_FATAL_FAILURE(ExpectError("instance_group[0].count", "65 is outside 1..64"));
  config_.mutable_instance_group(0)->set_count(100000);
  EXPECT_NO_FATAL_FAILURE(ExpectError("instance_group[0].count", "100000 is outside 1..64"));
  config_.mutable_instance_group(0)->set_count(-1);
  EXPECT_NO_FATAL_FAILURE(ExpectError("instance_group[0].count", "-1 is outside 1..64"));
  // Groups each within bounds whose int32 sum would overflow: the total is refused, naming the
  // group where it was passed.
  config_.clear_instance_group();
  for (int i = 0; i < 3; ++i) config_.add_instance_group()->set_count(40);
  EXPECT_NO_FATAL_FAILURE(ExpectError("instance_group", "more than 64 instances (at instance_group[1])"));
  config_.clear_instance_group();
  for (int i = 0; i < 64; ++i) config_.add_instance_group()->set_count(1);
  EXPECT_TRUE(ValidateModelConfig(kFile, config_, &sig_).ok());
  config_.add_instance_group()->set_count(0);  // 0 counts as the 1 it normalizes to
  EXPECT_NO_FATAL_FAILURE(ExpectError("instance_group", "(at instance_group[64])"));
}

TEST_F(ValidateTest, RejectsModelFileNamesOutsideTheVersionDirectory) {
  for (const char* name : {"/etc/hostname", "../x", "..", "sub/model.onnx", "a\\b"}) {
    config_.set_default_model_filename(name);
    EXPECT_NO_FATAL_FAILURE(ExpectError("default_model_filename", "one path component")) << name;
  }
  config_.set_default_model_filename("reranker.onnx");
  EXPECT_TRUE(ValidateModelConfig(kFile, config_, &sig_).ok());
}

TEST(ParseModelConfigJsonTest, AnOverrideGetsTheSameInstanceBound) {
  auto c = ParseModelConfigJson(R"({"name": "m", "instance_group": [{"count": 100000, "kind": "KIND_CPU"}]})",
                                "load request");
  ASSERT_TRUE(c.ok()) << c.status();
  const ModelSignature sig = BertSignature();
  ASSERT_TRUE(NormalizeModelConfig("load request", sig, &*c).ok());
  absl::Status s = ValidateModelConfig("load request", *c, &sig);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("load request: instance_group[0].count: 100000 is outside 1..64"));
}

TEST_F(ValidateTest, RejectsPreferredBatchAboveMax) {
  config_.mutable_dynamic_batching()->set_preferred_batch_size(1, 128);
  EXPECT_NO_FATAL_FAILURE(ExpectError("dynamic_batching.preferred_batch_size[1]", "128"));
}

TEST_F(ValidateTest, RejectsPriorityOutsideLevels) {
  config_.mutable_dynamic_batching()->set_default_priority_level(3);
  EXPECT_NO_FATAL_FAILURE(ExpectError("dynamic_batching.default_priority_level", "3"));
}

TEST_F(ValidateTest, RejectsWarmupBatchAboveMax) {
  config_.mutable_model_warmup(0)->set_batch_size(65);
  EXPECT_NO_FATAL_FAILURE(ExpectError("model_warmup[0].batch_size", "65"));
}

TEST_F(ValidateTest, RejectsWarmupWithoutData) {
  (*config_.mutable_model_warmup(0)->mutable_inputs())["input_ids"].clear_zero_data();
  EXPECT_NO_FATAL_FAILURE(ExpectError("model_warmup[0].inputs[\"input_ids\"]", "zero_data"));
}

TEST_F(ValidateTest, RejectsUnknownParameter) {
  (*config_.mutable_parameters())["max_seq_len"].set_string_value("128");
  EXPECT_NO_FATAL_FAILURE(ExpectError("parameters[\"max_seq_len\"]", "unknown parameter"));
}

TEST_F(ValidateTest, RejectsBadParameterValue) {
  (*config_.mutable_parameters())["score_activation"].set_string_value("tanh");
  EXPECT_NO_FATAL_FAILURE(ExpectError("parameters[\"score_activation\"]", "tanh"));
}

TEST_F(ValidateTest, RejectsEmptySpecificVersions) {
  config_.mutable_version_policy()->mutable_specific();
  EXPECT_NO_FATAL_FAILURE(ExpectError("version_policy.specific.versions"));
}

TEST_F(ValidateTest, RejectsDynamicBatchingWithoutBatchDim) {
  config_.set_max_batch_size(0);
  for (auto& in : *config_.mutable_input()) in.add_dims(-1);
  config_.mutable_output(0)->add_dims(1);
  config_.mutable_output(0)->set_dims(0, -1);
  EXPECT_NO_FATAL_FAILURE(ExpectError("dynamic_batching", "max_batch_size"));
}

// The repository API's load carries Triton's JSON form of ModelConfig (parameters.config).
TEST(ParseModelConfigJsonTest, ParsesTritonJsonWithProtoOrCamelCaseNames) {
  auto c = ParseModelConfigJson(R"({"name": "m", "backend": "onnxruntime", "max_batch_size": 8,
      "dynamicBatching": {"max_queue_delay_microseconds": "500"},
      "instance_group": [{"count": 2, "kind": "KIND_CPU"}],
      "parameters": {"max_sequence_length": {"string_value": "64"}}})",
                                "load request");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name(), "m");
  EXPECT_EQ(c->max_batch_size(), 8);
  EXPECT_EQ(c->dynamic_batching().max_queue_delay_microseconds(), 500u);
  ASSERT_EQ(c->instance_group_size(), 1);
  EXPECT_EQ(c->instance_group(0).count(), 2);
  EXPECT_EQ(c->parameters().at("max_sequence_length").string_value(), "64");
}

TEST(ParseModelConfigJsonTest, ErrorsNameTheSourceAndTheField) {
  auto unsupported = ParseModelConfigJson(R"({"name": "m", "sequence_batching": {}})", "load request");
  ASSERT_FALSE(unsupported.ok());
  EXPECT_EQ(unsupported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unsupported.status().message(), HasSubstr("load request: sequence_batching: unsupported"));
  auto unknown = ParseModelConfigJson(R"({"max_bach_size": 8})", "load request");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("max_bach_size: unknown field"));
  auto syntax = ParseModelConfigJson("{not json", "load request");
  ASSERT_FALSE(syntax.ok());
  EXPECT_THAT(syntax.status().message(), HasSubstr("load request: "));
  auto type = ParseModelConfigJson(R"({"max_batch_size": "many"})", "load request");
  ASSERT_FALSE(type.ok());
}

}  // namespace
}  // namespace tide::config
