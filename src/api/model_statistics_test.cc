#include "api/model_statistics.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tide::api {
namespace {

TEST(RenderModelStatisticsTest, TritonShapeWithEveryField) {
  ModelStatistics m;
  m.name = "minilm";
  m.version = "2";
  m.last_inference_ms = 1700000000000;
  m.inference_count = 10;
  m.execution_count = 3;
  m.success = {4, 4000};
  m.fail = {1, 100};
  m.queue = {10, 500};
  m.compute_input = {5, 0};
  m.compute_infer = {5, 3000};
  m.compute_output = {5, 0};
  m.batch_stats = {{1, {1, 900}}, {4, {2, 2100}}};
  const auto j = nlohmann::json::parse(RenderModelStatistics({m}));
  ASSERT_EQ(j["model_stats"].size(), 1u);
  const auto& s = j["model_stats"][0];
  EXPECT_EQ(s["name"], "minilm");
  EXPECT_EQ(s["version"], "2");
  EXPECT_EQ(s["last_inference"], 1700000000000);
  EXPECT_EQ(s["inference_count"], 10);
  EXPECT_EQ(s["execution_count"], 3);
  EXPECT_EQ(s["inference_stats"]["success"]["count"], 4);
  EXPECT_EQ(s["inference_stats"]["success"]["ns"], 4000);
  EXPECT_EQ(s["inference_stats"]["fail"]["count"], 1);
  EXPECT_EQ(s["inference_stats"]["queue"]["ns"], 500);
  EXPECT_EQ(s["inference_stats"]["compute_infer"]["count"], 5);
  EXPECT_EQ(s["inference_stats"]["compute_input"]["count"], 5);
  EXPECT_EQ(s["inference_stats"]["compute_output"]["count"], 5);
  EXPECT_EQ(s["inference_stats"]["compute_output"]["ns"], 0);
  EXPECT_EQ(s["inference_stats"]["cache_hit"]["count"], 0);
  EXPECT_EQ(s["inference_stats"]["cache_miss"]["ns"], 0);
  EXPECT_TRUE(s["response_stats"].is_object() && s["response_stats"].empty());
  EXPECT_TRUE(s["memory_usage"].is_array() && s["memory_usage"].empty());
  EXPECT_EQ(s["batch_stats"][1]["compute_input"]["count"], 2);
  ASSERT_EQ(s["batch_stats"].size(), 2u);
  EXPECT_EQ(s["batch_stats"][1]["batch_size"], 4);
  EXPECT_EQ(s["batch_stats"][1]["compute_infer"]["count"], 2);
  EXPECT_EQ(s["batch_stats"][1]["compute_infer"]["ns"], 2100);
}

TEST(RenderModelStatisticsTest, NoModelsIsAnEmptyList) {
  EXPECT_EQ(RenderModelStatistics({}), R"({"model_stats":[]})");
}

TEST(RenderModelStatisticsTest, InvalidUtf8InANameDoesNotThrow) {
  ModelStatistics m;
  m.name = std::string("bad\xff", 4);
  EXPECT_NO_THROW(RenderModelStatistics({m}));
}

}  // namespace
}  // namespace tide::api
