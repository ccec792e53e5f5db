// Embedding wire formats (TEI /embed, OpenAI /v1/embeddings, Cohere /v2/embed) and the server's
// vector arithmetic: Matryoshka cut, normalization, Cohere's quantized types, OpenAI's base64.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/embed.h"
#include "api/embedding_vectors.h"
#include "api/status_http.h"

namespace tide::api {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

// ---- vectors ---------------------------------------------------------------------------------------

TEST(CutAndNormalizeTest, CutsFirstThenNormalizesEachRow) {
  const std::vector<float> m = {3, 4, 12, 0, 0, 5, 0, 0};  // 2 rows x 4
  const std::vector<float> cut = CutAndNormalize(m, 2, 4, 2, /*normalize=*/true);
  ASSERT_EQ(cut.size(), 4u);
  // Row 0 cut to (3, 4): norm 5 (the 12 it dropped does not count).
  EXPECT_FLOAT_EQ(cut[0], 0.6f);
  EXPECT_FLOAT_EQ(cut[1], 0.8f);
  EXPECT_FLOAT_EQ(cut[2], 0.0f);
  EXPECT_FLOAT_EQ(cut[3], 1.0f);
  const std::vector<float> whole = CutAndNormalize(m, 2, 4, 0, /*normalize=*/false);
  EXPECT_EQ(whole, m);
  const std::vector<float> full = CutAndNormalize(m, 2, 4, 4, true);
  double norm = 0;
  for (size_t i = 0; i < 4; ++i) norm += full[i] * full[i];
  EXPECT_NEAR(norm, 1.0, 1e-6);
  EXPECT_FLOAT_EQ(full[2], 12.0f / 13.0f);
}

TEST(CutAndNormalizeTest, AZeroRowStaysZero) {
  const std::vector<float> zero = {0, 0, 0};
  EXPECT_EQ(CutAndNormalize(zero, 1, 3, 0, true), zero);
}

TEST(QuantizeTest, Int8AndUint8ReadTheUnitRange) {
  const std::vector<float> row = {1.0f, -1.0f, 0.5f, -0.5f, 0.0f, 2.0f, -2.0f, 0.003f};
  EXPECT_THAT(Quantize(row, EmbeddingType::kInt8), ElementsAre(127, -127, 64, -64, 0, 127, -128, 0));
  // round((x + 1) * 127.5): 255, 0, 191.25 -> 191, 63.75 -> 64, 127.5 -> 128 (to even), clamps.
  EXPECT_THAT(Quantize(row, EmbeddingType::kUint8), ElementsAre(255, 0, 191, 64, 128, 255, 0, 128));
  EXPECT_TRUE(Quantize(row, EmbeddingType::kFloat).empty());
}

TEST(QuantizeTest, BinaryPacksSignBitsMostSignificantFirst) {
  // 10 values: bits 1 0 1 1 0 0 0 1 | 1 0 -> 0b10110001 = 177, 0b10000000 = 128.
  const std::vector<float> row = {0.1f, -0.2f, 0.3f, 0.4f, 0.0f, -1.0f, -0.5f, 2.0f, 0.7f, -0.7f};
  EXPECT_THAT(Quantize(row, EmbeddingType::kUbinary), ElementsAre(177, 128));
  EXPECT_THAT(Quantize(row, EmbeddingType::kBinary), ElementsAre(177 - 128, 0));
  // The definition, bit by bit: value i is bit (7 - i % 8) of byte i / 8, set when value > 0.
  const std::vector<int32_t> packed = Quantize(row, EmbeddingType::kUbinary);
  for (size_t i = 0; i < row.size(); ++i) {
    EXPECT_EQ(((packed[i / 8] >> (7 - i % 8)) & 1) == 1, row[i] > 0) << i;
  }
}

TEST(Base64FloatsTest, LittleEndianFloat32) {
  // 1.0f = 00 00 80 3f, -2.0f = 00 00 00 c0 -> base64 of those 8 bytes.
  EXPECT_EQ(Base64Floats(std::vector<float>{1.0f, -2.0f}), "AACAPwAAAMA=");
  EXPECT_EQ(Base64Floats(std::vector<float>{1.0f}), "AACAPw==");
  EXPECT_EQ(Base64Floats(std::vector<float>{}), "");
  // Decoding gives the floats back bit for bit.
  const std::vector<float> row = {0.1f, -3.25f, 1e-7f};
  const std::string text = Base64Floats(row);
  std::string bytes;
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=') break;
    acc = (acc << 6) | static_cast<uint32_t>(alphabet.find(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  ASSERT_EQ(bytes.size(), row.size() * 4);
  for (size_t i = 0; i < row.size(); ++i) {
    float back = 0;
    std::memcpy(&back, bytes.data() + 4 * i, 4);
    EXPECT_EQ(back, row[i]);
  }
}

// ---- TEI ---------------------------------------------------------------------------------------------

TEST(ParseTeiEmbedRequestTest, FieldsAndShapes) {
  auto one = ParseTeiEmbedRequest(R"({"inputs":"a text"})");
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->inputs.size(), 1u);
  EXPECT_EQ(one->inputs[0].text, "a text");
  EXPECT_FALSE(one->normalize.has_value());
  auto all = ParseTeiEmbedRequest(
      R"({"inputs":["a","b"],"normalize":false,"truncate":false,"truncation_direction":"Left","prompt_name":"query","dimensions":16})");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->inputs.size(), 2u);
  EXPECT_EQ(all->normalize, false);
  EXPECT_EQ(all->truncate, false);
  EXPECT_EQ(all->truncation_direction, tokenizer::TruncationDirection::kLeft);
  EXPECT_EQ(all->prompt_name, "query");
  EXPECT_EQ(all->dimensions, 16u);
}

TEST(ParseTeiEmbedRequestTest, ErrorsHaveTeisKinds) {
  EXPECT_EQ(HttpStatusFor(ParseTeiEmbedRequest(R"({"inputs":[]})").status()), 400);
  EXPECT_EQ(ErrorTypeFor(ParseTeiEmbedRequest(R"({"inputs":[]})").status()), "empty");
  EXPECT_EQ(HttpStatusFor(ParseTeiEmbedRequest(R"({"inputs":[1]})").status()), 422);
  EXPECT_EQ(HttpStatusFor(ParseTeiEmbedRequest(R"({"inputs":"a","dimensions":0})").status()), 422);
  EXPECT_EQ(HttpStatusFor(ParseTeiEmbedRequest(R"({"inputs":"a","dimensions":-3})").status()), 422);
  EXPECT_EQ(HttpStatusFor(ParseTeiEmbedRequest(R"({"inputs":)").status()), 400);
  RequestLimits limits;
  limits.max_documents = 2;
  auto over = ParseTeiEmbedRequest(R"({"inputs":["a","b","c"]})", limits);
  EXPECT_EQ(HttpStatusFor(over.status()), 422);
  EXPECT_THAT(std::string(over.status().message()), HasSubstr("max_client_batch_size 2"));
}

TEST(RenderTeiEmbedResponseTest, AlwaysListOfLists) {
  auto body = RenderTeiEmbedResponse(2, std::vector<float>{0.5f, 0.25f, 1, 0}, 2);
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(json::parse(*body), json::parse("[[0.5,0.25],[1.0,0.0]]"));
  EXPECT_FALSE(RenderTeiEmbedResponse(2, std::vector<float>{1, 2, 3}, 2).ok());
}

// TEI /embed_all: /embed's body without normalize and dimensions (ignored as unknown fields).
TEST(ParseTeiEmbedAllRequestTest, EmbedsFieldsWithoutNormalizeOrDimensions) {
  auto all = ParseTeiEmbedAllRequest(
      R"({"inputs":["a","b"],"truncate":false,"truncation_direction":"Left","prompt_name":"query","normalize":"x","dimensions":0})");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->inputs.size(), 2u);
  EXPECT_EQ(all->truncate, false);
  EXPECT_EQ(all->truncation_direction, tokenizer::TruncationDirection::kLeft);
  EXPECT_EQ(all->prompt_name, "query");
  EXPECT_FALSE(all->normalize.has_value());
  EXPECT_FALSE(all->dimensions.has_value());
  EXPECT_EQ(ErrorTypeFor(ParseTeiEmbedAllRequest(R"({"inputs":[]})").status()), "empty");
  EXPECT_EQ(HttpStatusFor(ParseTeiEmbedAllRequest(R"({"inputs":[1]})").status()), 422);
  EXPECT_EQ(HttpStatusFor(ParseTeiEmbedAllRequest(R"({"truncate":true})").status()), 422);
}

TEST(RenderTeiEmbedAllResponseTest, OneListOfTokenVectorsPerInput) {
  const std::vector<std::vector<float>> states = {{1, 2, 3, 4, 5, 6}, {0.5f, -0.5f}};
  auto body = RenderTeiEmbedAllResponse(states, 2);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(json::parse(*body), json::parse("[[[1.0,2.0],[3.0,4.0],[5.0,6.0]],[[0.5,-0.5]]]"));
  EXPECT_EQ(RenderTeiEmbedAllResponse(std::vector<std::vector<float>>{{1, 2, 3}}, 2).status().code(),
            absl::StatusCode::kInternal);
  EXPECT_FALSE(RenderTeiEmbedAllResponse(std::vector<std::vector<float>>{{NAN, 1}}, 2).ok());
  EXPECT_FALSE(RenderTeiEmbedAllResponse(std::vector<std::vector<float>>{{1, 2}}, 0).ok());
}

// ---- OpenAI ------------------------------------------------------------------------------------------

TEST(ParseOpenAiEmbeddingsRequestTest, StringsAndTokenArrays) {
  auto text = ParseOpenAiEmbeddingsRequest(R"({"input":"hello","model":"m","encoding_format":"base64","dimensions":8})");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->inputs[0].text, "hello");
  EXPECT_EQ(text->model, "m");
  EXPECT_TRUE(text->base64);
  EXPECT_EQ(text->dimensions, 8u);
  auto ids = ParseOpenAiEmbeddingsRequest(R"({"input":[101, 7592, 102]})");
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_EQ(ids->inputs.size(), 1u);
  EXPECT_THAT(*ids->inputs[0].ids, ElementsAre(101, 7592, 102));
  auto batch = ParseOpenAiEmbeddingsRequest(R"({"input":[[1,2],[3]]})");
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->inputs.size(), 2u);
  auto texts = ParseOpenAiEmbeddingsRequest(R"({"input":["a","b"]})");
  ASSERT_TRUE(texts.ok());
  EXPECT_FALSE(texts->inputs[1].ids.has_value());
}

TEST(ParseOpenAiEmbeddingsRequestTest, ErrorsRenderAsOpenAiErrors) {
  auto empty = ParseOpenAiEmbeddingsRequest(R"({"input":[]})");
  ASSERT_FALSE(empty.ok());
  ApiError e = OpenAiError(empty.status());
  EXPECT_EQ(e.http_status, 400);
  const json body = json::parse(e.body);
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(body["error"]["message"].is_string());
  EXPECT_TRUE(body["error"].contains("param"));
  auto format = ParseOpenAiEmbeddingsRequest(R"({"input":"a","encoding_format":"int4"})");
  ASSERT_FALSE(format.ok());
  EXPECT_THAT(std::string(format.status().message()), HasSubstr("encoding_format"));
  EXPECT_EQ(OpenAiError(format.status()).http_status, 400);
  EXPECT_FALSE(ParseOpenAiEmbeddingsRequest(R"({"input":[[]]})").ok());
  EXPECT_FALSE(ParseOpenAiEmbeddingsRequest(R"({"input":[1,-2]})").ok());
}

TEST(RenderOpenAiEmbeddingsResponseTest, FloatAndBase64) {
  EmbedRequest req;
  req.inputs = {{"a", std::nullopt}, {"b", std::nullopt}};
  auto body = RenderOpenAiEmbeddingsResponse(req, "m", std::vector<float>{1, 0, 0, 1}, 2, 7);
  ASSERT_TRUE(body.ok());
  const json j = json::parse(*body);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(j["usage"]["total_tokens"], 7);
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_EQ(j["data"][1]["object"], "embedding");
  EXPECT_EQ(j["data"][1]["index"], 1);
  EXPECT_EQ(j["data"][1]["embedding"], json::parse("[0.0,1.0]"));
  req.base64 = true;
  auto b64 = RenderOpenAiEmbeddingsResponse(req, "m", std::vector<float>{1, -2, 0, 1}, 2, 7);
  ASSERT_TRUE(b64.ok());
  EXPECT_EQ(json::parse(*b64)["data"][0]["embedding"], "AACAPwAAAMA=");
}

// ---- Cohere ------------------------------------------------------------------------------------------

TEST(ParseCohereEmbedRequestTest, FieldsAndErrors) {
  auto r = ParseCohereEmbedRequest(
      R"({"texts":["a"],"model":"m","input_type":"search_query","embedding_types":["int8","float","int8"],"truncate":"START","output_dimension":32})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->input_type, "search_query");
  EXPECT_THAT(r->embedding_types, ElementsAre(EmbeddingType::kInt8, EmbeddingType::kFloat));
  EXPECT_EQ(r->truncation_direction, tokenizer::TruncationDirection::kLeft);
  EXPECT_EQ(r->dimensions, 32u);
  auto plain = ParseCohereEmbedRequest(R"({"texts":["a"]})");
  ASSERT_TRUE(plain.ok());
  EXPECT_THAT(plain->embedding_types, ElementsAre(EmbeddingType::kFloat));
  for (const char* bad : {R"({"texts":[]})", R"({})", R"({"texts":["a"],"embedding_types":["int4"]})",
                          R"({"texts":["a"],"input_type":"image"})", R"({"texts":["a"],"truncate":"MIDDLE"})",
                          R"({"texts":"a"})"}) {
    auto s = ParseCohereEmbedRequest(bad);
    ASSERT_FALSE(s.ok()) << bad;
    ApiError e = CohereError(s.status());
    EXPECT_EQ(e.http_status, 400) << bad;
    EXPECT_TRUE(json::parse(e.body)["message"].is_string()) << bad;
  }
  EXPECT_THAT(PromptNamesFor("search_query"), ElementsAre("query"));
  EXPECT_THAT(PromptNamesFor("search_document"), ElementsAre("document", "passage"));
}

TEST(RenderCohereEmbedResponseTest, EveryTypeAsDefined) {
  EmbedRequest req;
  req.inputs = {{"first", std::nullopt}, {"second", std::nullopt}};
  req.embedding_types = {EmbeddingType::kFloat, EmbeddingType::kInt8, EmbeddingType::kUint8, EmbeddingType::kBinary,
                         EmbeddingType::kUbinary};
  const std::vector<float> v = {0.6f, -0.3f, 0.0f, 1.0f};
  auto body = RenderCohereEmbedResponse(req, "id-1", v, 2, 5);
  ASSERT_TRUE(body.ok());
  const json j = json::parse(*body);
  EXPECT_EQ(j["id"], "id-1");
  EXPECT_EQ(j["response_type"], "embeddings_by_type");
  EXPECT_EQ(j["texts"], json::parse(R"(["first","second"])"));
  EXPECT_EQ(j["meta"]["api_version"]["version"], "2");
  EXPECT_EQ(j["meta"]["billed_units"]["input_tokens"], 5);
  const json& e = j["embeddings"];
  EXPECT_NEAR(e["float"][0][0].get<double>(), 0.6, 1e-7);
  EXPECT_EQ(e["int8"], json::parse("[[76,-38],[0,127]]"));      // round(0.6*127)=76, round(-0.3*127)=-38
  EXPECT_EQ(e["uint8"], json::parse("[[204,89],[128,255]]"));   // round(1.6*127.5)=204, round(0.7*127.5)=89
  EXPECT_EQ(e["ubinary"], json::parse("[[128],[64]]"));         // (1,0) -> 0b10000000, (0,1) -> 0b01000000
  EXPECT_EQ(e["binary"], json::parse("[[0],[-64]]"));
}

}  // namespace
}  // namespace tide::api
