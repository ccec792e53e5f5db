// TEI's /predict, /decode and /info wire formats.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/status_http.h"
#include "api/tei_decode.h"
#include "api/tei_info.h"
#include "api/tei_predict.h"

namespace tide::api {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

TEST(ParsePredictRequestTest, ShapesAsTeiReadsThem) {
  auto one = ParsePredictRequest(R"({"inputs":"a text"})");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_FALSE(one->batch);
  ASSERT_EQ(one->inputs.size(), 1u);
  EXPECT_FALSE(one->inputs[0].text_pair.has_value());

  auto pair = ParsePredictRequest(R"({"inputs":["q","d"]})");  // two strings: ONE pair
  ASSERT_TRUE(pair.ok());
  EXPECT_FALSE(pair->batch);
  ASSERT_EQ(pair->inputs.size(), 1u);
  EXPECT_EQ(pair->inputs[0].text_pair, "d");

  auto batch = ParsePredictRequest(R"({"inputs":[["q","d"],"x",["q","e"]],"raw_scores":true,"truncate":false,
                                       "truncation_direction":"Left"})");
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_TRUE(batch->batch);
  EXPECT_EQ(batch->inputs.size(), 3u);
  EXPECT_TRUE(batch->raw_scores);
  EXPECT_EQ(batch->truncate, false);
  EXPECT_EQ(batch->truncation_direction, tokenizer::TruncationDirection::kLeft);
}

TEST(ParsePredictRequestTest, EmptyIsTeisEmptyAndOtherErrorsAre422) {
  auto empty = ParsePredictRequest(R"({"inputs":[]})");
  EXPECT_EQ(HttpStatusFor(empty.status()), 400);
  EXPECT_EQ(ErrorTypeFor(empty.status()), "empty");
  EXPECT_EQ(HttpStatusFor(ParsePredictRequest(R"({"inputs":[1]})").status()), 422);
  EXPECT_EQ(HttpStatusFor(ParsePredictRequest(R"({})").status()), 422);
  EXPECT_EQ(HttpStatusFor(ParsePredictRequest(R"({"inputs":"a","truncation_direction":"Up"})").status()), 422);
  EXPECT_EQ(HttpStatusFor(ParsePredictRequest(R"({"inputs":)").status()), 400);
}

TEST(RenderPredictResponseTest, SoftmaxOverLabelsSortedAndSigmoidForOne) {
  PredictRequest req;
  req.inputs.resize(1);
  const std::vector<std::string> labels = {"LABEL_0", "LABEL_1"};
  auto body = RenderPredictResponse(req, std::vector<float>{0.0f, 0.0f}, labels);
  ASSERT_TRUE(body.ok());
  const json j = json::parse(*body);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_DOUBLE_EQ(j[0]["score"].get<double>(), 0.5);
  req.batch = true;
  const std::vector<std::string> one = {"LABEL_0"};
  const json b = json::parse(*RenderPredictResponse(req, std::vector<float>{0.0f}, one));
  EXPECT_DOUBLE_EQ(b[0][0]["score"].get<double>(), 0.5);
  EXPECT_EQ(b[0][0]["label"], "LABEL_0");
  req.raw_scores = true;
  const json r = json::parse(*RenderPredictResponse(req, std::vector<float>{-2.5f, 1.0f}, labels));
  EXPECT_EQ(r[0][0]["label"], "LABEL_1");
  EXPECT_DOUBLE_EQ(r[0][1]["score"].get<double>(), -2.5);
  EXPECT_FALSE(RenderPredictResponse(req, std::vector<float>{1.0f}, labels).ok());
}

TEST(ParseDecodeRequestTest, OneListOrABatch) {
  auto one = ParseDecodeRequest(R"({"ids":[101,7,102]})");
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->ids.size(), 1u);
  EXPECT_THAT(one->ids[0], ElementsAre(101, 7, 102));
  EXPECT_TRUE(one->skip_special_tokens);
  auto batch = ParseDecodeRequest(R"({"ids":[[1],[2,3]],"skip_special_tokens":false})");
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->ids.size(), 2u);
  EXPECT_FALSE(batch->skip_special_tokens);
  EXPECT_EQ(ErrorTypeFor(ParseDecodeRequest(R"({"ids":[]})").status()), "empty");
  EXPECT_EQ(ErrorTypeFor(ParseDecodeRequest(R"({"ids":[[1],[]]})").status()), "empty");
  EXPECT_THAT(ParseDecodeRequest(R"({"ids":[-1]})").status().message(), HasSubstr("non-negative integer"));
  EXPECT_EQ(HttpStatusFor(ParseDecodeRequest(R"({"ids":[1.5]})").status()), 422);
  EXPECT_EQ(RenderDecodeResponse(std::vector<std::string>{"a b"}), R"(["a b"])");
}

TEST(RenderTeiInfoTest, TeisFields) {
  TeiInfo info;
  info.model_id = "m";
  info.labels = {"LABEL_0"};
  info.max_input_length = 512;
  info.version = "0.1";
  const json j = json::parse(RenderTeiInfo(info));
  EXPECT_EQ(j["model_id"], "m");
  EXPECT_EQ(j["model_type"]["reranker"]["id2label"]["0"], "LABEL_0");
  EXPECT_EQ(j["model_type"]["reranker"]["label2id"]["LABEL_0"], 0);
  EXPECT_EQ(j["max_input_length"], 512);
  EXPECT_TRUE(j["max_batch_requests"].is_null());
  for (const char* field : {"model_sha", "model_dtype", "max_concurrent_requests", "max_batch_tokens",
                            "max_client_batch_size", "auto_truncate", "tokenization_workers", "version", "sha",
                            "docker_label"}) {
    EXPECT_TRUE(j.contains(field)) << field;
  }
}

}  // namespace
}  // namespace tide::api
