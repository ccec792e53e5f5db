#include "api/openapi.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace tide::api {
namespace {

TEST(OpenApiDocumentTest, ParsesWithTheVersionFilledIn) {
  const nlohmann::json doc = nlohmann::json::parse(OpenApiDocument("1.2.3"), nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(doc["info"]["version"], "1.2.3");
  // Every request body carries an example (the black-box test sends each one).
  for (const auto& [path, item] : doc["paths"].items()) {
    for (const auto& [method, op] : item.items()) {
      if (!op.contains("requestBody")) continue;
      EXPECT_TRUE(op["requestBody"]["content"]["application/json"].contains("example")) << method << " " << path;
    }
  }
}

}  // namespace
}  // namespace tide::api
