#include "guard/token_bucket.h"

#include "gtest/gtest.h"

namespace tide::guard {
namespace {

using std::chrono::milliseconds;

TEST(TokenBucket, StartsFullRefillsAtItsRateAndSaysHowLongToWait) {
  FakeClock clock;
  TokenBucket bucket(&clock, /*rate=*/10, /*burst=*/5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(bucket.TryTake(1), Clock::duration::zero()) << i;
  const Clock::duration wait = bucket.TryTake(1);
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(wait), milliseconds(100));  // 1 token at 10/s
  clock.Advance(milliseconds(100));
  EXPECT_EQ(bucket.TryTake(1), Clock::duration::zero());
  // Never more than the burst saved up.
  clock.Advance(std::chrono::hours(1));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(bucket.TryTake(1), Clock::duration::zero()) << i;
  EXPECT_GT(bucket.TryTake(1), Clock::duration::zero());
}

// A request larger than the burst passes once the bucket is full and is paid back before the next.
TEST(TokenBucket, ALargeRequestIsAdmittedOnAFullBucketAndPaidBack) {
  FakeClock clock;
  TokenBucket bucket(&clock, /*rate=*/10, /*burst=*/10);
  EXPECT_EQ(bucket.TryTake(30), Clock::duration::zero());  // balance -20
  const Clock::duration wait = bucket.TryTake(1);
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(wait), milliseconds(2100));  // back to +1
  clock.Advance(milliseconds(2100));
  EXPECT_EQ(bucket.TryTake(1), Clock::duration::zero());
}

TEST(TokenBucket, ZeroRateIsUnlimitedAndTheDefaultBurstIsOneSecond) {
  FakeClock clock;
  TokenBucket unlimited(&clock, 0);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(unlimited.TryTake(1000), Clock::duration::zero());
  TokenBucket slow(&clock, 0.5);
  EXPECT_EQ(slow.burst(), 1.0);
  TokenBucket fast(&clock, 20);
  EXPECT_EQ(fast.burst(), 20.0);
}

}  // namespace
}  // namespace tide::guard
