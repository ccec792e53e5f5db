#include "config/tide_parameters.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tide::config {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

ModelConfig WithParams(std::initializer_list<std::pair<const char*, const char*>> params) {
  ModelConfig c;
  for (const auto& [k, v] : params) (*c.mutable_parameters())[k].set_string_value(v);
  return c;
}

TEST(TideParametersTest, Defaults) {
  auto p = TideParameters::FromConfig(ModelConfig(), "c.pbtxt");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->task, Task::kRerank);
  EXPECT_EQ(p->tokenizer, "tokenizer.json");
  EXPECT_FALSE(p->max_sequence_length.has_value());
  EXPECT_EQ(p->truncation_direction, tokenizer::TruncationDirection::kRight);
  EXPECT_EQ(p->score_activation, ScoreActivation::kSigmoid);
  EXPECT_EQ(p->intra_op_threads, 0);
  EXPECT_EQ(p->inter_op_threads, 0);
  EXPECT_FALSE(p->allow_spinning);
  EXPECT_EQ(p->graph_optimization_level, GraphOptimizationLevel::kAll);
  EXPECT_TRUE(p->enable_cpu_mem_arena);
  EXPECT_TRUE(p->share_weights);
  EXPECT_TRUE(p->weights_file);
  EXPECT_EQ(p->thread_layout, ThreadLayout::kAdaptive);
  EXPECT_EQ(p->batch_grouping, BatchGrouping::kLength);
  EXPECT_EQ(p->batch_padding, BatchPadding::kBucket);
  EXPECT_EQ(p->graph_fusion, GraphFusion::kAuto);
  EXPECT_EQ(p->attention_precision, AttentionPrecision::kAuto);
  EXPECT_EQ(p->attention_kernel, KernelChoice::kTide);
  EXPECT_EQ(p->elementwise_kernel, KernelChoice::kTide);
  EXPECT_TRUE(p->prune_last_layer);
  EXPECT_TRUE(p->shared_prompt_prefix);
  EXPECT_FALSE(p->token_type_vocab_size.has_value());
  EXPECT_EQ(p->EffectiveMaxSequenceLength(std::nullopt), 512);
  EXPECT_EQ(p->EffectiveMaxSequenceLength(256), 256);
}

TEST(TideParametersTest, ReadsEveryKey) {
  auto p = TideParameters::FromConfig(WithParams({{"task", "classify"},
                                                  {"tokenizer", "tok/tokenizer..v2.json"},
                                                  {"max_sequence_length", "128"},
                                                  {"truncation_direction", "left"},
                                                  {"score_activation", "softmax"},
                                                  {"intra_op_threads", "3"},
                                                  {"inter_op_thread_count", "2"},
                                                  {"allow_spinning", "true"},
                                                  {"graph_optimization_level", "basic"},
                                                  {"enable_cpu_mem_arena", "false"},
                                                  {"share_weights", "false"},
                                                  {"weights_file", "false"},
                                                  {"thread_layout", "fixed"},
                                                  {"batch_grouping", "fifo"},
                                                  {"batch_padding", "longest"},
                                                  {"graph_fusion", "off"},
                                                  {"attention_kernel", "onnxruntime"},
                                                  {"elementwise_kernel", "onnxruntime"},
                                                  {"attention_precision", "bf16"},
                                                  {"prune_last_layer", "false"},
                                                  {"shared_prompt_prefix", "false"},
                                                  {"sequence_buckets", "32, 64,128"},
                                                  {"allowed_batch_sizes", "1,2,4,8"},
                                                  {"max_padding_ratio", "2.5"},
                                                  {"batch_saturation_tokens", "1024"},
                                                  {"breaker_min_samples", "12"},
                                                  {"token_type_vocab_size", "3"}}),
                                      "c.pbtxt");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->task, Task::kClassify);
  EXPECT_EQ(p->tokenizer, "tok/tokenizer..v2.json");
  EXPECT_EQ(p->EffectiveMaxSequenceLength(256), 128);
  EXPECT_EQ(p->truncation_direction, tokenizer::TruncationDirection::kLeft);
  EXPECT_EQ(p->score_activation, ScoreActivation::kSoftmax);
  EXPECT_EQ(p->intra_op_threads, 3);
  EXPECT_EQ(p->inter_op_threads, 2);
  EXPECT_TRUE(p->allow_spinning);
  EXPECT_EQ(p->graph_optimization_level, GraphOptimizationLevel::kBasic);
  EXPECT_FALSE(p->enable_cpu_mem_arena);
  EXPECT_FALSE(p->share_weights);
  EXPECT_FALSE(p->weights_file);
  EXPECT_EQ(p->thread_layout, ThreadLayout::kFixed);
  EXPECT_EQ(p->batch_grouping, BatchGrouping::kFifo);
  EXPECT_EQ(p->batch_padding, BatchPadding::kLongest);
  EXPECT_EQ(p->graph_fusion, GraphFusion::kOff);
  EXPECT_EQ(p->attention_kernel, KernelChoice::kOnnxRuntime);
  EXPECT_EQ(p->elementwise_kernel, KernelChoice::kOnnxRuntime);
  EXPECT_EQ(p->attention_precision, AttentionPrecision::kBf16);
  EXPECT_FALSE(p->prune_last_layer);
  EXPECT_FALSE(p->shared_prompt_prefix);
  EXPECT_EQ(p->sequence_buckets, (std::vector<int64_t>{32, 64, 128}));
  EXPECT_EQ(p->allowed_batch_sizes, (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(p->max_padding_ratio, 2.5);
  EXPECT_EQ(p->batch_saturation_tokens, 1024);
  EXPECT_EQ(p->breaker_min_samples, 12);
  EXPECT_EQ(p->token_type_vocab_size, 3);
  EXPECT_EQ(TaskName(p->task), "classify");
  EXPECT_EQ(ScoreActivationName(p->score_activation), "softmax");
}

TEST(TideParametersTest, ErrorsNameFileAndKey) {
  struct Case {
    const char* key;
    const char* value;
    const char* detail;
  } cases[] = {
      {"task", "generate", "generate"},
      {"max_sequence_length", "1", "out of range"},
      {"max_sequence_length", "12x", "integer"},
      {"intra_op_threads", "-1", "out of range"},
      {"allow_spinning", "maybe", "maybe"},
      {"graph_optimization_level", "max", "\"all\""},
      {"batch_grouping", "sorted", "sorted"},
      {"batch_padding", "row", "\"bucket\""},
      {"thread_layout", "wide", "wide"},
      {"graph_fusion", "on", "\"auto\""},
      {"attention_kernel", "flash", "\"tide\""},
      {"elementwise_kernel", "mlas", "\"onnxruntime\""},
      {"attention_precision", "fp16", "\"bf16\""},
      {"sequence_buckets", "64,32", "strictly increasing"},
      {"allowed_batch_sizes", "1,4,2", "strictly increasing"},
      {"allowed_batch_sizes", "0,4", "out of range"},
      {"allowed_batch_sizes", "1,x", "integer"},
      {"max_padding_ratio", "0.5", "[1, 1024]"},
      {"max_padding_ratio", "lots", "lots"},
      {"batch_saturation_tokens", "-1", "out of range"},
      {"breaker_min_samples", "0", "out of range"},
      {"token_type_vocab_size", "0", "out of range"},
      {"tokenizer", "/etc/tokenizer.json", "relative"},
      {"tokenizer", "../other/tokenizer.json", "relative"},
      {"tokenizer", "tok/../../tokenizer.json", "relative"},
      {"truncation", "left", "unknown parameter"},
  };
  for (const Case& c : cases) {
    auto p = TideParameters::FromConfig(WithParams({{c.key, c.value}}), "m/config.pbtxt");
    ASSERT_FALSE(p.ok()) << c.key << "=" << c.value;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(p.status().message(),
                AllOf(HasSubstr("m/config.pbtxt: parameters[\"" + std::string(c.key) + "\"]"),
                      HasSubstr(c.detail)))
        << c.key << "=" << c.value;
  }
}

TEST(TideParametersTest, ParsedFromTextConfig) {
  auto c = ParseModelConfig(R"pb(
    parameters { key: "task" value: { string_value: "classify" } }
    parameters [ { key: "score_activation" value: { string_value: "none" } } ]
  )pb", "c.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status();
  auto p = TideParameters::FromConfig(*c, "c.pbtxt");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->task, Task::kClassify);
  EXPECT_EQ(p->score_activation, ScoreActivation::kNone);
}

// A classifier's answer while its breaker is open: one logit per label, brackets optional; only for
// task "classify" and only with a breaker trigger (else it could never be used).
TEST(TideParametersTest, BreakerDefaultResult) {
  for (const char* value : {"[2.5, -2.5]", " 2.5,-2.5 ", "[ 2.5 , -2.5 ]"}) {
    auto p = TideParameters::FromConfig(
        WithParams({{"task", "classify"}, {"breaker_queue_fullness", "0.5"}, {"breaker_default_result", value}}),
        "c.pbtxt");
    ASSERT_TRUE(p.ok()) << value << ": " << p.status();
    EXPECT_EQ(p->breaker_default_result, (std::vector<float>{2.5f, -2.5f})) << value;
  }
  EXPECT_TRUE(TideParameters::FromConfig(ModelConfig(), "c.pbtxt")->breaker_default_result.empty());

  struct Case {
    std::vector<std::pair<const char*, const char*>> params;
    const char* detail;
  } cases[] = {
      {{{"task", "classify"}, {"breaker_p99_ms", "200"}, {"breaker_default_result", "[1, 2"}}, "unbalanced brackets"},
      {{{"task", "classify"}, {"breaker_p99_ms", "200"}, {"breaker_default_result", "[]"}}, "one number per output label"},
      {{{"task", "classify"}, {"breaker_p99_ms", "200"}, {"breaker_default_result", "[1, x]"}}, "\"x\""},
      {{{"task", "classify"}, {"breaker_p99_ms", "200"}, {"breaker_default_result", "[1,,2]"}}, "finite number"},
      {{{"task", "classify"}, {"breaker_p99_ms", "200"}, {"breaker_default_result", "nan"}}, "finite number"},
      {{{"task", "classify"}, {"breaker_p99_ms", "200"}, {"breaker_default_result", "1e300"}}, "finite number"},
      {{{"breaker_p99_ms", "200"}, {"breaker_default_result", "[1]"}}, "task \"classify\" only"},
      {{{"task", "classify"}, {"breaker_default_result", "[1]"}}, "without a breaker trigger"},
  };
  for (const Case& c : cases) {
    ModelConfig config;
    for (const auto& [k, v] : c.params) (*config.mutable_parameters())[k].set_string_value(v);
    auto p = TideParameters::FromConfig(config, "m/config.pbtxt");
    ASSERT_FALSE(p.ok()) << c.detail;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(p.status().message(),
                AllOf(HasSubstr("m/config.pbtxt: parameters[\"breaker_default_result\"]"), HasSubstr(c.detail)));
  }
}

// The key table in tide_parameters.cc is the one list of keys; every key in it is accepted, every
// key is documented in the header's comment and in docs/configuration.md's parameter table, and
// the unknown-key error names them all.
TEST(TideParametersTest, EveryKeyInTheTableIsAcceptedAndDocumented) {
  const char* source_dir = std::getenv("TIDE_SOURCE_DIR");
  const std::string root = source_dir != nullptr ? source_dir : ".";
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  const std::string header = read(root + "/src/config/tide_parameters.h");
  const std::string readme = read(root + "/docs/configuration.md");
  ASSERT_FALSE(header.empty());
  ASSERT_FALSE(readme.empty());
  ModelConfig unknown;
  (*unknown.mutable_parameters())["no_such_key"].set_string_value("1");
  const std::string unknown_error(TideParameters::FromConfig(unknown, "c.pbtxt").status().message());
  ASSERT_GT(TideParameters::Keys().size(), 20u);
  for (std::string_view key : TideParameters::Keys()) {
    const std::string k(key);
    EXPECT_TRUE(header.find("//   " + k + " ") != std::string::npos || header.find("alias " + k) != std::string::npos)
        << k << " is not documented in tide_parameters.h";
    EXPECT_TRUE(readme.find("`" + k + "`") != std::string::npos) << k << " is not documented in docs/configuration.md";
    EXPECT_THAT(unknown_error, HasSubstr(k));
    // A value that is wrong for every key is refused naming that key (so the key is looked up).
    ModelConfig config;
    (*config.mutable_parameters())[k].set_string_value("../not a value");
    auto p = TideParameters::FromConfig(config, "c.pbtxt");
    EXPECT_FALSE(p.ok()) << k;
    EXPECT_THAT(p.status().message(), HasSubstr("parameters[\"" + k + "\"]")) << k;
  }
}

// Embedding models: task embed with its pooling, normalization, Matryoshka dimensions and prompts;
// those keys belong to task embed only.
TEST(TideParametersTest, EmbeddingModelKeys) {
  auto p = TideParameters::FromConfig(WithParams({{"task", "embed"},
                                                  {"pooling", "cls"},
                                                  {"normalize", "false"},
                                                  {"matryoshka_dimensions", "64, 128,256"},
                                                  {"prompts", R"({"query": "query: ", "passage": "passage: "})"},
                                                  {"default_prompt_name", "passage"}}),
                                      "c.pbtxt");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->task, Task::kEmbed);
  EXPECT_EQ(p->pooling, Pooling::kCls);
  EXPECT_EQ(PoolingName(p->pooling), "cls");
  EXPECT_FALSE(p->normalize);
  EXPECT_EQ(p->matryoshka_dimensions, (std::vector<int64_t>{64, 128, 256}));
  ASSERT_NE(p->Prompt("query"), nullptr);
  EXPECT_EQ(*p->Prompt("query"), "query: ");
  EXPECT_EQ(p->Prompt("title"), nullptr);
  EXPECT_EQ(p->default_prompt_name, "passage");
  auto defaults = TideParameters::FromConfig(WithParams({{"task", "embed"}}), "c.pbtxt");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->pooling, Pooling::kMean);
  EXPECT_TRUE(defaults->normalize);
  EXPECT_TRUE(defaults->matryoshka_dimensions.empty());

  struct Bad {
    std::vector<std::pair<const char*, const char*>> params;
    const char* key;
    const char* says;
  };
  for (const Bad& b : std::vector<Bad>{
           {{{"pooling", "mean"}}, "pooling", "task \"embed\" only"},
           {{{"task", "classify"}, {"normalize", "true"}}, "normalize", "task \"embed\" only"},
           {{{"task", "embed"}, {"pooling", "max"}}, "pooling", "unknown value"},
           {{{"task", "embed"}, {"matryoshka_dimensions", "128,64"}}, "matryoshka_dimensions", "increasing"},
           {{{"task", "embed"}, {"matryoshka_dimensions", "0"}}, "matryoshka_dimensions", "positive"},
           {{{"task", "embed"}, {"prompts", "[1]"}}, "prompts", "JSON object"},
           {{{"task", "embed"}, {"prompts", R"({"q": 3})"}}, "prompts", "string prefix"},
           {{{"task", "embed"}, {"default_prompt_name", "query"}}, "default_prompt_name", "not one of"},
       }) {
    ModelConfig config;
    for (const auto& [k, v] : b.params) (*config.mutable_parameters())[k].set_string_value(v);
    auto bad = TideParameters::FromConfig(config, "m/config.pbtxt");
    ASSERT_FALSE(bad.ok()) << b.key;
    EXPECT_THAT(bad.status().message(),
                AllOf(HasSubstr(std::string("parameters[\"") + b.key + "\"]"), HasSubstr(b.says)));
  }
}

// Decoder-only rerankers' prompt: parsed and checked at load, errors naming the key and the slot.
TEST(TideParametersTest, PromptTemplateAndDefaultInstruction) {
  auto none = TideParameters::FromConfig(ModelConfig(), "c.pbtxt");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->prompt_template.has_value());
  EXPECT_FALSE(none->default_instruction.has_value());

  auto p = TideParameters::FromConfig(
      WithParams({{"prompt_template", "<|im_start|>{instruction}\n{query}\n{document}<|im_end|> {{x}}"},
                  {"default_instruction", "Judge"}}),
      "c.pbtxt");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(p->prompt_template.has_value());
  EXPECT_TRUE(p->prompt_template->has_instruction());
  EXPECT_EQ(p->prompt_template->Render("I", "Q", "D").text, "<|im_start|>I\nQ\nD<|im_end|> {x}");
  EXPECT_EQ(p->default_instruction, "Judge");

  auto no_instruction_slot = TideParameters::FromConfig(WithParams({{"prompt_template", "{query} {document}"}}), "c");
  ASSERT_TRUE(no_instruction_slot.ok());
  EXPECT_FALSE(no_instruction_slot->prompt_template->has_instruction());

  auto missing = TideParameters::FromConfig(WithParams({{"prompt_template", "{query} only"}}), "c.pbtxt");
  EXPECT_THAT(missing.status().message(),
              AllOf(HasSubstr("c.pbtxt: parameters[\"prompt_template\"]"), HasSubstr("lacks the slot {document}")));
  auto unknown = TideParameters::FromConfig(WithParams({{"prompt_template", "{query} {document} {passage}"}}), "c");
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown slot {passage}"));

  auto orphan = TideParameters::FromConfig(WithParams({{"default_instruction", "Judge"}}), "c.pbtxt");
  EXPECT_THAT(orphan.status().message(),
              AllOf(HasSubstr("parameters[\"default_instruction\"]"), HasSubstr("needs a prompt_template")));
  auto no_slot = TideParameters::FromConfig(
      WithParams({{"prompt_template", "{query} {document}"}, {"default_instruction", "Judge"}}), "c.pbtxt");
  EXPECT_THAT(no_slot.status().message(),
              AllOf(HasSubstr("parameters[\"default_instruction\"]"), HasSubstr("no {instruction} slot")));
}

}  // namespace
}  // namespace tide::config
