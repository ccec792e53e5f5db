#include "tracing/endpoint.h"

#include "gtest/gtest.h"

namespace tide::tracing {
namespace {

TEST(EndpointTest, ParsesHostPortAndPath) {
  auto e = ParseEndpoint("http://collector:4318");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->host, "collector");
  EXPECT_EQ(e->port, 4318);
  EXPECT_EQ(e->path, "");
  EXPECT_EQ(e->authority(), "collector:4318");
  e = ParseEndpoint("http://127.0.0.1/custom/v1/traces");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->port, 80);
  EXPECT_EQ(e->path, "/custom/v1/traces");
  e = ParseEndpoint("HTTP://[::1]:4317/");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->host, "::1");
  EXPECT_EQ(e->port, 4317);
  EXPECT_EQ(e->path, "");
  EXPECT_EQ(e->authority(), "[::1]:4317");
}

TEST(EndpointTest, RefusesWhatItCannotUse) {
  for (const char* bad : {"https://collector:4318", "collector:4318", "grpc://x:1", "http://", "http://:4318",
                          "http://host:0", "http://host:65536", "http://host:port", "http://host:", "http://[::1",
                          "http://[::1]x", "http://host/path?q=1", "http://user@host"}) {
    auto e = ParseEndpoint(bad);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_NE(e.status().message().find(bad), std::string::npos) << e.status();
  }
  EXPECT_NE(ParseEndpoint("https://x").status().message().find("https is not supported"), std::string::npos);
}

}  // namespace
}  // namespace tide::tracing
