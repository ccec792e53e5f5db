#include "guard/api_key.h"

#include <string>

#include <gtest/gtest.h>

namespace tide::guard {
namespace {

TEST(ApiKeyTest, AcceptsBearerWithTheRightKey) {
  EXPECT_TRUE(ApiKeyMatches("Bearer s3cret-key", "s3cret-key"));
  EXPECT_TRUE(ApiKeyMatches("bearer s3cret-key", "s3cret-key"));
  EXPECT_TRUE(ApiKeyMatches("BEARER s3cret-key", "s3cret-key"));
  EXPECT_TRUE(ApiKeyMatches("  Bearer \t s3cret-key  ", "s3cret-key"));
}

TEST(ApiKeyTest, RejectsWrongKeys) {
  EXPECT_FALSE(ApiKeyMatches("Bearer s3cret-kez", "s3cret-key"));
  EXPECT_FALSE(ApiKeyMatches("Bearer x3cret-key", "s3cret-key"));
  EXPECT_FALSE(ApiKeyMatches("Bearer s3cret-ke", "s3cret-key"));     // prefix
  EXPECT_FALSE(ApiKeyMatches("Bearer s3cret-keyy", "s3cret-key"));   // extension
  EXPECT_FALSE(ApiKeyMatches("Bearer S3CRET-KEY", "s3cret-key"));    // the key is case-sensitive
  EXPECT_FALSE(ApiKeyMatches("Bearer s3cret key", "s3cret-key"));
}

TEST(ApiKeyTest, RejectsMalformedHeaders) {
  EXPECT_FALSE(ApiKeyMatches("", "k"));
  EXPECT_FALSE(ApiKeyMatches("Bearer", "k"));
  EXPECT_FALSE(ApiKeyMatches("Bearer ", "k"));
  EXPECT_FALSE(ApiKeyMatches("Bearerk", "k"));
  EXPECT_FALSE(ApiKeyMatches("Basic k", "k"));
  EXPECT_FALSE(ApiKeyMatches("k", "k"));
  EXPECT_FALSE(ApiKeyMatches("Token k", "k"));
}

TEST(ApiKeyTest, EmptyExpectedKeyNeverMatches) {
  EXPECT_FALSE(ApiKeyMatches("Bearer ", ""));
  EXPECT_FALSE(ApiKeyMatches("Bearer anything", ""));
  EXPECT_FALSE(ApiKeyMatches("", ""));
}

TEST(ApiKeyTest, ConstantTimeEqualsComparesContentAndLength) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abd", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("ab", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abcd", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", ""));
  // A shorter presented key padded with NULs must not match a key with trailing NULs.
  EXPECT_FALSE(ConstantTimeEquals("ab", std::string("ab\0", 3)));
  EXPECT_TRUE(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0b", 3)));
  // Every byte position is compared: a difference in the last byte is caught as well as in the first.
  const std::string key(64, 'k');
  for (size_t i = 0; i < key.size(); ++i) {
    std::string other = key;
    other[i] = 'x';
    EXPECT_FALSE(ConstantTimeEquals(other, key)) << i;
  }
}

}  // namespace
}  // namespace tide::guard
