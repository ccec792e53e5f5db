#include "server/routes/load_report.h"

#include <vector>

#include "gtest/gtest.h"

namespace tide::server {
namespace {

serving::QueueLoad Queue(uint64_t tasks, uint64_t tokens) {
  serving::QueueLoad s;
  s.queued_tasks = tasks;
  s.queued_tokens = tokens;
  return s;
}

TEST(LoadReportTest, SumsEveryModelsQueueAndFreeCapacityFollowsInFlight) {
  std::vector<serving::QueueLoad> queues = {Queue(3, 300), Queue(2, 50)};
  LoadReport r = MakeLoadReport(true, 16, 64, queues);
  EXPECT_EQ(r.queued_tasks, 5u);
  EXPECT_EQ(r.queued_tokens, 350u);
  EXPECT_EQ(r.free_percent, 75);
  EXPECT_EQ(RenderLoadJson(r),
            R"({"ready":true,"in_flight":16,"max_concurrent_requests":64,"queued_tasks":5,"queued_tokens":350,"free_percent":75})");
}

TEST(LoadReportTest, FullNotReadyAndUnlimited) {
  EXPECT_EQ(MakeLoadReport(true, 64, 64, {}).free_percent, 0);
  EXPECT_EQ(MakeLoadReport(true, 70, 64, {}).free_percent, 0);  // permits can briefly exceed
  EXPECT_EQ(MakeLoadReport(false, 0, 64, {}).free_percent, 0);  // loading or draining: no traffic
  EXPECT_EQ(MakeLoadReport(true, 0, 0, {}).free_percent, 100);
  EXPECT_EQ(MakeLoadReport(true, 3, 0, {}).free_percent, 25);
  EXPECT_EQ(MakeLoadReport(true, -1, 4, {}).in_flight, 0);
}

}  // namespace
}  // namespace tide::server
