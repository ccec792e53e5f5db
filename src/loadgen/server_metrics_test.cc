#include "loadgen/server_metrics.h"

#include "gtest/gtest.h"

namespace tide::loadgen {
namespace {

constexpr char kBefore[] = R"(# HELP tide_stage_duration_seconds Latency of each stage.
# TYPE tide_stage_duration_seconds histogram
tide_stage_duration_seconds_bucket{model="a",stage="tokenize",le="0.001"} 3
tide_stage_duration_seconds_sum{model="a",stage="tokenize"} 0.5
tide_stage_duration_seconds_count{model="a",stage="tokenize"} 10
tide_stage_duration_seconds_sum{model="a",stage="queue"} 1
tide_stage_duration_seconds_count{model="a",stage="queue"} 10
tide_request_duration_seconds_sum{model="a",endpoint="rerank"} 99
)";

constexpr char kAfter[] = R"(tide_stage_duration_seconds_sum{model="a",stage="tokenize"} 1.5
tide_stage_duration_seconds_count{model="a",stage="tokenize"} 30
tide_stage_duration_seconds_sum{model="b",stage="tokenize"} 0.5 1700000000000
tide_stage_duration_seconds_count{model="b",stage="tokenize"} 10
tide_stage_duration_seconds_sum{model="a",stage="queue"} 1
tide_stage_duration_seconds_count{model="a",stage="queue"} 10
tide_stage_duration_seconds_sum{stage="inference",model="a"} 4
tide_stage_duration_seconds_count{stage="inference",model="a"} 40
tide_stage_duration_seconds_sum{model="a",stage="postprocess"} garbage
)";

TEST(ServerMetrics, ParsesSumsAndCountsPerStageAcrossModels) {
  StageTotals t = ParseStageTotals(kAfter);
  ASSERT_EQ(t.count("tokenize"), 1u);
  EXPECT_DOUBLE_EQ(t["tokenize"].sum_seconds, 2.0);  // models a and b
  EXPECT_DOUBLE_EQ(t["tokenize"].count, 40);
  EXPECT_DOUBLE_EQ(t["inference"].sum_seconds, 4);
  EXPECT_EQ(t.count("postprocess"), 0u);  // malformed value skipped
  EXPECT_TRUE(ParseStageTotals("tide_requests_total{code=\"200\"} 5\n").empty());
}

TEST(ServerMetrics, DiffGivesTheMeanOfTheRunInStageOrder) {
  std::vector<StageSplit> split = DiffStageTotals(ParseStageTotals(kBefore), ParseStageTotals(kAfter));
  ASSERT_EQ(split.size(), 2u);  // queue saw nothing new
  EXPECT_EQ(split[0].stage, "tokenize");
  EXPECT_DOUBLE_EQ(split[0].count, 30);
  EXPECT_DOUBLE_EQ(split[0].mean_ms, 1.5 / 30 * 1e3);  // (2.0 - 0.5) s over 30 observations
  EXPECT_EQ(split[1].stage, "inference");
  EXPECT_DOUBLE_EQ(split[1].mean_ms, 100);
}

}  // namespace
}  // namespace tide::loadgen
