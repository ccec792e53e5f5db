#include "config/model_config_json.h"

#include <gtest/gtest.h>

#include "config/model_config.h"
#include "nlohmann/json.hpp"

namespace tide::config {
namespace {

TEST(ModelConfigJsonTest, TritonsFormWithNumbersForInt64AndEnumNames) {
  auto config = ParseModelConfig(R"(
name: "m"
backend: "onnxruntime"
max_batch_size: 8
input [ { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] } ]
output [ { name: "logits" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 500 }
parameters { key: "task" value { string_value: "rerank" } }
)", "config.pbtxt");
  ASSERT_TRUE(config.ok()) << config.status();
  const auto j = nlohmann::json::parse(ModelConfigJson(*config));
  EXPECT_EQ(j["name"], "m");
  EXPECT_EQ(j["max_batch_size"], 8);
  EXPECT_EQ(j["input"][0]["data_type"], "TYPE_INT64");
  EXPECT_EQ(j["input"][0]["dims"], nlohmann::json::array({-1}));
  EXPECT_EQ(j["output"][0]["dims"], nlohmann::json::array({1}));
  EXPECT_EQ(j["dynamic_batching"]["max_queue_delay_microseconds"], 500);
  EXPECT_EQ(j["parameters"]["task"]["string_value"], "rerank");
  EXPECT_FALSE(j.contains("version_policy") && j["version_policy"].contains("specific"));
}

}  // namespace
}  // namespace tide::config
