#include "server/http/browser_checks.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tide::http {
namespace {

TEST(BrowserChecks, HostAllowlistComparesTheNameWithoutPort) {
  const std::vector<std::string> loopback = DefaultAllowedHosts("127.0.0.1");
  EXPECT_TRUE(HostAllowed("127.0.0.1:8000", loopback));
  EXPECT_TRUE(HostAllowed("localhost:8000", loopback));
  EXPECT_TRUE(HostAllowed("LOCALHOST", loopback));
  EXPECT_TRUE(HostAllowed("[::1]:8000", loopback));
  // A DNS-rebinding page: its own name resolving to 127.0.0.1.
  EXPECT_FALSE(HostAllowed("attacker.example:8000", loopback));
  EXPECT_FALSE(HostAllowed("localhost.attacker.example", loopback));
  EXPECT_TRUE(HostAllowed("", loopback));  // HTTP/1.0 without Host: no browser sends that
  EXPECT_FALSE(HostAllowed(":8000", loopback));
  EXPECT_FALSE(HostAllowed("local host", loopback));
  EXPECT_FALSE(HostAllowed("::1", loopback));  // an unbracketed IPv6 literal is malformed
  // Another loopback address binds its own name too.
  const std::vector<std::string> other = DefaultAllowedHosts("127.0.0.2");
  EXPECT_TRUE(HostAllowed("127.0.0.2:9000", other));
  // Bound beyond loopback: any host (empty list); "*" too.
  EXPECT_TRUE(DefaultAllowedHosts("0.0.0.0").empty());
  EXPECT_TRUE(DefaultAllowedHosts("10.1.2.3").empty());
  EXPECT_TRUE(HostAllowed("anything:1", {}));
  const std::vector<std::string> star = {"*"};
  EXPECT_TRUE(HostAllowed("anything", star));
  const std::vector<std::string> named = {"tide.internal", "[fd00::1]"};
  EXPECT_TRUE(HostAllowed("Tide.Internal:443", named));
  EXPECT_TRUE(HostAllowed("[fd00::1]:8000", named));
  EXPECT_FALSE(HostAllowed("tide.internal.evil", named));
}

TEST(BrowserChecks, SameOriginMatchesHostAndPortWithTheSchemesDefault) {
  EXPECT_TRUE(SameOrigin("http://127.0.0.1:8000", "127.0.0.1:8000"));
  EXPECT_TRUE(SameOrigin("http://LocalHost:8000", "localhost:8000"));
  EXPECT_TRUE(SameOrigin("http://localhost", "localhost:80"));
  EXPECT_TRUE(SameOrigin("https://tide.internal", "tide.internal"));
  EXPECT_TRUE(SameOrigin("http://[::1]:8000", "[::1]:8000"));
  EXPECT_FALSE(SameOrigin("http://localhost:8001", "localhost:8000"));
  EXPECT_FALSE(SameOrigin("https://evil.example", "localhost:8000"));
  EXPECT_FALSE(SameOrigin("null", "localhost:8000"));
  EXPECT_FALSE(SameOrigin("file://", "localhost:8000"));
  EXPECT_FALSE(SameOrigin("http://localhost:8000@evil", "localhost:8000"));
  EXPECT_FALSE(SameOrigin("", "localhost:8000"));
}

TEST(BrowserChecks, OriginListAndJsonMediaType) {
  const std::vector<std::string> listed = {"https://app.example"};
  EXPECT_TRUE(OriginListed("https://app.example", listed));
  EXPECT_TRUE(OriginListed("HTTPS://APP.EXAMPLE", listed));
  EXPECT_FALSE(OriginListed("https://app.example.evil", listed));
  EXPECT_FALSE(OriginListed("null", listed));
  const std::vector<std::string> any = {"*"};
  EXPECT_TRUE(OriginListed("null", any));
  EXPECT_TRUE(IsJsonMediaType("application/json"));
  EXPECT_TRUE(IsJsonMediaType("Application/JSON; charset=utf-8"));
  // The CORS-safelisted types a page may send without a preflight, and nothing at all.
  EXPECT_FALSE(IsJsonMediaType("text/plain"));
  EXPECT_FALSE(IsJsonMediaType("application/x-www-form-urlencoded"));
  EXPECT_FALSE(IsJsonMediaType("multipart/form-data; boundary=x"));
  EXPECT_FALSE(IsJsonMediaType(""));
  EXPECT_FALSE(IsJsonMediaType("application/jsonp"));
}

TEST(BrowserChecks, FlagEntriesAreValidatedAsOriginsAndHosts) {
  for (const char* ok : {"*", "https://app.example", "http://localhost:8080", "https://[::1]:8443"}) {
    EXPECT_TRUE(IsOriginPattern(ok)) << ok;
  }
  for (const char* bad : {"", "app.example", "https://", "https://app.example/", "https://app.example/path",
                          "ftp://app.example", "https://app example", "https://a.example:99999", "null"}) {
    EXPECT_FALSE(IsOriginPattern(bad)) << bad;
  }
  for (const char* ok : {"*", "localhost", "tide.internal", "10.0.0.7", "[fd00::1]"}) EXPECT_TRUE(IsHostPattern(ok)) << ok;
  for (const char* bad : {"", "localhost:8000", "http://x", "fd00::1", "a b", "x/y"}) {
    EXPECT_FALSE(IsHostPattern(bad)) << bad;
  }
}

}  // namespace
}  // namespace tide::http
