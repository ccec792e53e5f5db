#include "server/routes/api_docs.h"

#include <set>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/access/access_table.h"

namespace tide::server {
namespace {

// Every route of the one route table is described in the OpenAPI document, and the document
// describes no route the server does not have.
TEST(ApiDocsTest, TheOpenApiDocumentDescribesExactlyTheRouteTable) {
  const http::Response r = OpenApiResponse();
  EXPECT_EQ(r.status, 200);
  const nlohmann::json doc = nlohmann::json::parse(r.body, nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(doc["openapi"].get<std::string>().substr(0, 2), "3.");
  std::set<std::pair<std::string, std::string>> described;
  for (const auto& [path, item] : doc["paths"].items()) {
    for (const auto& [method, op] : item.items()) {
      described.insert({absl::AsciiStrToUpper(method), path});
      EXPECT_TRUE(op.contains("summary")) << method << " " << path;
      EXPECT_TRUE(op["responses"].contains("200")) << method << " " << path;
    }
  }
  std::set<std::pair<std::string, std::string>> routes;
  for (const RouteEntry& e : RouteTable()) {
    routes.insert({e.method, e.pattern});
    EXPECT_TRUE(described.count({e.method, e.pattern})) << "not in openapi.json: " << e.method << " " << e.pattern;
  }
  for (const auto& d : described) EXPECT_TRUE(routes.count(d)) << "not a route: " << d.first << " " << d.second;
}

TEST(ApiDocsTest, TheDocsPageIsSelfContained) {
  const http::Response r = DocsResponse();
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  EXPECT_NE(r.body.find("api-doc/openapi.json"), std::string::npos);
  EXPECT_EQ(r.body.find("http://"), std::string::npos);   // no CDN, no external request
  EXPECT_EQ(r.body.find("https://"), std::string::npos);
  EXPECT_EQ(r.body.find("<script src"), std::string::npos);
  EXPECT_EQ(r.body.find("<link"), std::string::npos);
}

}  // namespace
}  // namespace tide::server
