#include "batching/batcher_options.h"

#include "gtest/gtest.h"

namespace tide::batching {
namespace {

TEST(BatcherOptionsTest, DefaultsAreValid) { EXPECT_TRUE(ValidateBatcherOptions(BatcherOptions{}).ok()); }

TEST(BatcherOptionsTest, RejectsEachBadField) {
  auto bad = [](auto mutate) {
    BatcherOptions o;
    mutate(o);
    return ValidateBatcherOptions(o).code() == absl::StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(bad([](BatcherOptions& o) { o.max_batch_size = 0; }));
  EXPECT_TRUE(bad([](BatcherOptions& o) { o.max_batch_tokens = 0; }));
  EXPECT_TRUE(bad([](BatcherOptions& o) { o.preferred_batch_sizes = {64}; }));
  EXPECT_TRUE(bad([](BatcherOptions& o) { o.preferred_batch_sizes = {0}; }));
  EXPECT_TRUE(bad([](BatcherOptions& o) { o.max_queue_delay = std::chrono::microseconds(-1); }));
  EXPECT_TRUE(bad([](BatcherOptions& o) { o.sequence_buckets = {}; }));
  EXPECT_TRUE(bad([](BatcherOptions& o) { o.sequence_buckets = {32, 16}; }));
  EXPECT_TRUE(bad([](BatcherOptions& o) { o.sequence_buckets = {16, 16}; }));
  EXPECT_TRUE(bad([](BatcherOptions& o) { o.allowed_batch_sizes = {1, 2, 4}; }));  // < max_batch_size 32
  EXPECT_TRUE(bad([](BatcherOptions& o) { o.allowed_batch_sizes = {0, 32}; }));
  EXPECT_TRUE(bad([](BatcherOptions& o) { o.priority_levels = 3; }));  // default level missing
  EXPECT_TRUE(bad([](BatcherOptions& o) {
    o.priority_levels = 3;
    o.default_priority_level = 4;
  }));
  EXPECT_TRUE(bad([](BatcherOptions& o) {
    o.priority_levels = 2;
    o.default_priority_level = 1;
    o.priority_queue_policy[3] = QueuePolicy{};
  }));
  EXPECT_TRUE(bad([](BatcherOptions& o) { o.default_queue_policy.default_timeout = std::chrono::microseconds(-5); }));
}

TEST(BatcherOptionsTest, AcceptsAFullTritonStyleConfiguration) {
  BatcherOptions o;
  o.max_batch_size = 16;
  o.preferred_batch_sizes = {4, 8, 16};
  o.allowed_batch_sizes = {1, 2, 4, 8, 16};
  o.max_queue_delay = std::chrono::microseconds(2000);
  o.priority_levels = 2;
  o.default_priority_level = 2;
  o.priority_queue_policy[1].max_queue_size = 100;
  o.priority_queue_policy[1].timeout_action = TimeoutAction::kDelay;
  EXPECT_TRUE(ValidateBatcherOptions(o).ok());
}

}  // namespace
}  // namespace tide::batching
