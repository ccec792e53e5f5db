#include "api/admin_input.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"

namespace tide::api {
namespace {

using ::testing::HasSubstr;

std::string NestedObjects(size_t depth) {
  std::string s;
  for (size_t i = 0; i < depth; ++i) s += "{\"a\":";
  s += "1";
  for (size_t i = 0; i < depth; ++i) s += "}";
  return s;
}

TEST(AdminInputTest, AcceptsAModelConfigAndARollout) {
  EXPECT_TRUE(CheckAdminBody(R"({"parameters": {"config": "{\"max_batch_size\": 8}"}})").ok());
  EXPECT_TRUE(CheckAdminJsonText(
                  R"({"model_warmup": [{"name": "w", "inputs": {"x": {"dims": [8], "zero_data": true}}}]})",
                  "parameters.config")
                  .ok());
  EXPECT_TRUE(CheckAdminBody(R"({"candidate": "2", "guard": {"min_requests": 10}})").ok());
  EXPECT_TRUE(CheckAdminBody("").ok());
}

TEST(AdminInputTest, DepthIsBoundedAt16) {
  EXPECT_TRUE(CheckAdminBody(NestedObjects(kAdminInputLimits.max_json_depth)).ok());
  absl::Status body = CheckAdminBody(NestedObjects(kAdminInputLimits.max_json_depth + 1));
  EXPECT_EQ(KindOf(body), ErrorKind::kInvalidInput);
  EXPECT_THAT(body.message(), HasSubstr("the request body: "));
  EXPECT_THAT(body.message(), HasSubstr("max_json_depth=16"));
  // 100,000 levels: refused by the scan, never handed to a recursive parser.
  absl::Status config = CheckAdminJsonText(std::string(100000, '[') + std::string(100000, ']'), "parameters.config");
  EXPECT_EQ(KindOf(config), ErrorKind::kInvalidInput);
  EXPECT_EQ(Info(KindOf(config)).http_status, 422);
  EXPECT_EQ(Info(KindOf(config)).grpc_code, 3);  // INVALID_ARGUMENT
  EXPECT_THAT(config.message(), HasSubstr("parameters.config: "));
}

TEST(AdminInputTest, StringsAndContainersAreCounted) {
  std::string many = "[";
  for (size_t i = 0; i <= kAdminInputLimits.max_json_strings; ++i) many += i == 0 ? "\"\"" : ",\"\"";
  many += "]";
  ASSERT_LT(many.size(), kAdminInputLimits.max_bytes);
  absl::Status s = CheckAdminBody(many);
  EXPECT_EQ(KindOf(s), ErrorKind::kInvalidInput);
  EXPECT_THAT(s.message(), HasSubstr("max_json_strings=16384"));
  std::string containers = "[";
  for (size_t i = 0; i <= kAdminInputLimits.max_json_strings; ++i) containers += i == 0 ? "{}" : ",{}";
  containers += "]";
  EXPECT_EQ(KindOf(CheckAdminJsonText(containers, "parameters.config")), ErrorKind::kInvalidInput);
}

TEST(AdminInputTest, SizeIsABodyLimitOrAFieldLimit) {
  const std::string big = "\"" + std::string(kAdminInputLimits.max_bytes, 'x') + "\"";
  absl::Status body = CheckAdminBody(big);
  EXPECT_EQ(KindOf(body), ErrorKind::kPayloadTooLarge);
  EXPECT_EQ(Info(KindOf(body)).http_status, 413);
  EXPECT_THAT(body.message(), HasSubstr("1048576"));
  absl::Status text = CheckAdminJsonText(big, "parameters.config");
  EXPECT_EQ(KindOf(text), ErrorKind::kInvalidInput);
  EXPECT_THAT(text.message(), HasSubstr("parameters.config has 1048578 bytes"));
  // Exactly at the limit passes.
  EXPECT_TRUE(CheckAdminBody("\"" + std::string(kAdminInputLimits.max_bytes - 2, 'x') + "\"").ok());
}

}  // namespace
}  // namespace tide::api
