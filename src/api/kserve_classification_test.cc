#include "api/kserve_classification.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tide::api {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ClassificationTest, TopKAsValueColonIndexHighestFirst) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 3.0f, 1.0f, 2.0f};
  auto t = ClassificationTensor("logits", logits, 2, 3, 2);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->datatype, DataType::kBytes);
  EXPECT_THAT(t->shape, ElementsAre(2, 2));
  EXPECT_THAT(std::get<std::vector<std::string>>(t->data),
              ElementsAre("2.000000:1", "0.500000:0", "3.000000:0", "2.000000:2"));
  // k over the class count returns every class.
  auto all = ClassificationTensor("logits", logits, 2, 3, 10);
  ASSERT_TRUE(all.ok());
  EXPECT_THAT(all->shape, ElementsAre(2, 3));
  // With one name per class: "value:index:label".
  const std::vector<std::string> labels = {"neg", "neu", "pos"};
  auto named = ClassificationTensor("logits", logits, 2, 3, 1, labels);
  ASSERT_TRUE(named.ok());
  EXPECT_THAT(std::get<std::vector<std::string>>(named->data), ElementsAre("2.000000:1:neu", "3.000000:0:neg"));
}

TEST(ClassificationTest, TheParameterMustBeAPositiveInteger) {
  EXPECT_FALSE(ClassificationCount({}, "logits")->has_value());
  EXPECT_EQ(**ClassificationCount({{"classification", int64_t{2}}}, "logits"), 2);
  for (const ParameterValue& bad : {ParameterValue(int64_t{0}), ParameterValue(std::string("2")), ParameterValue(1.5)}) {
    auto k = ClassificationCount({{"classification", bad}}, "logits");
    ASSERT_FALSE(k.ok());
    EXPECT_EQ(k.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(k.status().message(), HasSubstr("classification must be an integer >= 1"));
  }
}

}  // namespace
}  // namespace tide::api
