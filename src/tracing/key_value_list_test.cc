#include "tracing/key_value_list.h"

#include "gtest/gtest.h"

namespace tide::tracing {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

TEST(KeyValueListTest, ParsesTrimsAndPercentDecodes) {
  auto list = ParseKeyValueList(" service.name = my%20svc ,deployment.environment=prod,,k=a%2Cb%3Dc ", "X");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(*list, (Pairs{{"service.name", "my svc"}, {"deployment.environment", "prod"}, {"k", "a,b=c"}}));
  list = ParseKeyValueList("", "X");
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
  list = ParseKeyValueList("api-key=secret=with=equals", "X");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (Pairs{{"api-key", "secret=with=equals"}}));
  list = ParseKeyValueList("a=1,b=2,a=3", "X");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (Pairs{{"a", "3"}, {"b", "2"}}));
  list = ParseKeyValueList("a=", "X");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (Pairs{{"a", ""}}));
}

TEST(KeyValueListTest, RefusesTheWholeListWithAMessage) {
  auto list = ParseKeyValueList("a=1,oops", "OTEL_RESOURCE_ATTRIBUTES");
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().message(), "OTEL_RESOURCE_ATTRIBUTES: \"oops\" is not key=value");
  list = ParseKeyValueList("=1", "X");
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find("has no key"), std::string::npos);
  for (const char* bad : {"a=%", "a=%2", "a=%zz", "a=100%"}) {
    list = ParseKeyValueList(bad, "X");
    ASSERT_FALSE(list.ok()) << bad;
    EXPECT_NE(list.status().message().find("percent"), std::string::npos);
  }
}

}  // namespace
}  // namespace tide::tracing
